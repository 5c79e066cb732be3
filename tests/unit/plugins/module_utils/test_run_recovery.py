"""A run after its own process (module_utils/run_recovery.py): LOST,
CANCELED or FAILED once its processes are gone, RUNNING while just
submitted; a resume skips what FINISHED and refuses a changed Fuzzfile."""

import pytest
from run_records import JOBS, RUN, a_dead_process, job, new_record, this_process

from ansible_collections.fuzz.multinode.plugins.module_utils import record_time
from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr
from ansible_collections.fuzz.multinode.plugins.module_utils import run_recovery as recovery
from ansible_collections.fuzz.multinode.plugins.module_utils import run_views as views


@pytest.fixture
def record(tmp_path):
    return new_record(tmp_path)


def test_a_run_whose_processes_are_gone_is_lost_once_looked_at(record):
    assert recovery.settle(record)["state"] == rr.RUNNING  # this process owns it
    rr.job_ended(record, "prepare", "FINISHED")
    rr.job_started(record, "solve", ["node-1"])
    record.update(lambda state: state.__setitem__("owner", a_dead_process()))
    state = recovery.settle(record)
    assert state["state"] == rr.LOST and state["ended"]
    assert [state["jobs"][name]["state"] for name in state["order"]] == ["FINISHED", "LOST", "NOT_RUN"]
    assert record.state()["state"] == rr.LOST  # written so


def test_a_run_whose_playbook_ended_before_any_job_started_is_failed(record):
    record.update(lambda state: state.__setitem__("owner", a_dead_process()))
    state = recovery.settle(record)
    assert state["state"] == rr.FAILED and "ended before any job started" in state["message"]
    assert {entry["state"] for entry in state["jobs"].values()} == {"NOT_RUN"}
    assert "ended before any job started" in views.status_lines(state)[0]


def test_a_canceled_run_whose_processes_are_gone_is_canceled_by_its_user(record):
    rr.request_cancel(record, "me@controller")
    record.update(lambda state: state.__setitem__("owner", a_dead_process()))
    state = recovery.settle(record)
    assert state["state"] == rr.CANCELED and state["canceled_by"] == "me@controller"


def test_a_run_just_submitted_is_running_until_its_runner_takes_it(tmp_path):
    record = rr.submitted(str(tmp_path), RUN, b"x", ["ansible-playbook"], "wf", str(tmp_path / "logs"))
    assert recovery.settle(record)["state"] == rr.RUNNING
    assert recovery.settle(record, now=record_time.seconds_of(record.state()["started"]) + 61)["state"] == rr.FAILED


def test_resume_skips_the_finished_jobs_and_refuses_a_changed_one(record, tmp_path):
    with pytest.raises(rr.RecordError, match="is RUNNING: cancel it first"):
        recovery.resume_plan(record.state(), JOBS)
    rr.job_ended(record, "prepare", "FINISHED", "job prepare finished")
    rr.job_ended(record, "solve", "FAILED", "rank 0 exited with status 1")
    rr.run_ended(record, rr.FAILED)
    assert recovery.resume_plan(record.state(), JOBS) == ["prepare"]
    changed = [JOBS[0], dict(JOBS[1], nodes=3), JOBS[2]]
    with pytest.raises(rr.RecordError, match="job solve changed since the run"):
        recovery.resume_plan(record.state(), changed)
    with pytest.raises(rr.RecordError, match="job extra is new"):
        recovery.resume_plan(record.state(), JOBS + [job("extra")])
    with pytest.raises(rr.RecordError, match="job report is not in it any more"):
        recovery.resume_plan(record.state(), JOBS[:2])
    recovery.resumed(record, ["prepare"], this_process(), str(tmp_path / "logs"))
    state = record.state()
    assert state["state"] == rr.RUNNING and len(state["resumed"]) == 1
    assert [state["jobs"][name]["state"] for name in state["order"]] == ["SKIPPED", "WAITING", "WAITING"]
    assert [line.split() for line in views.status_lines(state)[2:5]] == [
        ["prepare", "SKIPPED", _clock_of(state, "prepare", "start"), _clock_of(state, "prepare", "end"), "-", "-"],
        ["solve", "WAITING", "-", "-", "-", "prepare"],
        ["report", "WAITING", "-", "-", "-", "solve"]]
    rr.job_ended(record, "solve", "FINISHED")
    rr.job_ended(record, "report", "FAILED")
    rr.run_ended(record, rr.FAILED)
    assert recovery.resume_plan(record.state(), JOBS) == ["prepare", "solve"]  # SKIPPED counts as FINISHED
    recovery.resumed(record, ["prepare", "solve"], this_process(), str(tmp_path / "logs"))
    rr.run_ended(record, rr.FINISHED)
    with pytest.raises(rr.RecordError, match="is FINISHED: there is nothing to resume"):
        recovery.resume_plan(record.state(), JOBS)


def test_a_resume_into_another_log_directory_finds_each_job_s_log_where_it_was_written(record, tmp_path):
    rr.job_ended(record, "prepare", "FINISHED")
    rr.job_ended(record, "solve", "FAILED")
    rr.run_ended(record, rr.FAILED)
    recovery.resumed(record, ["prepare"], this_process(), str(tmp_path / "again"))
    state = record.state()
    assert views.job_log_path(state, "prepare") == str(tmp_path / "logs" / "prepare.log")
    assert views.job_log_path(state, "solve") == str(tmp_path / "again" / "solve.log")  # while it runs again
    rr.job_ended(record, "solve", "FINISHED")
    assert views.job_log_path(record.state(), "solve") == str(tmp_path / "again" / "solve.log")
    assert rr.report_path(record.state()) == str(tmp_path / "again" / rr.REPORT_FILE)


def _clock_of(state, name, which):
    return state["jobs"][name][which][11:19]


def test_a_service_runs_again_on_resume(tmp_path):
    jobs = [job("db", kind="service"), job("load", ["db"])]
    record = rr.open_record(str(tmp_path), RUN, b"x", [], jobs, "wf", "/l", this_process())
    rr.job_ended(record, "db", "FINISHED")
    rr.run_ended(record, rr.FAILED)
    assert recovery.resume_plan(record.state(), jobs) == []
