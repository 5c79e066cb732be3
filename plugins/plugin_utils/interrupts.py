# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Ctrl-C (SIGINT) or SIGTERM in an Ansible worker while an action plugin
has work on a node that the node finishes whatever this process does (a
job's registration, its supervision): the signal is recorded, the plugin
undoes or cancels that work, then the worker ends as Ansible's own handler
would have ended it. No play comes to clean up after an interrupted one."""

from __future__ import annotations

import os
import signal
import time

# Seconds between looks at a signal received while a plugin sleeps.
CHECK_EVERY = 0.1
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Signals:
    """The SIGINT or SIGTERM that reached this worker process while it was
    installed (`install`, until `restore`). The handler only records it: an
    exception raised out of a handler lands wherever the process is, in the
    middle of Ansible's own code, where an `except Exception` may swallow
    it or turn it into a failed request. The plugin looks at `received`
    between its requests, and sleeps in short slices (sleep_until) so that
    it sees it soon."""

    def __init__(self):
        self.received = None
        self.previous = {}

    def install(self):
        self.previous = {sig: signal.signal(sig, self.record) for sig in SIGNALS}
        return self

    def record(self, signum, frame):
        # Ansible's main process follows the SIGINT it passes to its workers
        # with a SIGTERM at once: the SIGINT is what the user did.
        if self.received is None or signum == signal.SIGINT:
            self.received = signum

    def sleep_until(self, when):
        while self.received is None:
            left = when - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, CHECK_EVERY))

    def ignore(self):
        """While the plugin undoes its work: a second Ctrl-C must not cut
        that short."""
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    def restore(self):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def end_as_ansible_would(self):
        """Restore the handlers and deliver the signal received to this
        process again: Ansible's handler ends the worker."""
        self.restore()
        signum = self.received
        handler = self.previous[signum]
        if callable(handler):
            handler(signum, None)
        if handler != signal.SIG_IGN:
            os.kill(os.getpid(), signum)


def best_effort(within, work):
    """work(), best effort and bounded: what it raises is dropped, and this
    process is killed (SIGALRM) after `within` seconds. For a plugin whose
    play is ending: SIGINT and SIGTERM are ignored meanwhile (a second
    Ctrl-C must not cut this short); the handlers are as before after it."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in SIGNALS}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(within)
    try:
        work()
    except Exception:  # noqa: BLE001 -- best effort, see above
        pass
    finally:
        signal.alarm(0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
