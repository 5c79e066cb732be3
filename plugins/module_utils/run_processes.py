# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Which processes own a run (its record's `owner`, module_utils/run_record.py):
each named by its pid, its start time since boot and the boot's id, so that
a pid the kernel gave to another process since, or a machine rebooted
since, is not taken for the run's process (run_resume.settle)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> Optional[str]:
    """A process's start time since boot (field 22 of /proc/PID/stat):
    with its pid, it names the process (a pid is reused). None when it is
    gone, or a zombie (dead, its parent has not reaped it yet)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except (OSError, IndexError):
        return None


def process_entry(role: str, pid: int) -> Dict[str, Any]:
    return {"role": role, "pid": pid, "start": _start_ticks(pid), "boot": _boot_id()}


def process_alive(entry: Dict[str, Any]) -> bool:
    """Whether the process a record names still runs (the same one: same
    boot, same start time where /proc tells)."""
    pid = entry.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if entry.get("boot") and _boot_id() and entry["boot"] != _boot_id():
        return False  # the machine rebooted since
    if entry.get("start") is not None and os.path.exists("/proc/self/stat"):
        return bool(_start_ticks(pid) == entry["start"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
