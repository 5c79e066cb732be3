"""A service's readiness: its readiness probe, run by the head's
supervisor while the service runs, until it passes (the service is ready:
jobs that depend on it RUNNING may start) or the service's ready timeout
is over (the service is given up: it fails, and so do its dependants).

Kubernetes' timings: the first probe `initial-delay-seconds` after the
start, then one every `period-seconds` (10), each given `timeout-seconds`
(1); ready after `success-threshold` (1) passes in a row. Unlike a
Kubernetes readiness probe, which tries forever, a service not ready
within `ready_timeout` seconds of its start (the role's
fuzz_multinode_service_ready_timeout) is given up: its dependants cannot
wait forever. Once ready it stays ready (nothing here makes it unready
again), so `failure-threshold` is not used.

`exec` runs its command in rank 0's sandbox (the service's container) as
the job user, with rank 0's environment, like rank 0 itself; the network
probes (probes.py) run in a thread of the supervisor, from the head, to
the probe's host or else the head's own address: the address the
service's dependants reach it by.
"""

import os
import threading
import time

from . import registry
from .errors import RuntimeFailure
from .processes import exit_status
from .wire import write_all

OUTPUT_SHOWN = 200  # bytes of an exec probe's output a failure shows


def probe_name(probe):
    """The probe's handler: exec, http-get, tcp-socket or grpc."""
    return next(key for key in ("exec", "http-get", "tcp-socket", "grpc") if key in probe)


def endpoints_shown(endpoints):
    """The service's endpoints for its ready line: each URL, with its
    Fuzzfile scope, which nothing here enforces (there is no ingress)."""
    shown = ""
    for endpoint in endpoints:
        shown += "; endpoint %s at %s" % (endpoint.get("name"), endpoint.get("url"))
        if endpoint.get("scope"):
            shown += " (scope %s: not enforced, anyone who can reach the node can reach it)" % endpoint["scope"]
    return shown


class Readiness:
    """The readiness of the service the supervisor runs. `spawn(argv, out)`
    starts an exec probe's command as rank 0's (a Popen), its output into
    the file descriptor `out`."""

    def __init__(self, spec, address, spawn, log_fd):
        settings = spec.service or {}
        self.job = spec.job
        self.probe = settings.get("readiness_probe")
        self.ready_timeout = float(settings.get("ready_timeout") or 300)
        self.endpoints = settings.get("endpoints") or []
        self.address = address
        self.spawn = spawn
        self.log_fd = log_fd
        self.ready = False
        self.started = time.monotonic()
        probe = self.probe or {}
        self.period = float(probe.get("period-seconds", 10))
        self.timeout = float(probe.get("timeout-seconds", 1))
        self.needed = int(probe.get("success-threshold", 1))
        self.next_at = self.started + float(probe.get("initial-delay-seconds", 0))
        self.passes = 0
        self.last = None  # what the last probe said
        self.running = None  # the probe under way: a _NetworkProbe or an _ExecProbe

    def check(self, reaped):
        """Called from the supervisor's loop with the children it reaped
        ({pid: status}): take a probe's outcome, start the next one when it
        is due. Raises RuntimeFailure when the service is given up."""
        if self.ready:
            return
        if self.probe is None:
            self._now_ready("it has no readiness probe: ready once started")
            return
        now = time.monotonic()
        if self.running is not None:
            outcome = self.running.outcome(reaped, now)
            if outcome is None:
                return
            self.running = None
            passed, self.last = outcome
            self.passes = self.passes + 1 if passed else 0
            if self.passes >= self.needed:
                self._now_ready(self.last)
                return
        if now - self.started > self.ready_timeout:
            raise RuntimeFailure("service %s did not become ready within %g s: its readiness-probe %s" % (
                self.job, self.ready_timeout, self._last_said()))
        if now >= self.next_at:
            self.next_at = now + self.period
            self.running = self._start()

    def not_ready_note(self):
        """For a service whose rank 0 ended: None when it had become ready
        (or has no probe), else what its probe last said, for the failure."""
        if self.ready or self.probe is None:
            return None
        return "its readiness-probe %s" % self._last_said()

    def _last_said(self):
        return self.last or "%s had not run yet" % probe_name(self.probe)

    def stop(self):
        """The service ends: a probe under way is abandoned (an exec
        probe's processes go with the job's)."""
        self.running = None

    def _start(self):
        handler = probe_name(self.probe)
        action = self.probe[handler]
        if handler == "exec":
            return _ExecProbe(self.spawn, action["command"], self.timeout)
        return _NetworkProbe(handler, action, self.address, self.timeout)

    def _now_ready(self, detail):
        self.ready = True
        registry.write_file(registry.job_path(self.job, registry.READY_FILE), detail + "\n", 0o600)
        line = "fuzz.multinode: service %s is ready: %s%s\n" % (self.job, detail, endpoints_shown(self.endpoints))
        write_all(self.log_fd, line.encode())


class _NetworkProbe:
    """An http-get, tcp-socket or grpc probe, in a thread of its own (a
    probe waits up to its timeout; the supervisor's loop must not)."""

    def __init__(self, handler, action, address, timeout):
        from .probes import probe_network  # the network probes' code, for services only

        self.result = None
        self.deadline = time.monotonic() + timeout + 1

        def run():
            try:
                self.result = probe_network(handler, action, address, timeout)
            except Exception as exc:  # noqa: BLE001 -- a probe's failure is a detail, never the supervisor's
                self.result = (False, "%s: %s" % (handler, exc))

        self.thread = threading.Thread(target=run, name="readiness-probe", daemon=True)
        self.thread.start()

    def outcome(self, reaped, now):
        if self.result is not None:
            return self.result
        if now > self.deadline:  # its socket timeouts should have ended it: count it failed
            return False, "no answer within the probe's timeout"
        return None


class _ExecProbe:
    """An exec probe: the command in the service's sandbox; it passes when
    it exits with status 0 within the timeout."""

    def __init__(self, spawn, command, timeout):
        self.command = command
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        reader, writer = os.pipe()
        os.set_blocking(reader, False)
        self.output = reader
        try:
            self.child = spawn(list(command), writer)
        except RuntimeFailure as exc:
            self.child = None
            self.failed = str(exc)
        finally:
            os.close(writer)

    def outcome(self, reaped, now):
        shown = "exec %s" % " ".join(self.command)
        if self.child is None:
            os.close(self.output)
            return False, "%s: %s" % (shown, self.failed)
        status = reaped.get(self.child.pid)
        if status is None:
            if now <= self.deadline:
                return None
            self._kill()
            self._read()
            return False, "%s: still running after %g s (timeout-seconds)" % (shown, self.timeout)
        output = self._read()
        code = exit_status(status)
        if code == 0:
            return True, "%s: exit status 0" % shown
        return False, "%s: exit status %d%s" % (shown, code, (": " + output) if output else "")

    def _read(self):
        try:
            data = os.read(self.output, OUTPUT_SHOWN)
        except OSError:
            data = b""
        os.close(self.output)
        return " ".join(data.decode(errors="replace").split())

    def _kill(self):
        """Its session's processes (spawn starts it in a session of its
        own); what escaped goes with the service's teardown."""
        try:
            os.killpg(self.child.pid, 9)
        except OSError:
            pass
