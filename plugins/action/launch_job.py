# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.launch_job: start the job's supervisor on
the head, then poll it from the controller until the job ends.

Stopping the job when the play stops, in three ways:
- Ctrl-C or SIGTERM: Ansible signals this worker process, which then asks
  the supervisor to cancel the job (its `cancel` file) before it dies.
- The ansible-playbook process is killed outright: its worker (this process,
  in a session of its own) outlives it, notices, and cancels the job.
- The controller freezes, crashes or loses the network: the polls are the
  supervisor's heartbeat, and it cancels the job after `controller_timeout`
  seconds without one.
"""

from __future__ import annotations

import os
import shlex
import signal
import time

from ansible.plugins.action import ActionBase

MODULE = "fuzz.multinode.launch_job"
JOBS_DIR = "/run/fuzz-multinode/jobs"
CANCEL_WITHIN = 30  # seconds allowed for delivering a cancel request


class _Interrupted(Exception):
    """Raised by our signal handler out of whatever the poll loop is doing."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise _Interrupted(signum)


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        args.pop("_mode", None)
        poll = float(args.get("poll", 1))
        playbook_pid = os.getppid()
        started = self._execute_module(module_name=MODULE, module_args=dict(args, _mode="start"),
                                       task_vars=task_vars)
        if started.get("failed"):
            result.update(started)
            return result
        previous = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while True:
                time.sleep(poll)
                if os.getppid() != playbook_pid:
                    self._cancel(args["job"], "the controller: the playbook process ended")
                    result.update(failed=True, finished=True, status="CANCELED",
                                  msg="job %s canceled: the playbook process ended" % args["job"])
                    return result
                polled = self._execute_module(module_name=MODULE, module_args=dict(args, _mode="status"),
                                              task_vars=task_vars)
                if polled.get("failed") or polled.get("finished"):
                    result.update(polled)
                    return result
        except _Interrupted as exc:
            name = signal.Signals(exc.signum).name
            self._cancel(args["job"], "the controller: the playbook was interrupted (%s)" % name)
            # Then end as Ansible's own handler for this signal would.
            handler = previous[exc.signum]
            signal.signal(exc.signum, handler)
            if callable(handler):
                handler(exc.signum, None)
            os.kill(os.getpid(), exc.signum)
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _cancel(self, job, reason):
        """Write the job's cancel file on the head, best effort and bounded:
        if it cannot be delivered, the supervisor's heartbeat check still
        cancels the job."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(CANCEL_WITHIN)
        path = "%s/%s/cancel" % (JOBS_DIR, job)
        try:
            self._low_level_execute_command(
                "printf '%%s\\n' %s > %s" % (shlex.quote(reason), shlex.quote(path)), sudoable=True)
        except Exception:  # noqa: BLE001 -- best effort, see above
            pass
        finally:
            signal.alarm(0)
