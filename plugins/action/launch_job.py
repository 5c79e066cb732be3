# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.launch_job: start the job's supervisor on
the head, then poll it from the controller until the job ends. Start and
polls are the node runtime's `start` and `status` subcommands, one command
each over the head's connection (no module is shipped): each waits on the
head up to `poll` seconds for the job to end, so a job's end is seen at
once, and brings the next piece of the job log (at most 256 KiB, so at
most that much a poll interval while the job floods it), which is appended to
the controller's copy (`log_file`) and shown line by line as `[job] line`.

Stopping the job when the play stops, in three ways:
- Ctrl-C or SIGTERM: Ansible signals this worker process, which then asks
  the supervisor to cancel the job (the runtime's `cancel`), waits (bounded) for
  the job's teardown and the rest of its log, and dies.
- The ansible-playbook process is killed outright: its worker (this process,
  in a session of its own) outlives it, notices, and cancels the job.
- The controller freezes, crashes or loses the network: the polls are the
  supervisor's heartbeat, and it cancels the job after `controller_timeout`
  seconds without one.
"""

from __future__ import annotations

import base64
import os
import signal
import time

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record
from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    LAUNCH_JOB_ARGUMENT_SPEC,
    RuntimeRefused,
    control_call,
    head_call,
    job_result,
    node_job_call,
    refusal,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.interrupts import Signals, best_effort
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_logs import bring_home
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import LiveLog
from ansible_collections.fuzz.multinode.plugins.plugin_utils.node_runtime_call import call_runtime

display = Display()

CANCEL_WITHIN = 30  # seconds allowed for delivering a cancel request
# After the job: at most this much more of its log is streamed, about a
# second's worth (the fuzz.multinode.job role fetches the whole file when
# there was more: much faster than polls for a large log).
CATCH_UP_LIMIT = 1 << 20
# After a cancel request: seconds, beyond the job's kill grace, to wait for
# the supervisor's result and the rest of the job log.
AFTER_CANCEL = 10
# Seconds polls may fail in a row before the controller gives the job up,
# when the job has no controller timeout.
GIVE_UP_AFTER = 60


class _ServiceFiles:
    """A service's two files on the controller, shared with the workflow
    runner: `ready_file`, created once the head says the service is ready
    (its readiness probe passed; the supervisor's own line in the job log
    says so too), and `stop_file`, which the runner creates to stop it,
    holding the reason. A job has neither."""

    def __init__(self, args):
        self.ready_file, self.stop_file = args.get("ready_file"), args.get("stop_file")
        self.ready = self.stop_asked = False

    def seen(self, answer):
        if self.ready or not answer.get("ready"):
            return
        self.ready = True
        if self.ready_file:
            try:
                with open(self.ready_file, "x") as handle:
                    handle.write(answer["ready"] + "\n")
            except OSError as exc:
                display.warning("cannot tell the workflow that the service is ready (%s): %s"
                                % (self.ready_file, exc))

    def stop_reason(self):
        """The reason to stop, the first time the stop file is there; else None."""
        if self.stop_asked or not self.stop_file:
            return None
        try:
            with open(self.stop_file) as handle:
                reason = handle.read().strip() or "the workflow"
        except FileNotFoundError:
            return None
        self.stop_asked = True
        return reason


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=LAUNCH_JOB_ARGUMENT_SPEC)
        if args["refused"]:
            # Its nodes refused the job: it never starts, and has no log.
            result.update(refusal(args["job"], args["refused"]))
            return result
        log_file = args["log_file"]
        poll = args["poll"]
        playbook_pid = os.getppid()
        # Shown from this worker process, Display goes through Ansible's
        # queue to the ansible-playbook process, which prints it at once.
        log = LiveLog(args["job"], log_file, display.display, args["progress_every"])
        # From before the start on: a signal during the start request (it
        # waits on the head up to `poll` seconds, the ranks running) must
        # cancel the job too, not kill this process and leave the job alone.
        signals = Signals().install()
        try:
            try:
                started = self._request(args, log, "start", wait=poll)
            except (RuntimeRefused, AnsibleConnectionFailure) as exc:
                if signals.received is not None:  # it may have started all the same
                    return self._interrupted(args, log, 0.0, signals)
                result.update(failed=True, msg=str(exc))
                return result
            grace = float(started.get("kill_grace", 10))
            started = job_result(started)
            # How long polls may fail (the head unreachable for a while, a
            # connection that broke) before the job is given up from here: as
            # long as the supervisor waits for a poll before it cancels the job.
            give_up_after = float(args.get("controller_timeout") or 0) or GIVE_UP_AFTER
            polled = started
            service = _ServiceFiles(args)
            service.seen(polled)
            log.tick()
            last_good_poll = time.monotonic()
            next_poll = last_good_poll + poll  # the start was a poll
            while not polled.get("finished"):
                # Else the status waited on the head already. Behind the log (a
                # flood of output), polls keep their pace too rather than
                # follow back to back: each is a Python on the head and a
                # relay here, CPU the job itself needs (forwarding on 2 cores
                # went from 0.43x to 0.65x of plain ssh); what the polls do not
                # bring is fetched whole after the job.
                if polled.get("failed") or log.behind:
                    signals.sleep_until(next_poll)
                if signals.received is not None:
                    return self._interrupted(args, log, grace, signals)
                next_poll = time.monotonic() + poll
                if os.getppid() != playbook_pid:
                    self._cancel(args, "the controller: the playbook process ended")
                    self._after_cancel(args, log, grace)
                    self._unregister(args, grace)
                    result.update(failed=True, finished=True, status="CANCELED",
                                  msg="job %s canceled: the playbook process ended" % args["job"])
                    return result
                reason = service.stop_reason()
                if reason is not None:  # then polled to its end, and torn down, as any job
                    self._stop(args, reason)
                polled = self._poll(args, log, wait=0 if log.behind else poll)
                service.seen(polled)
                log.tick()
                if polled.get("finished"):
                    break
                if not polled.get("failed"):
                    last_good_poll = time.monotonic()
                elif time.monotonic() - last_good_poll > give_up_after:
                    break  # the head is gone for good: the play's cleanup takes over
                else:
                    display.vvv("[%s] a poll of the job failed, trying again: %s"
                                % (args["job"], polled.get("msg", "")))
            self._catch_up(args, log)
            result.update(polled)
            log_complete = not log.behind
            if args["rank_logs"] and polled.get("finished"):
                head = self._task.delegate_to or task_vars.get("inventory_hostname", "")
                if self._clean_up_head(args, head, fetch_log=not log_complete):
                    result["torn_down"] = list(result.get("torn_down") or []) + [head]
                    log_complete = True
            if log_file:
                result["log_complete"] = log_complete
            return result
        finally:
            signals.restore()
            log.close()

    def _interrupted(self, args, log, grace, signals):
        """The play was interrupted: cancel the job, keep the rest of its
        log, then end as Ansible's own handler for the signal would."""
        signals.ignore()
        name = signal.Signals(signals.received).name
        self._cancel(args, "the controller: the playbook was interrupted (%s)" % name)
        self._after_cancel(args, log, grace)
        self._unregister(args, grace)
        if args["record"] and args["interrupt_ends_run"]:
            self._record_canceled(args, "the playbook was interrupted (%s)" % name)
        signals.end_as_ansible_would()
        return dict(failed=True, finished=True, status="CANCELED",
                    msg="job %s canceled: the playbook was interrupted (%s)" % (args["job"], name))

    @staticmethod
    def _record_canceled(args, why):
        """The run ends with this job (one job at a time, no workflow
        runner): its record says CANCELED, and why. Best effort: the job is
        canceled whatever the record says."""
        try:
            run_record.run_ended(run_record.Record(args["record"], args["run"]), run_record.CANCELED, why)
        except (OSError, run_record.RecordError) as exc:
            display.warning("The run record %s cannot be written: %s" % (args["record"], exc))

    def _request(self, args, log, subcommand, wait=0.0):
        """The runtime's `start` or `status` on the head: the job's status,
        its result once it has ended, with the details of its start; the
        piece of the job log it brings goes to `log`. Raises
        RuntimeRefused, AnsibleConnectionFailure."""
        answer = call_runtime(self, control_call(subcommand, args, wait, log.offset), runtime=args["runtime"])
        data, size = answer.get("log_data"), answer.get("log_size")
        if data is not None and size is not None:
            log.add(base64.b64decode(data), size)
        return answer

    def _poll(self, args, log, wait=0.0):
        """One poll of the job (a heartbeat for the supervisor), waiting on
        the head up to `wait` seconds for its end; a poll that failed is a
        result with `failed` (and `unreachable`), not `finished`."""
        try:
            return job_result(self._request(args, log, "status", wait=wait))
        except RuntimeRefused as exc:
            return {"failed": True, "msg": str(exc)}
        except AnsibleConnectionFailure as exc:
            return {"failed": True, "unreachable": True, "msg": str(exc)}

    def _clean_up_head(self, args, head, fetch_log):
        """The job has ended: stop and unregister it on the head, its ranks'
        logs (the workers' handed over to it) brought home, and the job log
        fetched whole when the polls left some of it. One more runtime call
        over this connection: a task of the play on every host costs more.
        Whether it was done; if not, the play's cleanup of the head runs
        and reports why."""
        params = dict(job=args["job"], run=args["run"], state="absent", logs=args["rank_logs"],
                      job_log=args["log_file"] if fetch_log else None)
        call, _unused = node_job_call(params, head, logs=True)
        try:
            answer = call_runtime(self, call, runtime=args["runtime"])
            bring_home(self._connection, answer, params["logs"], params["job_log"])
        except (RuntimeRefused, AnsibleConnectionFailure, OSError) as exc:
            display.vvv("[%s] the head's cleanup is left to the play: %s" % (args["job"], exc))
            return False
        return True

    def _catch_up(self, args, log):
        """The job has ended: the rest of its log, up to CATCH_UP_LIMIT."""
        limit = log.offset + CATCH_UP_LIMIT
        while log.behind and log.offset < limit:
            before = log.offset
            self._poll(args, log)
            if log.offset == before:
                break  # nothing came: the log on the head changed under us
        log.finish()
        if log.behind and log.path:
            display.display("[%s] %d MiB more of the job log than shown: it is fetched whole to %s"
                            % (args["job"], (log.size - log.offset) >> 20, log.path))

    def _after_cancel(self, args, log, grace):
        """After a cancel request, until the supervisor has torn the job
        down and written its result (bounded: the job's kill grace and
        AFTER_CANCEL seconds, each poll by its connection's own timeout),
        pull the rest of the job log, the supervisor's "canceled by" line
        included. Nothing is shown: the play is ending and no longer reads
        what this process displays."""
        log.quiet = True
        deadline = time.monotonic() + grace + AFTER_CANCEL
        try:
            while time.monotonic() < deadline:
                polled = self._poll(args, log, wait=0 if log.behind else 0.5)
                if polled.get("finished") and not log.behind:
                    break
                if polled.get("failed") and not polled.get("finished"):
                    break  # the head cannot say (unreachable, job gone)
        except Exception:  # noqa: BLE001 -- best effort: the play is ending
            pass
        log.close()

    def _cancel(self, args, reason):
        """Ask the supervisor to cancel the job (the runtime's `cancel`; the
        runtime leaves another run's job alone), saying whether the run
        ends with it. If it cannot be delivered, the supervisor's heartbeat
        check still cancels the job."""
        flags = ["--run-volumes"] if args["interrupt_ends_run"] else []
        self._on_head(args, CANCEL_WITHIN, head_call("cancel", args, *flags, reason))

    def _stop(self, args, reason):
        """Ask the supervisor to end the job for `reason` while the play goes
        on (a Ctrl-C meanwhile is handled as usual); if the request fails
        the job runs on and the next poll says how it is."""
        try:
            call_runtime(self, head_call("cancel", args, reason), runtime=args["runtime"])
        except (RuntimeRefused, AnsibleConnectionFailure) as exc:
            display.warning("[%s] cannot ask the job to stop (%s): %s" % (args["job"], reason, exc))

    def _unregister(self, args, grace):
        """No play cleans up after an interrupted one: remove the job from
        every node from here (its processes are gone by now; this removes
        its registration, files and rank host names), and the run's
        ephemeral volumes when the run ends with the job."""
        flags = ["--everywhere"] + (["--run-volumes"] if args["interrupt_ends_run"] else [])
        self._on_head(args, int(grace) + 30, head_call("cleanup", args, *flags))

    def _on_head(self, args, within, call):
        """Run a runtime subcommand on the head as root, best effort and
        bounded: this process is killed after `within` seconds (the play is
        ending)."""
        best_effort(within, lambda: call_runtime(self, call, runtime=args["runtime"]))
