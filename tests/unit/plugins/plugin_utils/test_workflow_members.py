"""The workflow runner's members (plugins/plugin_utils/workflow_members.py,
for plugins/action/workflow_jobs.py): how many hosts a job needs, a job's
outcome from what its playbook reported, its lines on the way to the
screen, its stop. The runner with real playbooks is checked in
tests/local/test_local_parallel.py."""

import signal
import subprocess
import sys
from unittest import mock

from ansible_collections.fuzz.multinode.plugins.plugin_utils.workflow_members import (
    Member,
    outcome,
    plan_entry,
    reported,
)

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
