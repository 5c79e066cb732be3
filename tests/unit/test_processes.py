"""Unit tests of processes.py's killing: rounds that outrun a process
changing its pid, and PID namespaces nested in ours counted as ours."""

import os
import signal
import subprocess
import time

from multinode_runtime import processes


class Hopper:
    """A process table holding one process that, each time it is looked
    at, has started its successor and exited (a new pid every scan), until
    it is stopped."""

    def __init__(self):
        self.alive, self.stopped, self.next_pid = {100}, set(), 101

    def find(self):
        for pid in sorted(self.alive - self.stopped):
            self.alive.discard(pid)
            self.alive.add(self.next_pid)
            self.next_pid += 1
        return set(self.alive)

    def signal(self, pid, sig):
        if pid not in self.alive:
            return
        if sig == signal.SIGSTOP:
            self.stopped.add(pid)
        elif sig == signal.SIGKILL:
            self.alive.discard(pid)


def test_rounds_kill_a_process_that_changes_its_pid_at_every_scan(monkeypatch):
    hopper = Hopper()
    monkeypatch.setattr(processes, "send_signal", hopper.signal)
    monkeypatch.setattr(processes, "reap_children", dict)
    killed = processes.kill_in_rounds(hopper.find, within=5)
    assert hopper.alive == set()
    assert killed


def test_rounds_end_at_their_bound_on_a_process_that_never_dies(monkeypatch):
    monkeypatch.setattr(processes, "send_signal", lambda pid, sig: None)
    monkeypatch.setattr(processes, "reap_children", dict)
    started = time.monotonic()
    assert processes.kill_in_rounds(lambda: {7}, within=0.5) == {7}
    assert time.monotonic() - started < 3


def test_a_process_in_a_nested_pid_namespace_counts_as_in_ours():
    """`unshare -Urpf` (no privilege needed) forks the first process of a
    new PID namespace below ours; the scan must not pass it over."""
    outer = subprocess.Popen(["unshare", "-Urpf", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while not processes.descendants(outer.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (inner,) = processes.descendants(outer.pid)
        assert os.stat("/proc/%d/ns/pid" % inner).st_ino != os.stat("/proc/self/ns/pid").st_ino
        assert processes._same_pid_namespace(str(inner))
        assert processes._same_pid_namespace(str(os.getpid()))
    finally:
        outer.kill()
        outer.wait()
