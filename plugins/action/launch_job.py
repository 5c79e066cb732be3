# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.launch_job: start the job's supervisor on
the head, then poll it from the controller until the job ends. Each poll
also brings the next piece of the job log (at most 256 KiB; the next poll
follows at once while the controller is behind), which is appended to the
controller's copy (`log_file`) and shown line by line as `[job] line`.

Stopping the job when the play stops, in three ways:
- Ctrl-C or SIGTERM: Ansible signals this worker process, which then asks
  the supervisor to cancel the job (its `cancel` file), waits (bounded) for
  the job's teardown and the rest of its log, and dies.
- The ansible-playbook process is killed outright: its worker (this process,
  in a session of its own) outlives it, notices, and cancels the job.
- The controller freezes, crashes or loses the network: the polls are the
  supervisor's heartbeat, and it cancels the job after `controller_timeout`
  seconds without one.
"""

from __future__ import annotations

import base64
import math
import os
import shlex
import signal
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import PROGRESS_EVERY, LiveLog

display = Display()

MODULE = "fuzz.multinode.launch_job"
JOBS_DIR = "/run/fuzz-multinode/jobs"
CANCEL_WITHIN = 30  # seconds allowed for delivering a cancel request
# After the job: at most this much more of its log is streamed, about a
# second's worth (the fuzz.multinode.job role fetches the whole file when
# there was more: much faster than polls for a large log).
CATCH_UP_LIMIT = 1 << 20
# After a cancel request: seconds, beyond the job's kill grace, to wait for
# the supervisor's result and the rest of the job log.
AFTER_CANCEL = 10


class _Interrupted(Exception):
    """Raised by our signal handler out of whatever the poll loop is doing."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class _OutOfTime(Exception):
    """The wait for a canceled job's end took too long."""


def _raise_interrupted(signum, frame):
    # Ansible follows SIGINT with SIGTERM at once: the second signal must not
    # cut short what this process does about the first.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise _Interrupted(signum)


def _raise_out_of_time(signum, frame):
    raise _OutOfTime()


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        for internal in ("_mode", "log_offset"):
            args.pop(internal, None)
        # Options of this plugin only; the module on the head does not need them.
        log_file = args.pop("log_file", None)
        progress_every = float(args.pop("progress_every", PROGRESS_EVERY))
        poll = float(args.get("poll", 1))
        playbook_pid = os.getppid()
        started = self._execute_module(module_name=MODULE, module_args=dict(args, _mode="start"),
                                       task_vars=task_vars)
        if started.get("failed"):
            result.update(started)
            return result
        grace = float(started.get("kill_grace", 10))
        # Shown from this worker process, Display goes through Ansible's
        # queue to the ansible-playbook process, which prints it at once.
        log = LiveLog(args["job"], log_file, display.display, progress_every)
        previous = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            polled = {}
            next_poll = time.monotonic()
            while not (polled.get("failed") or polled.get("finished")):
                if not log.behind:  # else the next piece of the log at once
                    time.sleep(max(0.0, next_poll - time.monotonic()))
                next_poll = time.monotonic() + poll
                if os.getppid() != playbook_pid:
                    self._cancel(args["job"], "the controller: the playbook process ended")
                    self._after_cancel(args, log, grace, task_vars)
                    result.update(failed=True, finished=True, status="CANCELED",
                                  msg="job %s canceled: the playbook process ended" % args["job"])
                    return result
                polled = self._poll(args, log, task_vars)
                log.tick()
            self._catch_up(args, log, task_vars)
            result.update(polled)
            if log_file:
                result["log_complete"] = not log.behind
            return result
        except _Interrupted as exc:
            name = signal.Signals(exc.signum).name
            self._cancel(args["job"], "the controller: the playbook was interrupted (%s)" % name)
            self._after_cancel(args, log, grace, task_vars)
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
            log.close()

    def _poll(self, args, log, task_vars):
        """One poll of the job (a heartbeat for the supervisor) that also
        brings the next piece of the job log; returns the job's status
        without the log."""
        polled = self._execute_module(module_name=MODULE,
                                      module_args=dict(args, _mode="status", log_offset=log.offset),
                                      task_vars=task_vars)
        data, size = polled.pop("log_data", None), polled.pop("log_size", None)
        if data is not None and size is not None:
            log.add(base64.b64decode(data), size)
        return polled

    def _catch_up(self, args, log, task_vars):
        """The job has ended: the rest of its log, up to CATCH_UP_LIMIT."""
        limit = log.offset + CATCH_UP_LIMIT
        while log.behind and log.offset < limit:
            before = log.offset
            self._poll(args, log, task_vars)
            if log.offset == before:
                break  # nothing came: the log on the head changed under us
        log.finish()
        if log.behind and log.path:
            display.display("[%s] %d MiB more of the job log than shown: it is fetched whole to %s"
                            % (args["job"], (log.size - log.offset) >> 20, log.path))

    def _after_cancel(self, args, log, grace, task_vars):
        """After a cancel request, until the supervisor has torn the job
        down and written its result (bounded: the job's kill grace and
        AFTER_CANCEL seconds), pull the rest of the job log, the
        supervisor's "canceled by" line included. Nothing is shown: the
        play is ending and no longer reads what this process displays."""
        log.quiet = True
        previous = signal.signal(signal.SIGALRM, _raise_out_of_time)
        signal.alarm(int(math.ceil(grace + AFTER_CANCEL)))
        try:
            while True:
                polled = self._poll(args, log, task_vars)
                if polled.get("finished") and not log.behind:
                    break
                if polled.get("failed") and not polled.get("finished"):
                    break  # the head cannot say (unreachable, job gone)
                if not log.behind:
                    time.sleep(0.5)
        except Exception:  # noqa: BLE001 -- best effort, bounded by the alarm
            pass
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        log.close()

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
