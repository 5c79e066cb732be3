# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A run after its own process (module_utils/run_record.py is the record):
`settle` says what a RUNNING run whose processes are all gone became (LOST;
CANCELED when a cancel asked for it; FAILED when no job had started) and
writes it so; `resume_plan` and `resumed` run an ended run again, skipping
the jobs that FINISHED in it."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of, utc
from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_alive
from ansible_collections.fuzz.multinode.plugins.module_utils.run_record import (
    CANCEL_FILE,
    CANCELED,
    FAILED,
    FINISHED,
    LOST,
    NOT_RUN,
    RUNNING,
    SKIPPED,
    STATE_FILE,
    WAITING,
    Record,
    RecordError,
    job_form,
)


def settle(record: Record, alive: Callable[[Dict[str, Any]], bool] = process_alive,
           grace: float = 60.0, now: Optional[float] = None) -> Dict[str, Any]:
    """The run's state as it is: a RUNNING run whose processes are all gone
    is LOST (CANCELED when a cancel asked for it), written so. A run
    submitted less than `grace` seconds ago whose runner has not taken it
    yet is still RUNNING."""
    state = record.state()
    if state["state"] != RUNNING or any(alive(entry) for entry in state.get("owner") or []):
        return state
    started = seconds_of(state.get("started")) or 0.0
    if not state.get("owner") and (now if now is not None else time.time()) - started < grace:
        return state

    def change(current: Dict[str, Any]) -> None:
        if current["state"] != RUNNING or any(alive(entry) for entry in current.get("owner") or []):
            return
        cancel = record.cancel_request()
        # No job started: the playbook failed before (a node could not be
        # prepared), or was killed then; its output says which.
        started = any(entry.get("state") != WAITING for entry in current["jobs"].values())
        final = CANCELED if cancel is not None else LOST if started else FAILED
        # Lost: last heard of when its record was last written.
        current.update(state=final, ended=utc(os.path.getmtime(record.file(STATE_FILE))) if final == LOST
                       else utc())
        if final == FAILED:
            current["message"] = "its playbook ended before any job started: see its output%s" % (
                " (runner/artifacts/*/stdout in the record)" if current.get("detached") else "")
        if cancel is not None:
            current["canceled_by"] = cancel.get("by")
        for entry in current["jobs"].values():
            if entry.get("state") in (WAITING, RUNNING):
                entry["state"] = final if entry["state"] == RUNNING else NOT_RUN
                if entry["state"] != NOT_RUN:
                    entry["end"] = utc()
    return record.update(change)


def resume_plan(state: Dict[str, Any], jobs: List[Dict[str, Any]]) -> List[str]:
    """The jobs a resume of the run skips: those FINISHED in it (a service
    runs again: it serves the jobs that run now). RecordError when the run
    still runs, or when its jobs are not the Fuzzfile's now, naming the
    first that changed."""
    if state["state"] in (RUNNING, FINISHED):
        raise RecordError("run %s is %s: %s" % (state["run"], state["state"], "cancel it first, or wait for it to end"
                                                if state["state"] == RUNNING else "there is nothing to resume"))
    recorded = state["jobs"]
    now = {job["name"]: job for job in jobs}
    for name in list(recorded) + [name for name in now if name not in recorded]:
        if name not in now:
            raise RecordError("run %s cannot be resumed with this Fuzzfile: job %s is not in it any more"
                              % (state["run"], name))
        if name not in recorded:
            raise RecordError("run %s cannot be resumed with this Fuzzfile: job %s is new" % (state["run"], name))
        if recorded[name].get("form") != job_form(now[name]):
            raise RecordError("run %s cannot be resumed with this Fuzzfile: job %s changed since the run"
                              % (state["run"], name))
    return [name for name in state.get("order") or recorded
            if recorded[name].get("state") in (FINISHED, SKIPPED) and recorded[name].get("kind") != "service"]


def resumed(record: Record, skipped: List[str], owner: List[Dict[str, Any]], log_dir: str) -> None:
    """The run runs again: RUNNING, its skipped jobs SKIPPED (their times
    and logs kept), the others WAITING, their logs to come in `log_dir`
    (the page too), a new owner."""
    def change(state: Dict[str, Any]) -> None:
        state.update(state=RUNNING, ended=None, canceled_by=None, message=None, owner=owner, log_dir=log_dir)
        state["resumed"] = list(state.get("resumed") or []) + [utc()]
        for name, entry in state["jobs"].items():
            if name in skipped:
                entry["state"] = SKIPPED
            else:
                entry.update(state=WAITING, start=None, end=None, duration=None, message="", hosts=[], ranks=[])
                entry.pop("log", None)
                entry.pop("rank_logs", None)
    record.update(change)
    with contextlib.suppress(FileNotFoundError):
        os.remove(record.file(CANCEL_FILE))
