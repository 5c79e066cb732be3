"""The controller's requests to the runtime (multinode_runtime/control.py,
through cli.py): start/status with the log from the offset shown, cancel,
cleanup bringing the ranks' logs, show; a job of another run is left alone."""

import base64
import json
import os
import pwd
import threading

import pytest
from multinode_runtime import cli, control, registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.prepare import prepare_job
from multinode_runtime.spec import JobSpec
from multinode_runtime.supervisor import Supervisor

USER = pwd.getpwuid(os.getuid()).pw_name
RUN, OTHER = "20261201T165012Z-a1b2c3", "20261201T165015Z-d4e5f6"


@pytest.fixture
def node(runtime_state):
    """The runtime's state, logs and /etc/hosts in a temporary directory,
    with job ja registered for RUN on node-1 (ranks 0 and 2 there)."""
    data = {"job": "ja", "run": RUN, "user": USER, "argv": ["true"], "kill_grace": 1, "ranks": [
        {"rank": r, "name": "ja-%d" % r, "node": "node-%d" % (1 + r % 2), "address": "10.0.0.%d" % (1 + r % 2)}
        for r in range(3)]}
    prepare_job(data, JobSpec.from_dict(data), "node-1")
    return runtime_state


def run_cli(capsys, *argv):
    code = cli.main(["multinode-runtime"] + list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


def write_log(name, data):
    with open(os.path.join(registry.LOG_DIR, "ja", name), "wb") as handle:
        handle.write(data)


def test_status_brings_the_log_from_the_offset_shown_and_the_result_once_there(node, capsys):
    write_log(registry.JOB_LOG_NAME, b"one\ntwo\n")
    registry.write_file(registry.job_path("ja", registry.HEARTBEAT_FILE), "", 0o644)
    registry.write_file(registry.job_path("ja", registry.RESULT_FILE),
                        json.dumps({"job": "ja", "status": "FINISHED", "message": "job ja finished"}), 0o644)
    code, answer, _unused = run_cli(capsys, "status", "ja", "--run", RUN, "--log-offset", "4")
    assert code == 0
    assert base64.b64decode(answer.pop("log_data")) == b"two\n"
    assert answer == {"job": "ja", "status": "FINISHED", "message": "job ja finished", "finished": True,
                      "changed": True, "log_size": 8}


def test_a_failed_job_fails_the_status_with_its_message(node):
    registry.write_file(registry.job_path("ja", registry.HEARTBEAT_FILE), "", 0o644)
    registry.write_file(registry.job_path("ja", registry.RESULT_FILE),
                        json.dumps({"status": "FAILED", "message": "rank 1 exited with status 3"}), 0o644)
    answer = control.status("ja", RUN, 0, 0)
    assert (answer["failed"], answer["msg"], answer["finished"]) == (True, "rank 1 exited with status 3", True)


def test_a_supervisor_that_ended_without_a_result_fails_the_job_saying_what_it_printed(node):
    registry.write_file(registry.job_path("ja", registry.HEARTBEAT_FILE), "", 0o644)
    registry.write_file(registry.job_path("ja", registry.SUPERVISOR_PID_FILE), "999999999\n", 0o644)
    registry.write_file(registry.job_path("ja", registry.SUPERVISOR_OUT_FILE), "it broke\n", 0o644)
    answer = control.status("ja", RUN, 0, 0)
    assert answer["msg"] == "the job's supervisor ended without a result: it broke"
    assert (answer["failed"], answer["finished"], answer["status"]) == (True, True, "FAILED")


def test_requests_of_another_run_are_refused_and_change_nothing(node, capsys):
    for argv in (["status", "ja", "--run", OTHER], ["start", "ja", "--run", OTHER],
                 ["cancel", "ja", "--run", OTHER, "why"]):
        code, answer, err = run_cli(capsys, *argv)
        assert (code, answer) == (1, None)
        assert err == "multinode-runtime: job ja on this node belongs to run %s, not to run %s\n" % (RUN, OTHER)
    assert not os.path.exists(registry.job_path("ja", registry.CANCEL_FILE))
    with pytest.raises(RuntimeFailure, match="job jb is not registered on this node"):
        control.status("jb", RUN, 0, 0)


@pytest.mark.parametrize("run_ends", [False, True])
def test_a_cancel_request_is_what_the_supervisor_reads(node, capsys, run_ends):
    """The reason, and whether the run ends with the job (then the
    teardown's requests to the workers say so)."""
    flags = ["--run-volumes"] if run_ends else []
    code, answer, _unused = run_cli(capsys, "cancel", "ja", "--run", RUN, *flags,
                                    "the controller: interrupted (SIGINT)")
    assert (code, answer) == (0, {"changed": True, "job": "ja"})
    supervisor = Supervisor(JobSpec.from_dict(json.loads(open(registry.job_path("ja", registry.SPEC_FILE)).read())))
    assert supervisor.cancel_requested() == "the controller: interrupted (SIGINT)"
    assert supervisor.run_ends_with_job() is run_ends


def test_the_supervisor_never_reads_a_cancel_request_without_its_reason(node, capsys):
    """The supervisor polls for the cancel file while the controller writes
    it: what it reads is the whole reason or nothing (it once read the file
    empty, between its creation and its write, and canceled the job
    "by the controller" without saying why)."""
    supervisor = Supervisor(JobSpec.from_dict(json.loads(open(registry.job_path("ja", registry.SPEC_FILE)).read())))
    reason = "the controller: the playbook was interrupted (SIGTERM)"
    seen, done = set(), threading.Event()

    def poll():
        while not done.is_set():
            seen.add(supervisor.cancel_requested())

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for _unused in range(300):
            control.cancel("ja", RUN, reason)
            os.unlink(registry.job_path("ja", registry.CANCEL_FILE))
    finally:
        done.set()
        poller.join()
    assert seen <= {None, reason}, seen


def test_cleanup_brings_the_logs_of_the_ranks_on_this_node_named_by_the_runtime(node, capsys, monkeypatch):
    monkeypatch.setattr(control, "LOGS_INLINE", 10)
    write_log("rank-0.log", b"zero\n")
    write_log("rank-2.log", b"two is longer than ten\n")
    write_log("rank-1.log", b"not this node's\n")
    write_log(registry.JOB_LOG_NAME, b"the job\n")
    code, answer, _unused = run_cli(capsys, "cleanup", "ja", "--run", RUN, "--logs", "--job-log")
    assert code == 0 and answer["job"] == "ja"
    logs = {entry["name"]: entry for entry in answer["logs"]}
    assert sorted(logs) == ["rank-0.log", "rank-2.log"]
    assert base64.b64decode(logs["rank-0.log"]["data"]) == b"zero\n"
    # Over the inline budget: the controller fetches it from its path.
    assert "data" not in logs["rank-2.log"] and open(logs["rank-2.log"]["path"], "rb").read() == (
        b"two is longer than ten\n")
    assert answer["job_log"] == {"path": registry.job_log_path("ja"), "size": 8}
    assert not os.path.exists(registry.job_dir("ja"))


def test_show_says_what_the_node_holds_of_a_job(node, capsys):
    write_log(registry.JOB_LOG_NAME, b"the job\n")
    code, answer, _unused = run_cli(capsys, "show", "ja")
    from multinode_runtime.sandbox import job_sandbox
    assert answer == {"job": "ja", "run": RUN, "registered": True, "claim_lease": 120, "secrets": False,
                      "hosts_block": True, "log_dir": True, "job_log": "the job\n", "logs": {},
                      "sandbox": job_sandbox("ja").pid}
    assert run_cli(capsys, "show")[1] == {"jobs": ["ja"]}
    run_cli(capsys, "cleanup", "ja", "--run", RUN)
    held = run_cli(capsys, "show", "ja")[1]
    assert (held["registered"], held["hosts_block"], held["run"], held["claim_lease"], held["sandbox"]) == (
        False, False, None, None, None)


def test_the_log_naming_rule_is_the_registrys():
    spec = JobSpec.from_dict({"job": "j", "ranks": [{"rank": 0}, {"rank": 1, "task_id": 7}]})
    assert [registry.log_name(rank) for rank in spec.ranks] == ["rank-0.log", "task-7.log"]


def test_a_worker_whose_logs_fit_hands_them_over_and_unregisters_at_teardown(node):
    """The head's cleanup request at the job's teardown (hand_over): the
    worker's rank logs come in its answer and the job is unregistered there,
    so the play need not clean it up."""
    from multinode_runtime.spec import load_spec
    from multinode_runtime.teardown import stop_on_request
    write_log("rank-0.log", b"zero\n")
    write_log("rank-2.log", b"two\n")
    answer = stop_on_request(load_spec("ja"), "node-1", unregister=False, hand_over=True)
    assert answer["records"] == []
    assert {entry["name"]: base64.b64decode(entry["data"]) for entry in answer["logs"]} == {
        "rank-0.log": b"zero\n", "rank-2.log": b"two\n"}
    assert not os.path.exists(registry.job_dir("ja"))
    assert not registry.has_hosts_block("ja")


def test_a_worker_whose_logs_do_not_fit_keeps_the_job_for_the_plays_cleanup(node, monkeypatch):
    from multinode_runtime.spec import load_spec
    from multinode_runtime.teardown import stop_on_request
    monkeypatch.setattr(control, "LOGS_INLINE", 10)
    write_log("rank-2.log", b"two is longer than ten\n")
    answer = stop_on_request(load_spec("ja"), "node-1", unregister=False, hand_over=True)
    assert answer == {"records": [], "logs": None}
    assert os.path.isdir(registry.job_dir("ja"))
    # Without hand_over (an interrupted play's cleanup everywhere): records only.
    assert stop_on_request(load_spec("ja"), "node-1", unregister=True) == []
    assert not os.path.exists(registry.job_dir("ja"))


def test_the_heads_cleanup_brings_the_logs_the_workers_handed_over(node, capsys):
    from multinode_runtime.teardown import keep_handed_logs
    write_log("rank-0.log", b"zero\n")
    handed = {"node-2": [{"rank": 1, "name": "rank-1.log", "size": 4, "path": "/elsewhere/rank-1.log",
                          "data": base64.b64encode(b"one\n").decode()}]}
    keep_handed_logs("ja", handed)
    code, answer, _unused = run_cli(capsys, "cleanup", "ja", "--run", RUN, "--logs")
    assert code == 0
    assert {entry["name"]: base64.b64decode(entry["data"]) for entry in answer["logs"]} == {
        "rank-0.log": b"zero\n", "rank-1.log": b"one\n"}
    assert not os.path.exists(registry.job_dir("ja"))
