# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""What the collection's playbooks show of run records
(module_utils/run_record.py): the list of runs (`runs`), a run's job and
rank tables (`status`), which log `logs` shows, whether a run can be
canceled. Pure logic."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of
from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_alive
from ansible_collections.fuzz.multinode.plugins.module_utils.run_record import (
    FINISHED,
    RUN_ID,
    RUNNING,
    SKIPPED,
    Record,
    RecordError,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.run_recovery import settle


def list_runs(directory: str, uid: Optional[int] = None,
              alive: Callable[[Dict[str, Any]], bool] = process_alive) -> List[Dict[str, Any]]:
    """Every run of the user in `directory`, newest first: run, workflow,
    state, started, duration (seconds, to now for a running one), or an
    `error` for a record that cannot be read."""
    uid = os.getuid() if uid is None else uid
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RecordError("the runs directory %s cannot be read: %s" % (directory, exc)) from None
    runs: List[Dict[str, Any]] = []
    for name in names:
        path = os.path.join(directory, name)
        if not RUN_ID.match(name) or not os.path.isdir(path) or os.stat(path).st_uid != uid:
            continue
        try:
            state = settle(Record(path, name), alive)
        except RecordError as exc:
            runs.append({"run": name, "workflow": "-", "state": "CORRUPT", "started": "-", "duration": None,
                         "error": str(exc)})
            continue
        runs.append({"run": name, "workflow": state.get("workflow") or "-", "state": state["state"],
                     "started": state.get("started") or "-", "duration": run_duration(state)})
    return sorted(runs, key=_newest, reverse=True)


def _newest(entry: Dict[str, Any]) -> str:
    """When a run started, as a sortable text: its record's, else its id's
    (run-job.yml's ids begin with it: 20261204T080102Z-...)."""
    if entry["started"] != "-":
        return str(entry["started"])
    run = str(entry["run"])
    return "%s-%s-%sT%s:%s:%sZ" % (run[0:4], run[4:6], run[6:8], run[9:11], run[11:13], run[13:15])


def run_duration(state: Dict[str, Any], now: Optional[float] = None) -> Optional[float]:
    start = seconds_of(state.get("started"))
    end = seconds_of(state.get("ended")) if state.get("ended") else (time.time() if now is None else now)
    return None if start is None or end is None else max(0.0, end - start)


def format_seconds(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm%02ds" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


def table(rows: Sequence[Tuple[str, ...]]) -> List[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return [("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]).rstrip()
            for row in rows]


def runs_lines(runs: List[Dict[str, Any]]) -> List[str]:
    if not runs:
        return ["no runs"]
    rows = [("run", "workflow", "state", "started", "duration")]
    rows += [(entry["run"], entry["workflow"], entry["state"], entry["started"],
              entry.get("error") or format_seconds(entry["duration"])) for entry in runs]
    return table(rows)


def _clock(stamp: Optional[str]) -> str:
    return stamp[11:19] if stamp and len(stamp) >= 19 else "-"


def after(job: Dict[str, Any]) -> str:
    """What a job waits for, as the job tables show the workflow's graph:
    `prepare, db (RUNNING)`, `-` for nothing. `job` is a Fuzzfile job
    (depends_on entries {name, status}) or a record's (names, and the
    services it needs RUNNING in running_deps)."""
    names = []
    for dep in job.get("depends_on") or []:
        if isinstance(dep, dict):
            names.append(dep["name"] + (" (RUNNING)" if dep.get("status") == "RUNNING" else ""))
        else:
            names.append(str(dep))
    names += ["%s (RUNNING)" % dep for dep in job.get("running_deps") or []]
    return ", ".join(names) or "-"


def status_lines(state: Dict[str, Any]) -> List[str]:
    """The run's state, then the per-job table of the end of a foreground
    run (job, status, start, end, seconds, after, details) and a row per rank of
    every job that has ranks recorded, or runs."""
    title = "run %s (%s): %s, started %s" % (state["run"], state.get("workflow") or "-", state["state"],
                                             state.get("started") or "-")
    if state.get("ended"):
        title += ", ended %s" % state["ended"]
    if state.get("canceled_by"):
        title += ", canceled by %s" % state["canceled_by"]
    if state.get("message"):
        title += ": %s" % state["message"]
    elif state["state"] == "LOST":
        title += " (last heard of): its ansible-playbook is gone; `resume` runs what did not finish"
    jobs = state["jobs"]
    order = [name for name in state.get("order") or [] if name in jobs] + sorted(
        name for name in jobs if name not in (state.get("order") or []))
    rows = [("job", "status", "start", "end", "seconds", "after", "details")]
    for name in order:
        entry = jobs[name]
        duration = entry.get("duration")
        rows.append((name, entry.get("state") or "-", _clock(entry.get("start")), _clock(entry.get("end")),
                     "-" if duration is None else "%.1f" % float(duration), after(entry),
                     "" if entry.get("state") in (FINISHED, SKIPPED) else entry.get("message") or ""))
    lines = [title] + table(rows)
    for name in order:
        entry = jobs[name]
        if entry.get("state") == RUNNING:
            lines.append("job %s runs on %s" % (name, ", ".join(entry.get("hosts") or []) or "-"))
        ranks = entry.get("ranks") or []
        if ranks:
            tasks = entry.get("task_array")
            rank_rows = [("task" if tasks else "rank", "host name", "inventory host", "exit status", "log")]
            for rank in ranks:
                outcome = str(rank.get("status")) if rank.get("state") == "exited" else rank.get("state") or "-"
                rank_rows.append((str(rank.get("task_id") if tasks else rank.get("rank")), rank.get("name") or "-",
                                  rank.get("node") or "-", outcome, rank_log(entry, rank) or "-"))
            lines += ["job %s:" % name] + ["  " + line for line in table(rank_rows)]
    return lines


def rank_log(entry: Dict[str, Any], rank: Dict[str, Any]) -> Optional[str]:
    if rank.get("rank") == 0 and not entry.get("task_array"):
        return str(entry["log"]) if entry.get("log") else None
    if entry.get("rank_logs") and rank.get("log"):
        return os.path.join(str(entry["rank_logs"]), str(rank["log"]))
    return None


def logged_jobs(state: Dict[str, Any], job: Optional[str]) -> List[str]:
    """The jobs whose logs `logs` shows: the one named, else every job of
    the run in its order."""
    jobs = state["jobs"]
    if job:
        if job not in jobs:
            raise RecordError("run %s has no job %s (its jobs: %s)"
                              % (state["run"], job, ", ".join(state.get("order") or jobs) or "none"))
        return [job]
    order = [name for name in state.get("order") or [] if name in jobs]
    return order + sorted(name for name in jobs if name not in order)


def job_log_path(state: Dict[str, Any], name: str) -> str:
    """A job's log on the controller (<log_dir>/<job>.log unless its end
    recorded another)."""
    entry = state["jobs"][name]
    path = entry.get("log") or (os.path.join(state["log_dir"], name + ".log") if state.get("log_dir") else None)
    if not path:
        raise RecordError("run %s: job %s has no log on this controller" % (state["run"], name))
    return path


def cancelable(state: Dict[str, Any]) -> None:
    if state["state"] != RUNNING:
        raise RecordError("run %s is %s%s: there is nothing to cancel" % (
            state["run"], state["state"], " since %s" % state["ended"] if state.get("ended") else ""))
