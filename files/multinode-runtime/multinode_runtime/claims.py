"""Runs and their claims: which run of run-job.yml holds a job on this node.

Every run of the playbook has a run id (`<UTC time>-<6 hex digits>`, the
jobs' FB_WORKFLOW_ID), in the job spec as `run`. `prepare` claims the job on
each node for its run (the `run` file in the job's directory); a node holds
one run of a job at a time, and every later step of the run (secrets, the
head's start and polls, wrapper calls, cleanup) names its run and leaves
another run's job alone.

A claim of another run is stale, and `prepare` takes the job over (cleaning
up what that run left, as before runs had ids), only when nothing shows that
run alive on this node:
- no process of the job runs here (its recorded rank namespaces: rank 0 and
  the supervisor on the head, every wrapper call's command, and on a worker
  the head supervisor's lifeline, the `hold` session it keeps open for the
  job's whole life, so a long job's idle workers are never taken over), and
- the claim was not touched for its lease: claimed by `prepare`, touched
  again when the head's supervisor or a lifeline ends, so a run between its
  prepare and its head's start, or between the job's end and its play's
  cleanup, keeps its job.
Otherwise a second run is refused before it writes anything, naming the run
in its way.

The lease is the claiming run's (its spec's `claim_lease`, the role variable
fuzz_multinode_claim_lease), written with the claim: the gaps it covers are
that run's, so a later run with a shorter lease cannot cut them short. The
claim file holds the run id and the lease, a line each; a claim without a
lease (an older install) has the default, spec.CLAIM_LEASE.
"""

import fcntl
import os
import time
from contextlib import contextmanager

from . import registry
from .errors import RuntimeFailure
from .processes import pids_in_namespaces, recorded_namespaces
from .spec import CLAIM_LEASE

CLAIMS_LOCK = "claims.lock"  # in the state directory


@contextmanager
def claims_locked():
    """Claims are checked and changed under one lock per node, so two runs
    preparing the same job at once cannot both take it."""
    os.makedirs(registry.STATE_DIR, 0o755, exist_ok=True)
    with open(os.path.join(registry.STATE_DIR, CLAIMS_LOCK), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _claim_lines(job):
    """The lines of the job's claim file, None when it has none."""
    try:
        with open(registry.job_path(job, registry.RUN_FILE)) as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return None


def held_run(job):
    """The run holding the job here: its id, "" for a registration without
    one (an older install), None when the job is not registered here."""
    lines = _claim_lines(job)
    if lines is None:
        return "" if os.path.isdir(registry.job_dir(job)) else None
    return lines[0].strip() if lines else ""


def claim_lease(job):
    """The lease of the claim here, in seconds: the claiming run's."""
    try:
        lease = int((_claim_lines(job) or [])[1])
    except (IndexError, ValueError):
        return CLAIM_LEASE
    return lease if lease > 0 else CLAIM_LEASE


def write_claim(job, run, lease):
    registry.write_file(registry.job_path(job, registry.RUN_FILE), "%s\n%d\n" % (run, lease), 0o600)


def touch_claim(job):
    """Mark the claim as just used (best effort: it may be gone already)."""
    try:
        os.utime(registry.job_path(job, registry.RUN_FILE))
    except OSError:
        pass


def claim_age(job, now=None):
    try:
        changed = os.stat(registry.job_path(job, registry.RUN_FILE)).st_mtime
    except FileNotFoundError:
        try:
            changed = os.stat(registry.job_dir(job)).st_mtime
        except FileNotFoundError:
            return None
    return (time.time() if now is None else now) - changed


def job_alive(job, user):
    """Whether a process of the job runs on this node."""
    namespaces = recorded_namespaces(job)
    return bool(namespaces and pids_in_namespaces(namespaces, {os.getpid()}, user))


def claim_is_live(job, user, now=None):
    age = claim_age(job, now)
    return (age is not None and age < claim_lease(job)) or job_alive(job, user)


def check_free(job, run, node, user):
    """Refuse `run` the job when another run holds it here and is alive;
    returns the run holding it (None: nobody) for the caller to clean up."""
    held = held_run(job)
    if held is None or held == run:
        return held
    if claim_is_live(job, user):
        raise RuntimeFailure(
            "job %s is already running on %s as run %s; run %s does not start it again "
            "(wait for that run to end)" % (job, node, held or "(no id)", run or "(no id)"))
    return held


def holds(job, run):
    """Whether `run` may act on the job here: the run holding it, or any run
    when `run` is None (by hand: `cleanup JOB` without --run)."""
    return run is None or held_run(job) in (run, None)
