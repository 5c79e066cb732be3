"""The callback of a workflow job's playbook (plugins/callback/workflow_job.py):
what it shows as the job's lines and reports to the workflow runner
(plugins/action/workflow_jobs.py)."""

import json
from unittest import mock

from ansible_collections.fuzz.multinode.plugins.callback.workflow_job import CallbackModule


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
