# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.launch_job: start the job's supervisor on
the head, then poll it from the controller until the job ends. The polls are
the supervisor's heartbeat: an interrupted play stops polling, and the
supervisor cancels the job on every node."""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

MODULE = "fuzz.multinode.launch_job"


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        args.pop("_mode", None)
        poll = float(args.get("poll", 1))
        started = self._execute_module(module_name=MODULE, module_args=dict(args, _mode="start"),
                                       task_vars=task_vars)
        if started.get("failed"):
            result.update(started)
            return result
        while True:
            time.sleep(poll)
            polled = self._execute_module(module_name=MODULE, module_args=dict(args, _mode="status"),
                                          task_vars=task_vars)
            if polled.get("failed") or polled.get("finished"):
                result.update(polled)
                return result
