"""Call records: when each rank ran and how it ended, for the job's summary.

The process that makes a wrapper call (or starts a task of a task array)
records it on its node, in the job's `calls` directory: one file per call,
written when the call starts ({rank, start}) and rewritten when it returns
({rank, start, end, status}). A call killed when the job was torn down
keeps its start record only. The head's supervisor reads its own node's
records, gets the workers' (calls made there, e.g. by Open MPI's tree
spawn) with their cleanup, adds rank 0's own run, and sums them up per
rank (rank_outcomes) in the job's result.
"""

import json
import os

from . import registry


def record_call(job, record, caller=None):
    """Write, or rewrite, the record of this process's call (or of the call
    of process `caller`, which the head's agent makes for it). Best effort:
    a missing record only makes the job's summary say less."""
    path = os.path.join(registry.job_path(job, registry.CALLS_DIR),
                        "%.6f-%d.json" % (record["start"], caller or os.getpid()))
    try:
        registry.write_file(path, json.dumps(record), 0o600)
    except OSError:
        pass


def read_call_records(job):
    """Every call record of the job on this node. The directory is the job
    user's: only what looks like a record counts (registry.read_job_record),
    so a job's own files there never stall or crash the summary."""
    directory = registry.job_path(job, registry.CALLS_DIR)
    records = []
    for name in registry.list_job_records(directory):
        record = registry.read_job_record(directory, name)
        if is_call_record(record):
            records.append(record)
    return records


def is_call_record(record):
    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return (isinstance(record, dict) and number(record.get("start"))
            and ("end" not in record or number(record["end"])))


def rank_outcomes(spec, calls, ended):
    """One entry per rank (or task) of the job, in spec order, from the call
    records: `state` is "exited" with `status` (the first non-zero status of
    its calls by end time, else 0), "killed" (a call was still running when
    the job was torn down; `status` null) or "not started" (no call reached
    it); `start`, `end` (the job's end, `ended`, when a call was killed) and
    `duration` in seconds; `calls`; `log`, where its output went on its node
    (rank 0 of a job that is no task array: the job log, "job.log")."""
    outcomes = []
    for rank in spec.ranks:
        mine = [c for c in calls if c.get("rank") == rank.rank]
        head = rank.rank == 0 and spec.task_array is None
        entry = {"rank": rank.rank, "name": rank.name, "node": rank.node,
                 "log": registry.JOB_LOG_NAME if head else rank.log_name,
                 "state": "not started", "status": None, "start": None, "end": None,
                 "duration": None, "calls": len(mine)}
        if rank.is_task:
            entry["task_id"] = rank.task_id
        if mine:
            running = [c for c in mine if "end" not in c]
            failed = sorted((c for c in mine if "end" in c and c.get("status") != 0),
                            key=lambda c: c["end"])
            if failed:
                entry.update(state="exited", status=failed[0].get("status"))
            elif running:
                entry["state"] = "killed"
            else:
                entry.update(state="exited", status=0)
            start = min(c["start"] for c in mine)
            end = ended if running else max(c["end"] for c in mine)
            entry.update(start=start, end=end, duration=round(max(0.0, end - start), 3))
        outcomes.append(entry)
    return outcomes
