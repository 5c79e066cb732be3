"""The run record (module_utils/run_record.py, run_views.py): private files
written whole, no secret in the command line, job states as a run goes,
the refusals of status and cancel with messages that say why (a run after
its process, LOST or resumed: test_run_recovery.py)."""

import json
import os
import stat

import pytest
from run_records import JOBS, RUN, a_dead_process, new_record, this_process

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr
from ansible_collections.fuzz.multinode.plugins.module_utils import run_views as views
from ansible_collections.fuzz.multinode.plugins.module_utils.run_command import recorded_command


@pytest.fixture
def record(tmp_path):
    return new_record(tmp_path)


def test_the_record_is_private_and_holds_the_fuzzfile_and_every_job(record, tmp_path):
    assert stat.S_IMODE(os.stat(tmp_path / "runs").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(record.path).st_mode) == 0o700
    for name in os.listdir(record.path):
        assert stat.S_IMODE(os.stat(os.path.join(record.path, name)).st_mode) == 0o600, name
    assert open(record.file(rr.FUZZFILE), "rb").read() == b"version: v4\njobs: {}\n"
    state = record.state()
    assert state["state"] == rr.RUNNING and state["order"] == ["prepare", "solve", "report"]
    assert state["jobs"]["solve"]["depends_on"] == ["prepare"]
    assert state["jobs"]["solve"]["state"] == rr.WAITING
    assert not [name for name in os.listdir(record.path) if name.endswith(".tmp")]


@pytest.mark.parametrize("argv, recorded", [
    (["-e", "fuzz_multinode_secrets={\"api\": \"s3cr3t\"}"], ["-e", "fuzz_multinode_secrets=(not recorded)"]),
    (["-e", "a=1 db_password=hunter2"], ["-e", "a=1 db_password=(not recorded)"]),
    (["--extra-vars={\"api_token\": \"x\", \"job\": \"j\"}"],
     ["--extra-vars", "{\"api_token\": \"(not recorded)\", \"job\": \"j\"}"]),
    (["-efuzz_multinode_secrets=x"], ["-e", "fuzz_multinode_secrets=(not recorded)"]),
    (["-e", "@secrets.yml", "-i", "hosts"], ["-e", "@secrets.yml", "-i", "hosts"]),
    (["-e", "{bad: yaml, secret: x"], ["-e", "(inline variables not recorded)"]),
])
def test_the_command_line_never_holds_a_secret_value(argv, recorded):
    assert recorded_command(argv) == recorded


def test_the_recorded_command_line_of_a_run_has_no_secret(record):
    command = json.load(open(record.file(rr.COMMAND_FILE)))
    assert "-e" in command["argv"] and "fuzzfile=wf.yml" in command["argv"]
    assert not any("\"t\"" in word for word in command["argv"])


def test_a_shared_runs_directory_is_left_as_it_is_and_each_record_is_private(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    record = rr.open_record(str(shared), RUN, b"x", [], JOBS, "wf", "/l", this_process())
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(record.path).st_mode) == 0o700


def test_jobs_and_services_are_recorded_as_they_run(record, tmp_path):
    rr.job_started(record, "prepare", ["node-1", "node-2"])
    state = record.state()["jobs"]["prepare"]
    assert state["state"] == rr.RUNNING and state["hosts"] == ["node-1", "node-2"] and state["start"]
    ranks = [{"rank": 0, "name": "prepare-0", "node": "node-1", "state": "exited", "status": 0,
              "start": 1796371149.8, "end": 1796371151.5, "duration": 1.7, "log": "job.log", "calls": 1},
             {"rank": 1, "name": "prepare-1", "node": "node-2", "state": "exited", "status": 3,
              "start": 1796371149.8, "end": 1796371151.5, "duration": 1.7, "log": "rank-1.log"}]
    rr.job_ended(record, "prepare", "FAILED", "rank 1 exited with status 3", 2.5, ranks)
    entry = record.state()["jobs"]["prepare"]
    assert entry["state"] == "FAILED" and entry["duration"] == 2.5 and entry["end"]
    logs = str(tmp_path / "logs")
    assert entry["log"] == logs + "/prepare.log" and entry["rank_logs"] == logs + "/prepare"
    assert entry["ranks"][1]["status"] == 3 and entry["ranks"][1]["start"] == "2026-12-04T07:59:09.800Z"
    assert "calls" not in entry["ranks"][0]
    rr.job_event(record, "solve", "ready")
    assert record.state()["jobs"]["solve"]["ready"]
    lines = views.status_lines(record.state())
    assert lines[0].startswith("run %s (wf): RUNNING" % RUN)
    assert any(line.split()[:2] == ["prepare", "FAILED"] for line in lines)
    assert any(line.split()[:5] == ["1", "prepare-1", "node-2", "3", logs + "/prepare/rank-1.log"] for line in lines)


def test_the_end_of_a_run_ends_every_job(record):
    rr.job_ended(record, "prepare", "FINISHED")
    rr.job_started(record, "solve", ["node-1"])
    state = rr.run_ended(record, rr.workflow_state({"prepare": {"status": "FINISHED"},
                                                    "solve": {"status": "CANCELED"}}), "Ctrl-C")
    assert state["state"] == rr.CANCELED and state["canceled_by"] == "Ctrl-C" and state["ended"]
    assert [state["jobs"][name]["state"] for name in state["order"]] == ["FINISHED", "CANCELED", "CANCELED"]
    assert rr.workflow_state({"a": {"status": "FINISHED"}}) == rr.FINISHED
    assert rr.workflow_state({"a": {"status": "FINISHED"}}, transfer_failures=1) == rr.FAILED
    assert rr.workflow_state({"a": {"status": "NOT_RUN"}}) == rr.FAILED


def test_runs_are_listed_newest_first_with_a_corrupt_one_named(tmp_path):
    directory = str(tmp_path)
    older = rr.open_record(directory, "20261203T000000Z-000001", b"x", [], JOBS, "old", "/l", a_dead_process())
    rr.run_ended(older, rr.FINISHED)
    older.update(lambda state: state.update(started="2026-12-03T00:00:00Z", ended="2026-12-03T01:02:03Z"))
    newer = rr.open_record(directory, "20261204T000000Z-000002", b"x", [], JOBS, "new", "/l", this_process())
    newer.update(lambda state: state.update(started="2026-12-04T00:00:00Z"))
    os.makedirs(os.path.join(directory, "20261205T000000Z-000003"))
    open(os.path.join(directory, "20261205T000000Z-000003", "state.json"), "w").write("{not json")
    runs = views.list_runs(directory)
    assert [entry["run"] for entry in runs] == ["20261205T000000Z-000003", "20261204T000000Z-000002",
                                                "20261203T000000Z-000001"]
    assert {entry["run"]: entry["state"] for entry in runs} == {
        "20261205T000000Z-000003": "CORRUPT", "20261204T000000Z-000002": "RUNNING",
        "20261203T000000Z-000001": "FINISHED"}
    lines = views.runs_lines(runs)
    assert lines[0].split() == ["run", "workflow", "state", "started", "duration"]
    assert lines[3].split() == ["20261203T000000Z-000001", "old", "FINISHED", "2026-12-03T00:00:00Z", "1h02m03s"]
    assert "corrupt" in [line for line in lines if "CORRUPT" in line][0]


def test_unknown_runs_bad_ids_other_users_and_corrupt_records_say_so(record, tmp_path):
    directory = str(tmp_path / "runs")
    with pytest.raises(rr.RecordError, match="no run 20261204T000000Z-ffffff in .*fuzz.multinode.runs"):
        rr.find(directory, "20261204T000000Z-ffffff")
    with pytest.raises(rr.RecordError, match="is not a run id"):
        rr.find(directory, "../../etc")
    with pytest.raises(rr.RecordError, match="is user .*'s, not yours"):
        rr.find(directory, RUN, uid=os.getuid() + 1)
    open(record.file(rr.STATE_FILE), "w").write("{\"state\": \"RUNNING\"")
    with pytest.raises(rr.RecordError, match="record is corrupt"):
        rr.find(directory, RUN).state()


def test_only_a_running_run_can_be_canceled(record):
    views.cancelable(record.state())
    rr.run_ended(record, rr.FINISHED)
    with pytest.raises(rr.RecordError, match="is FINISHED since .*nothing to cancel"):
        views.cancelable(record.state())


def test_logs_are_every_job_s_in_order_or_the_one_named(record, tmp_path):
    state = record.state()
    assert views.logged_jobs(state, None) == ["prepare", "solve", "report"]
    assert views.logged_jobs(state, "solve") == ["solve"]
    assert views.job_log_path(state, "solve") == str(tmp_path / "logs" / "solve.log")
    with pytest.raises(rr.RecordError, match="has no job nope .its jobs: prepare, solve, report"):
        views.logged_jobs(state, "nope")


def test_ansible_runner_s_command_file_keeps_no_environment_nor_secret(record):
    artifacts = os.path.join(record.runner_dir, "artifacts", "ident")
    os.makedirs(artifacts)
    with open(os.path.join(artifacts, "command"), "w") as handle:
        json.dump({"command": ["ansible-playbook", "-e", "fuzz_multinode_secrets={\"a\": 1}"], "cwd": "/w",
                   "env": {"AWS_SECRET_ACCESS_KEY": "x"}}, handle)
    rr.scrub_runner_command(record)
    command = json.load(open(os.path.join(artifacts, "command")))
    assert command == {"command": ["ansible-playbook", "-e", "fuzz_multinode_secrets=(not recorded)"],
                       "cwd": "/w", "scrubbed": True}


def test_every_change_of_the_state_draws_the_runs_page_beside_its_logs(record, tmp_path):
    """report.html (run_report.py), private, written with the state it shows;
    a page that cannot be written is said once, the state written all the same."""
    page = tmp_path / "logs" / "report.html"
    assert "prepare" in page.read_text() and "WAITING" in page.read_text()
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    rr.job_ended(record, "prepare", "FAILED", "rank 1 exited with status 3")
    assert "rank 1 exited with status 3" in page.read_text()
    page.unlink()
    (tmp_path / "logs" / "report.html").mkdir(mode=0o700)  # not a file: cannot be replaced
    rr.job_started(record, "solve", ["node-1"])
    assert record.state()["jobs"]["solve"]["state"] == rr.RUNNING
    assert record.report_problem and "report.html cannot be written" in record.report_problem


def test_the_tables_after_column_shows_what_each_job_waits_for():
    """The workflow's graph in the job tables (run_views.after): a Fuzzfile
    job's depends-on, a record's names and the services it needs RUNNING."""
    assert views.after({"depends_on": []}) == "-"
    assert views.after({"depends_on": [{"name": "prepare", "status": "FINISHED"},
                                       {"name": "db", "status": "RUNNING"}]}) == "prepare, db (RUNNING)"
    assert views.after({"depends_on": ["prepare"], "running_deps": ["db"]}) == "prepare, db (RUNNING)"
