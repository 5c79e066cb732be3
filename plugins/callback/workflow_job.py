# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The stdout of one job's ansible-playbook, run by the workflow runner
(plugins/action/workflow_jobs.py, which shows every line it prints): only
what the job's user needs, each line as `[job] ...` (the job's live log,
shown by launch_job, already is); and the job's outcome, for the runner,
in a file."""

from __future__ import annotations

DOCUMENTATION = r"""
name: workflow_job
type: stdout
short_description: Output of one job of a workflow run by the workflow runner
version_added: 0.2.0
description:
  - >-
    The stdout callback of the C(ansible-playbook) that the C(fuzz.multinode.workflow_jobs) runner
    starts for each job of a workflow. Prints each failed or unreachable task and each debug
    message as C([job] ...) lines, and nothing else (no task banners, no recap); the job's live
    log is shown by C(fuzz.multinode.launch_job) itself.
  - >-
    Writes the job's outcome, as JSON, to the file that C(FUZZ_MULTINODE_WORKFLOW_REPORT) in its
    environment names - the result of C(fuzz.multinode.launch_job) (C(launch)) and the first
    task that failed (C(failure)). C(FUZZ_MULTINODE_WORKFLOW_JOB) names the job.
  - Not meant to be used on its own.
author:
  - fuzz.multinode developers (!UNKNOWN)
"""

import json
import os

from ansible.plugins.callback import CallbackBase

LAUNCH_ACTIONS = ("fuzz.multinode.launch_job", "launch_job")
DEBUG_ACTIONS = ("ansible.builtin.debug", "debug", "ansible.legacy.debug")


def _parts(result):
    """(result data, task, host name) of a callback's task result, in every
    ansible-core the collection supports (2.19 renamed the attributes)."""
    data = getattr(result, "result", None)
    if data is None:
        data = result._result
    task = getattr(result, "task", None) or result._task
    host = getattr(result, "host", None) or result._host
    return data, task, host.get_name()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fuzz.multinode.workflow_job"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.job = os.environ.get("FUZZ_MULTINODE_WORKFLOW_JOB", "job")
        self.report_path = os.environ.get("FUZZ_MULTINODE_WORKFLOW_REPORT")
        self.report = {}

    def _show(self, text):
        for line in str(text).splitlines() or [""]:
            self._display.display("[%s] %s" % (self.job, line))

    def _write(self):
        if not self.report_path:
            return
        temporary = self.report_path + ".tmp"
        with open(temporary, "w") as handle:
            json.dump(self.report, handle)
        os.replace(temporary, self.report_path)  # the runner never reads half of it

    def _warnings(self, result, data):
        """The task's warnings, as every stdout callback shows them (on
        stderr, which the runner shows too)."""
        handle = getattr(self, "_handle_warnings_and_exception", None)  # ansible-core 2.19
        if handle is not None:
            handle(result)
        else:
            self._handle_warnings(data)

    def _failed(self, result, what):
        data, task, host = _parts(result)
        self._warnings(result, data)
        message = data.get("msg") or data.get("message") or "(no message)"
        self._show("%s on %s: %s: %s" % (what, host, task.get_name(), message))
        if "failure" not in self.report:
            self.report["failure"] = "%s on %s: %s" % (what, host, message)
            self._write()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._failed(result, "unreachable")

    def v2_runner_on_ok(self, result):
        data, task, _unused = _parts(result)
        self._warnings(result, data)
        if task.action in LAUNCH_ACTIONS:
            self.report["launch"] = {key: data.get(key) for key in ("status", "message", "msg", "duration", "ranks")}
            self._write()
        elif task.action in DEBUG_ACTIONS and "msg" in data:
            message = data["msg"]
            self._show("\n".join(map(str, message)) if isinstance(message, list) else message)
