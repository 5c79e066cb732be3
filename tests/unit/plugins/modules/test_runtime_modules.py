"""The modules node_job and launch_job, as they run without their action
plugins (on the node itself): they ask the runtime what the action plugins
ask (module_utils/node_runtime.py) and return its answer as the task's
result. The runtime is replaced by a recording stand-in."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RuntimeRefused
from ansible_collections.fuzz.multinode.plugins.modules import launch_job, node_job

SPEC = {"job": "hello", "run": "r1", "ranks": []}


class Runtime:
    """Stands in for run_here: answers each call in turn, records them."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, call, stdin=None, runtime=None):
        self.calls.append((list(call), stdin, runtime))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def run_module(module, monkeypatch, capsys, args, runtime):
    monkeypatch.setattr(module, "run_here", runtime)
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_node_job_registers_the_job_under_the_given_node(monkeypatch, capsys):
    runtime = Runtime({"job": "hello", "node": "n1", "run": "r1", "changed": True})
    result = run_module(node_job, monkeypatch, capsys, dict(job="hello", run="r1", spec=SPEC, node="n1"), runtime)
    assert runtime.calls == [(["prepare", "--node", "n1"], json.dumps(SPEC).encode(), None)]
    assert result["job"] == "hello" and result["node"] == "n1" and result["run"] == "r1"
    assert not result.get("failed")


def test_node_job_reports_the_nodes_refusal(monkeypatch, capsys):
    runtime = Runtime(RuntimeRefused("n1: no such file /data/in"))
    result = run_module(node_job, monkeypatch, capsys, dict(job="hello", spec=SPEC, node="n1"), runtime)
    assert result["failed"] and result["msg"] == result["refused"] == "n1: no such file /data/in"


def test_node_job_refuses_a_spec_of_another_run_without_asking_the_node(monkeypatch, capsys):
    runtime = Runtime()
    result = run_module(node_job, monkeypatch, capsys, dict(job="hello", run="r2", spec=SPEC, node="n1"), runtime)
    assert runtime.calls == []
    assert result["refused"] == "spec: the spec is of run r1, not of run r2"


def test_node_job_unregisters_and_leaves_the_logs_on_the_node(monkeypatch, capsys):
    runtime = Runtime({"changed": True, "job": "hello", "killed": 2})
    result = run_module(node_job, monkeypatch, capsys,
                        dict(job="hello", run="r1", state="absent", logs="/c/logs"), runtime)
    assert runtime.calls == [(["cleanup", "hello", "--run", "r1"], None, None)]
    assert result["killed"] == 2 and "refused" not in result


def test_launch_job_starts_then_polls_until_the_job_has_ended(monkeypatch, capsys):
    runtime = Runtime({"finished": False, "log_data": "", "log_size": 0, "started": True, "pid": 9, "kill_grace": 10},
                      {"finished": False, "log_data": "", "log_size": 0},
                      {"finished": True, "status": "FINISHED", "rc": 0, "log_data": "", "log_size": 0})
    result = run_module(launch_job, monkeypatch, capsys, dict(job="hello", run="r1", poll=0.5), runtime)
    assert [call[0][0] for call in runtime.calls] == ["start", "status", "status"]
    assert runtime.calls[0][0] == ["start", "hello", "--run", "r1", "--controller-timeout", "60",
                                   "--wait", "0.5", "--log-offset", "0"]
    assert result["status"] == "FINISHED" and not result.get("failed")
    assert "log_data" not in result and "pid" not in result


def test_launch_job_fails_with_the_jobs_failure(monkeypatch, capsys):
    runtime = Runtime({"finished": True, "status": "FAILED", "failed": True, "msg": "rank 1 exited with status 3",
                       "message": "rank 1 exited with status 3", "log_data": "", "log_size": 0})
    result = run_module(launch_job, monkeypatch, capsys, dict(job="hello"), runtime)
    assert result["failed"] and result["status"] == "FAILED" and result["msg"] == "rank 1 exited with status 3"


def test_launch_job_fails_naming_what_the_head_said(monkeypatch, capsys):
    runtime = Runtime(RuntimeRefused("job hello is not registered on this node"))
    result = run_module(launch_job, monkeypatch, capsys, dict(job="hello"), runtime)
    assert result["failed"] and result["status"] == "FAILED"
    assert result["msg"] == "job hello is not registered on this node"


def test_launch_job_does_not_start_a_job_its_nodes_refused(monkeypatch, capsys):
    runtime = Runtime()
    result = run_module(launch_job, monkeypatch, capsys, dict(job="hello", refused=["n1: a", "n2: b"]), runtime)
    assert runtime.calls == []
    assert result["status"] == "FAILED" and result["message"] == "n1: a; n2: b" and not result.get("failed")
