"""The controller's requests about a job on a node: start it and ask how it
runs (the head), cancel it, and bring its logs home at cleanup.

The controller (plugins/action/launch_job.py, plugins/action/node_job.py)
calls these as runtime subcommands and reads the JSON they print: it never
names a file of the job's directory. Every request names its run; a job
another run holds here is left alone (claims.py).
"""

import base64
import json
import os
import subprocess
import time

from . import registry
from .claims import claim_lease, held_run, holds
from .errors import RuntimeFailure
from .sandbox import job_sandbox
from .spec import load_spec

LOG_CHUNK = 256 << 10  # bytes of the job log one status answer carries at most
LOGS_INLINE = 256 << 10  # bytes of a node's logs the cleanup answer carries
# Seconds between two looks for the job's result while a status answer
# waits for it (the controller polls again at once after an answer): a look
# is a few system calls, and a short job's end is seen this much sooner.
STATUS_WAIT_STEP = 0.01
# Seconds to wait for a result after the supervisor is gone: it may be
# writing it right now.
RESULT_GRACE = 0.5


def check_run(job, run):
    """Fail unless the job is registered here and held by `run`."""
    if not os.path.isfile(registry.job_path(job, registry.SPEC_FILE)):
        raise RuntimeFailure("job %s is not registered on this node" % job)
    if not holds(job, run):
        raise RuntimeFailure("job %s on this node belongs to run %s, not to run %s"
                             % (job, held_run(job) or "(no id)", run))


def start(job, run, controller_timeout, wait, log_offset):
    """Start the head supervisor in its own session, detached from the
    caller; then answer as `status` does, waiting up to `wait` seconds for
    the job to end (a short job's start is then its only request)."""
    check_run(job, run)
    spec = load_spec(job)
    registry.write_file(registry.job_path(job, registry.HEARTBEAT_FILE), "", 0o600)
    out_fd = os.open(registry.job_path(job, registry.SUPERVISOR_OUT_FILE),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(out_fd, "wb") as out:
        process = subprocess.Popen(
            registry.runtime_command("head", job, "--controller-timeout", str(controller_timeout)),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)
    registry.write_file(registry.job_path(job, registry.SUPERVISOR_PID_FILE), "%d\n" % process.pid, 0o600)
    answer = status(job, run, wait, log_offset, started=process)
    answer.update(started=True, pid=process.pid, kill_grace=spec.kill_grace)
    return answer


def status(job, run, wait, log_offset, started=None):
    """Whether the job has ended (its result, once it has) and the job log
    from `log_offset` on; every status request is a heartbeat. Waits up to
    `wait` seconds for the job to end, unless more of the log is waiting
    than one answer carries."""
    check_run(job, run)
    os.utime(registry.job_path(job, registry.HEARTBEAT_FILE))
    deadline = time.monotonic() + wait
    while True:
        result = _result(job)
        if result is not None:
            break
        if not _supervisor_alive(job, started):
            time.sleep(RESULT_GRACE)
            result = _result(job)
            if result is None:
                return dict(_supervisor_failed(job), **job_log(job, log_offset))
            break
        if time.monotonic() >= deadline or _log_size(job) - log_offset > LOG_CHUNK:
            return dict(finished=False, changed=False, **_ready(job), **job_log(job, log_offset))
        time.sleep(STATUS_WAIT_STEP)
    # The log is read after the result: once there is one, it is complete.
    result.update(finished=True, changed=True, **job_log(job, log_offset))
    if result.get("status") != "FINISHED":
        result.update(failed=True, msg=result.get("message", ""))
    return result


def _ready(job):
    """A service's readiness, once its probe passed (readiness.py):
    {"ready": what the probe saw}; else nothing."""
    try:
        with open(registry.job_path(job, registry.READY_FILE), "rb") as handle:
            return {"ready": handle.read().decode(errors="replace").strip()}
    except FileNotFoundError:
        return {}


def cancel(job, run, reason, run_volumes=False):
    """Ask the head supervisor to cancel the job (it stops the job on every
    node and writes its result); with `run_volumes` the run ends with the
    job, said before the cancel itself so that the teardown sees it."""
    check_run(job, run)
    if run_volumes:
        registry.write_file(registry.job_path(job, registry.RUN_ENDS_FILE), "", 0o600)
    registry.write_file(registry.job_path(job, registry.CANCEL_FILE), reason + "\n", 0o600)
    return {"changed": True, "job": job}


def job_log(job, offset):
    """Up to LOG_CHUNK bytes of the job log from `offset` (base64: the log
    is bytes) and the log's size."""
    try:
        with open(registry.job_log_path(job), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(offset)
            data = handle.read(LOG_CHUNK)
    except FileNotFoundError:
        size, data = 0, b""
    return {"log_data": base64.b64encode(data).decode(), "log_size": size}


def node_logs(job, spec, node, with_job_log):
    """The logs of the job's ranks (or tasks) on this node, for the cleanup
    answer: [{"rank", "name" (its file name), "size", "path", "data"
    (base64; absent when over the inline budget: fetch `path`)}], and the
    job log's {"path", "size"} when asked (the head: the controller did not
    stream all of it)."""
    logs, budget = [], LOGS_INLINE
    for rank in spec.ranks if spec is not None else []:
        if rank.node != node:
            continue
        path = registry.rank_log_path(job, rank)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue
        entry = {"rank": rank.rank, "name": rank.log_name, "size": size, "path": path}
        if size <= budget:
            with open(path, "rb") as handle:
                data = handle.read(budget)
            entry["data"] = base64.b64encode(data).decode()
            budget -= len(data)
        logs.append(entry)
    answer = {"logs": logs}
    if with_job_log:
        path = registry.job_log_path(job)
        if os.path.exists(path):
            answer["job_log"] = {"path": path, "size": os.stat(path).st_size}
    return answer


def show(job=None):
    """What this node holds of the job (`show JOB`): the run holding it,
    whether it is registered (and its claim's lease), whether its secret
    values are kept here and its host names listed in /etc/hosts, whether
    it has a log directory here, and its logs (text, undecodable bytes
    replaced): the job log (None: none here) and the others by file name;
    and the host pid of its sandbox's PID 1 (None: none here), which a
    test enters to act as a process of the job. Without a job: the jobs
    registered here."""
    if job is None:
        return {"jobs": sorted(registry.registered_jobs())}
    directory = os.path.dirname(registry.job_log_path(job))
    logs = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        with open(os.path.join(directory, name), "rb") as handle:
            logs[name] = handle.read().decode(errors="replace")
    registered = os.path.isdir(registry.job_dir(job))
    sandbox = job_sandbox(job) if registered else None
    return {"job": job, "run": held_run(job),
            "sandbox": sandbox.pid if sandbox is not None and sandbox.alive() else None,
            # Anything of its registration: its directory (spec, secrets,
            # pinned namespaces).
            "registered": registered,
            "claim_lease": claim_lease(job) if registered else None,
            "secrets": os.path.exists(registry.job_path(job, registry.SECRETS_FILE)),
            "hosts_block": registry.has_hosts_block(job),
            "log_dir": os.path.isdir(directory),
            "job_log": logs.pop(registry.JOB_LOG_NAME, None), "logs": logs}


def _result(job):
    try:
        with open(registry.job_path(job, registry.RESULT_FILE)) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # being written


def _supervisor_alive(job, started):
    if started is not None:
        return started.poll() is None
    try:
        with open(registry.job_path(job, registry.SUPERVISOR_PID_FILE)) as handle:
            pid = int(handle.read())
    except (FileNotFoundError, ValueError):
        return False
    return os.path.exists("/proc/%d" % pid)


def _supervisor_failed(job):
    try:
        with open(registry.job_path(job, registry.SUPERVISOR_OUT_FILE), "rb") as handle:
            said = handle.read().decode(errors="replace").strip()
    except FileNotFoundError:
        said = ""
    message = "the job's supervisor ended without a result: %s" % (said or "no output")
    return {"failed": True, "finished": True, "status": "FAILED", "msg": message}


def _log_size(job):
    try:
        return os.stat(registry.job_log_path(job)).st_size
    except FileNotFoundError:
        return 0
