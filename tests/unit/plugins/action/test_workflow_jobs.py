"""The workflow runner's own logic (plugins/action/workflow_jobs.py): how many
hosts a job needs, a job's outcome from what its playbook reported, its
lines on the way to the screen; and the callback of a job's playbook
(plugins/callback/workflow_job.py), which reports. The runner with real
playbooks is checked in tests/local/test_local_parallel.py."""

import json
import signal
import subprocess
import sys
from unittest import mock

from ansible_collections.fuzz.multinode.plugins.action.workflow_jobs import Member, outcome, plan_entry, reported
from ansible_collections.fuzz.multinode.plugins.callback.workflow_job import CallbackModule

ROW = "%-6s  %-8s  %-8s  %-8s  %7s  %-5s  %s"


def needs(job, host_count, local=False):
    return plan_entry(dict(job, name="j"), [("h%d" % index, None) for index in range(host_count)],
                      local, pinned=False)["needs"]


def test_a_job_needs_its_nodes_a_task_array_up_to_max_hosts_and_local_mode_one_machine():
    assert needs({"nodes": 3, "max_hosts": 3}, 4) == 3
    assert needs({"nodes": 5, "max_hosts": 5}, 4) == 5  # too many: the schedule says so
    assert needs({"nodes": 1, "max_hosts": 8, "task_array": {"start": 1, "end": 8}}, 3) == 3
    assert needs({"nodes": 1, "max_hosts": 2, "task_array": {"start": 1, "end": 8}}, 3) == 2
    assert needs({"nodes": 4, "max_hosts": 4}, 1, local=True) == 1


def test_a_job_with_devices_may_run_only_on_the_hosts_that_have_enough():
    gpus = [("h1", {"nvidia.com/gpu": 2}), ("h2", {"nvidia.com/gpu": 1}), ("h3", None), ("h4", {})]
    entry = plan_entry({"name": "train", "nodes": 2, "max_hosts": 2, "devices": {"nvidia.com/gpu": 2}},
                       gpus, local=False, pinned=False)
    assert (entry["needs"], entry["hosts"]) == (2, ["h1", "h3"])
    assert "hosts" not in plan_entry({"name": "plain", "nodes": 2, "max_hosts": 2}, gpus, False, False)


def test_an_outcome_has_the_rows_fields_as_the_play_records_them():
    finished = outcome("solve", "FINISHED", "", 3600.0, 3725.5, 120.25, ROW)
    assert finished == {"status": "FINISHED", "message": "", "start": "01:00:00", "end": "01:02:05",
                        "seconds": "120.2", "summary": "solve FINISHED",
                        "row": "solve   FINISHED  01:00:00  01:02:05    120.2  -"}
    not_run = outcome("report", "NOT_RUN", "job report not run: it depends on solve, which did not finish",
                      row_format=ROW, waits_for="solve")
    assert not_run["row"] == ("report  NOT_RUN   -         -               -  solve  job report not run: it depends "
                              "on solve, which did not finish")
    assert not_run["summary"] == "report NOT_RUN: job report not run: it depends on solve, which did not finish"


def test_a_members_outcome_is_its_launch_result_else_the_failure_its_playbook_reported():
    assert reported("j", {"launch": {"status": "FAILED", "message": "rank 0 exited with status 3",
                                     "duration": 1.5}}, 0) == ("FAILED", "rank 0 exited with status 3", 1.5)
    assert reported("j", {"launch": {"status": "FAILED", "msg": "job j cannot start on node n1: no"}}, 0) == (
        "FAILED", "job j cannot start on node n1: no", None)
    assert reported("j", {"failure": "unreachable on n2: ssh: connect refused"}, 4) == (
        "FAILED", "job j did not run to the end: unreachable on n2: ssh: connect refused", None)
    assert reported("j", {}, 2) == (
        "FAILED", "job j did not run to the end: its ansible-playbook ended with status 2; see its lines above",
        None)


def test_a_members_lines_are_whole_each_with_its_jobs_name_and_made_harmless():
    member = Member("sweep", ["n1"], mock.Mock(), "/nowhere")
    assert member.lines(b"[sweep] a line\n[WARN") == ["[sweep] a line"]
    assert member.lines(b"ING]: careful\nescape \x1b[2J\n") == ["[sweep] [WARNING]: careful",
                                                                "[sweep] escape \\x1b[2J"]
    assert member.lines(b"unterminated") == []
    assert member.lines(b"") == ["[sweep] unterminated"]  # the end of its output


def test_a_member_is_stopped_as_a_terminal_would_its_whole_process_group():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        Member("j", ["n1"], process, "/nowhere").stop()
        assert process.wait(timeout=30) == -signal.SIGINT
    finally:
        if process.poll() is None:
            process.kill()


# -- the callback of a job's playbook --------------------------------------------------

class Result:
    """A task result as ansible-core 2.19 hands it to a callback."""

    def __init__(self, action, data, host="node-1", name="a task"):
        self.result, self.host = data, mock.Mock(get_name=lambda: host)
        self.task = mock.Mock(action=action, get_name=lambda: name)


def callback(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZ_MULTINODE_WORKFLOW_JOB", "solve")
    monkeypatch.setenv("FUZZ_MULTINODE_WORKFLOW_REPORT", str(tmp_path / "report.json"))
    plugin = CallbackModule()
    plugin._display = mock.Mock()
    plugin._warnings = mock.Mock()
    return plugin


def shown(plugin):
    return [call.args[0] for call in plugin._display.display.call_args_list]


def test_the_callback_reports_the_launch_result_and_shows_debug_messages_as_the_jobs_lines(tmp_path, monkeypatch):
    plugin = callback(tmp_path, monkeypatch)
    plugin.v2_runner_on_ok(Result("fuzz.multinode.node_job", {"changed": True}))
    rank = {"rank": 0, "name": "solve-0", "node": "n1", "state": "exited", "status": 0}
    plugin.v2_runner_on_ok(Result("fuzz.multinode.launch_job", {"status": "FINISHED", "duration": 2.5,
                                                                "ranks": [rank], "message": ""}))
    plugin.v2_runner_on_ok(Result("ansible.builtin.debug", {"msg": ["job solve FINISHED", "rank  host name"]}))
    assert shown(plugin) == ["[solve] job solve FINISHED", "[solve] rank  host name"]
    assert json.loads((tmp_path / "report.json").read_text()) == {
        "launch": {"status": "FINISHED", "message": "", "msg": None, "duration": 2.5, "ranks": [rank]}}


def test_the_callback_shows_and_reports_the_first_failure(tmp_path, monkeypatch):
    plugin = callback(tmp_path, monkeypatch)
    plugin.v2_runner_on_failed(Result("fuzz.multinode.rank_plan", {"msg": "no address"}, host="n1",
                                      name="Plan the job's ranks"), ignore_errors=True)
    plugin.v2_runner_on_unreachable(Result("fuzz.multinode.node_job", {"msg": "ssh: refused"}, host="n2",
                                           name="Register"))
    plugin.v2_runner_on_failed(Result("fuzz.multinode.node_job", {"msg": "later"}, host="n3", name="Clean up"))
    assert shown(plugin) == ["[solve] unreachable on n2: Register: ssh: refused",
                             "[solve] failed on n3: Clean up: later"]
    assert json.loads((tmp_path / "report.json").read_text()) == {"failure": "unreachable on n2: ssh: refused"}
