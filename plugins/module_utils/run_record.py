# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The run record: what a run of run-job.yml leaves on the controller, so
that `runs`, `status`, `logs`, `cancel` and `resume` (the collection's
playbooks) can look at a run while it goes on and after it ended, from any
terminal. Pure logic on files; the action plugins are thin around it.
Which processes own a run: run_processes.py; a run after its process
(settle: LOST; resume): run_recovery.py; files written whole:
private_files.py.

A record is a directory, private to its user (0700, files 0600):

    <runs dir>/<run id>/      (default ~/.fuzz-multinode/runs)
        fuzzfile.yml          the Fuzzfile as submitted (its bytes)
        command.json          the command line, without secret values
        state.json            the run's and every job's state (below)
        cancel.json           who canceled the run, and when (cancel)
        runner/               ansible-runner's private data directory
                              (a detached run: its status, rc, stdout)

state.json is written whole through a temporary name (readers never see
half of it), by one process at a time (a lock file): the run's own
ansible-playbook while it lives (the workflow role and the workflow
runner), then whoever finds it gone (`settle`: LOST, or CANCELED when a
cancel asked for it). It holds only names, times, hosts and exit
statuses: never a secret value.

    {"run", "workflow", "state", "started", "ended", "user", "detached",
     "resumed": [times], "owner": [{"role", "pid", "start", "boot"}],
     "log_dir", "order": [names], "canceled_by",
     "jobs": {name: {"kind", "image", "depends_on", "running_deps", "nodes",
                     "task_array", "form", "state", "start", "end",
                     "duration", "message", "hosts", "ready", "stopping",
                     "ranks": [{"rank", "task_id", "name", "node", "state",
                                "status", "start", "end", "duration",
                                "log"}],
                     "log", "rank_logs"}}}

Times are UTC, ISO 8601 (`2026-12-04T08:01:02Z`). A report drawn from the
record (issue 32) finds the DAG (`depends_on`, `running_deps`), each job's
and rank's times and states, and a service's start, `ready` and
`stopping`."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import re
from typing import Any, Callable, Dict, Iterator, List, Optional

from ansible_collections.fuzz.multinode.plugins.module_utils import run_report
from ansible_collections.fuzz.multinode.plugins.module_utils.private_files import make_private_dir, write_private
from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import utc, utc_precise
from ansible_collections.fuzz.multinode.plugins.module_utils.run_command import recorded_command

DEFAULT_RUNS_DIR = "~/.fuzz-multinode/runs"
RUNNING, FINISHED, FAILED, CANCELED, LOST = "RUNNING", "FINISHED", "FAILED", "CANCELED", "LOST"
RUN_STATES = (RUNNING, FINISHED, FAILED, CANCELED, LOST)
# A job's states: the workflow's outcomes (FINISHED, FAILED, CANCELED,
# NOT_RUN, TIMEOUT), WAITING before it starts, RUNNING, LOST (its run's
# process died under it), SKIPPED (FINISHED in the run a resume continues).
WAITING, NOT_RUN, SKIPPED = "WAITING", "NOT_RUN", "SKIPPED"
ENDED_JOB_STATES = (FINISHED, FAILED, CANCELED, NOT_RUN, "TIMEOUT", LOST, SKIPPED)
STATE_FILE, FUZZFILE, COMMAND_FILE, CANCEL_FILE, LOCK_FILE = (
    "state.json", "fuzzfile.yml", "command.json", "cancel.json", ".lock")
RUNNER_DIR = "runner"
# The run's page (run_report.py), beside its job logs, written with every
# change of the state.
REPORT_FILE = "report.html"
# What a run id may be (run-job.yml makes `20261204T080102Z-a1b2c3`): no
# path separators, so that a record is always inside the runs directory.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class RecordError(Exception):
    """A record that cannot be used as asked; the message says why, for the
    user (never a traceback)."""


# -- files -------------------------------------------------------------------------

def runs_dir(configured: Optional[str] = None) -> str:
    return os.path.abspath(os.path.expanduser(configured or DEFAULT_RUNS_DIR))


def record_dir(directory: str, run: str) -> str:
    if not isinstance(run, str) or not RUN_ID.match(run):
        raise RecordError("%r is not a run id (like 20261204T080102Z-a1b2c3; `ansible-playbook "
                          "fuzz.multinode.runs` lists them)" % (run,))
    return os.path.join(directory, run)


def write_json(path: str, value: Any) -> None:
    write_private(path, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode())


def read_json(path: str, run: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            value = json.loads(handle.read().decode())
    except FileNotFoundError:
        raise RecordError("run %s: its record has no %s (a corrupt record; %s)"
                          % (run, os.path.basename(path), os.path.dirname(path))) from None
    except PermissionError:
        raise RecordError("run %s: its record cannot be read (%s): it is not yours" % (run, path)) from None
    except (OSError, ValueError) as exc:
        raise RecordError("run %s: its record is corrupt: %s: %s" % (run, path, exc)) from None
    if not isinstance(value, dict):
        raise RecordError("run %s: its record is corrupt: %s is no JSON object" % (run, path))
    return value


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """One writer of a record's state at a time."""
    fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- what a record holds ---------------------------------------------------------------

def job_form(job: Dict[str, Any]) -> str:
    """A digest of a job's normalized JSON form (the fuzzfile module's `run`
    entry): equal forms run the same job."""
    return hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()


def job_entry(job: Dict[str, Any]) -> Dict[str, Any]:
    dependencies = job.get("depends_on") or []
    return {"kind": job.get("kind") or "job", "nodes": job.get("nodes"), "image": job.get("image_uri") or "",
            "task_array": bool(job.get("task_array")), "form": job_form(job),
            "depends_on": [dep["name"] for dep in dependencies if dep.get("status", FINISHED) != RUNNING],
            "running_deps": [dep["name"] for dep in dependencies if dep.get("status") == RUNNING],
            "state": WAITING, "start": None, "end": None, "duration": None, "message": "",
            "hosts": [], "ranks": [], "log": None, "rank_logs": None}


def user_name(uid: Optional[int] = None) -> str:
    uid = os.getuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


# -- writing -----------------------------------------------------------------------

def report_path(state: Dict[str, Any]) -> Optional[str]:
    """Where the run's page is: beside its job logs (None: no log folder)."""
    return os.path.join(state["log_dir"], REPORT_FILE) if state.get("log_dir") else None


class Record:
    """One run's record directory."""

    def __init__(self, path: str, run: str):
        self.path, self.run = path, run
        # Why the page could not be written last time (None: it was): the
        # state is written all the same, the page is a view of it.
        self.report_problem: Optional[str] = None

    def save(self, state: Dict[str, Any]) -> None:
        """Write the state, then the page drawn from it (under the lock, so
        that the page never shows an older state than the last one)."""
        write_json(self.file(STATE_FILE), state)
        where = report_path(state)
        if where is None:
            return
        try:
            run_report.write_report(state, where)
            self.report_problem = None
        except run_report.ReportError as exc:
            self.report_problem = str(exc)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def runner_dir(self) -> str:
        return self.file(RUNNER_DIR)

    def state(self) -> Dict[str, Any]:
        state = read_json(self.file(STATE_FILE), self.run)
        if not isinstance(state.get("jobs"), dict) or state.get("state") not in RUN_STATES:
            raise RecordError("run %s: its record is corrupt: %s has no run state or jobs"
                              % (self.run, self.file(STATE_FILE)))
        return state

    def update(self, change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
        """Read, change and write the state, one writer at a time."""
        with locked(self.path):
            state = self.state()
            change(state)
            self.save(state)
            return state

    def cancel_request(self) -> Optional[Dict[str, Any]]:
        if not os.path.exists(self.file(CANCEL_FILE)):
            return None
        try:
            return read_json(self.file(CANCEL_FILE), self.run)
        except RecordError:
            return {"by": "(unknown)", "at": None}


def open_record(directory: str, run: str, fuzzfile: bytes, argv: List[str], jobs: List[Dict[str, Any]],
                workflow: str, log_dir: str, owner: List[Dict[str, Any]], detached: bool = False,
                fuzzfile_path: str = "") -> Record:
    """Write a run's record as its jobs are about to run (a detached run's
    record, made when it was submitted, is taken over by its background
    process: its owner and jobs are set again, its submission kept)."""
    path = record_dir(directory, run)
    # The runs directory: made private; one that exists is left as it is
    # (a directory several users share); each record is private.
    os.makedirs(directory, 0o700, exist_ok=True)
    make_private_dir(path)
    record = Record(path, run)
    with locked(path):
        previous = None
        if os.path.exists(record.file(STATE_FILE)):
            previous = record.state()
        if previous is None:  # a detached run's: the submission's, kept
            write_private(record.file(FUZZFILE), fuzzfile)
            write_json(record.file(COMMAND_FILE), {"argv": recorded_command(argv), "cwd": os.getcwd()})
        state = {"run": run, "workflow": workflow, "fuzzfile": fuzzfile_path, "state": RUNNING,
                 "started": utc(), "ended": None,
                 "user": user_name(), "detached": detached, "resumed": [], "owner": owner, "log_dir": log_dir,
                 "order": [job["name"] for job in jobs], "canceled_by": None,
                 "jobs": {job["name"]: job_entry(job) for job in jobs}}
        if previous is not None:
            state["started"] = previous.get("started") or state["started"]
            state["detached"] = previous.get("detached", detached)
            state["resumed"] = previous.get("resumed") or []
            state["owner"] = list(previous.get("owner") or []) + owner
        record.save(state)
    return record


def submitted(directory: str, run: str, fuzzfile: bytes, argv: List[str], workflow: str, log_dir: str,
              fuzzfile_path: str = "") -> Record:
    """The record of a run submitted to the background: RUNNING from now
    on, owned by no process until its runner takes it (`take_over`)."""
    return open_record(directory, run, fuzzfile, argv, [], workflow, log_dir, [], detached=True,
                       fuzzfile_path=fuzzfile_path)


def scrub_runner_command(record: Record) -> None:
    """ansible-runner writes the command it ran and its whole environment
    to artifacts/*/command before the playbook starts; the record keeps
    neither an environment nor an extra variable's secret value."""
    artifacts = os.path.join(record.runner_dir, "artifacts")
    for ident in os.listdir(artifacts) if os.path.isdir(artifacts) else []:
        path = os.path.join(artifacts, ident, "command")
        try:
            with open(path) as handle:
                command = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(command, dict) and ("env" in command or not command.get("scrubbed")):
            argv = command.get("command")
            argv = argv if isinstance(argv, list) else []
            write_json(path, {"command": recorded_command([str(word) for word in argv]),
                              "cwd": command.get("cwd"), "scrubbed": True})


def take_over(record: Record, owner: List[Dict[str, Any]]) -> None:
    record.update(lambda state: state.__setitem__("owner", list(state.get("owner") or []) + owner))


def job_started(record: Record, name: str, hosts: List[str]) -> None:
    def change(state: Dict[str, Any]) -> None:
        entry = state["jobs"].setdefault(name, {})
        entry.update(state=RUNNING, start=utc(), end=None, hosts=list(hosts), ranks=[], message="")
    record.update(change)


def job_event(record: Record, name: str, event: str) -> None:
    """A service's `ready` or `stopping` time."""
    record.update(lambda state: state["jobs"].setdefault(name, {}).__setitem__(event, utc()))


def job_ended(record: Record, name: str, status: str, message: str = "", duration: Optional[float] = None,
              ranks: Optional[List[Dict[str, Any]]] = None) -> None:
    """A job's end: its state, why, its ranks (launch_job's `ranks`) and
    its logs on the controller (<log_dir>/<job>.log, <log_dir>/<job>/)."""
    def change(state: Dict[str, Any]) -> None:
        entry = state["jobs"].setdefault(name, {})
        entry.update(state=status, message=message or "", duration=duration,
                     ranks=[_rank(rank) for rank in ranks or []])
        if status != NOT_RUN:
            entry["start"] = entry.get("start") or utc()
            entry["end"] = utc()
            if state.get("log_dir"):
                entry["log"] = os.path.join(state["log_dir"], name + ".log")
                entry["rank_logs"] = os.path.join(state["log_dir"], name)
    record.update(change)


def _rank(rank: Dict[str, Any]) -> Dict[str, Any]:
    """A rank's (or task's) entry; its start and end (epoch seconds on the
    head) as UTC times to the millisecond."""
    entry = {key: rank.get(key) for key in ("rank", "task_id", "name", "node", "state", "status", "duration", "log")}
    for key in ("start", "end"):
        value = rank.get(key)
        entry[key] = utc_precise(value) if isinstance(value, (int, float)) else value
    return entry


def run_ended(record: Record, state_name: str, why: Optional[str] = None) -> Dict[str, Any]:
    """The run's end, as its own process sees it: every job not ended has
    the run's state (CANCELED); `why` a run canceled by its playbook's
    interrupt (a cancel request names its user instead)."""
    def change(state: Dict[str, Any]) -> None:
        cancel = record.cancel_request()
        final = CANCELED if cancel is not None and state_name != FINISHED else state_name
        state.update(state=final, ended=utc())
        if final == CANCELED:
            state["canceled_by"] = cancel.get("by") if cancel is not None else why
        for entry in state["jobs"].values():
            if entry.get("state") in (WAITING, RUNNING):
                entry["state"] = CANCELED if final == CANCELED else NOT_RUN if entry["state"] == WAITING else LOST
                entry["end"] = entry.get("end") or (utc() if entry.get("start") else None)
    return record.update(change)


def workflow_state(outcomes: Dict[str, Dict[str, Any]], transfer_failures: int = 0) -> str:
    """FINISHED when every job finished and every transfer was made; else
    CANCELED when a job was canceled, else FAILED."""
    statuses = [entry.get("status") for entry in outcomes.values()]
    if not transfer_failures and all(status == FINISHED for status in statuses):
        return FINISHED
    return CANCELED if CANCELED in statuses else FAILED


# -- reading -----------------------------------------------------------------------

def find(directory: str, run: str, uid: Optional[int] = None) -> Record:
    """The record of `run`, the user's own; RecordError says why not."""
    path = record_dir(directory, run)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise RecordError("no run %s in %s (`ansible-playbook fuzz.multinode.runs` lists the runs)"
                          % (run, directory)) from None
    except OSError as exc:
        raise RecordError("run %s: its record cannot be read: %s" % (run, exc)) from None
    uid = os.getuid() if uid is None else uid
    if info.st_uid != uid:
        raise RecordError("run %s is user %s's, not yours (%s): only its user may look at it or cancel it"
                          % (run, user_name(info.st_uid), user_name(uid)))
    return Record(path, run)


def request_cancel(record: Record, by: str) -> None:
    write_json(record.file(CANCEL_FILE), {"by": by, "at": utc()})
