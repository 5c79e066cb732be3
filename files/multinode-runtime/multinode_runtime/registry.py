"""The job registry on this node: where a job's state, logs and settings
live, and the files in a job's directory.

A job registered on this node (by `prepare`) has a directory JOBS_DIR/<job>
holding its spec (spec.json), this node's inventory name (node), and the
records the runtime keeps while it runs (see the names below). Its logs are
under LOG_DIR/<job>. Every other module finds these paths here.
"""

import fcntl
import os
import re
import sys

from .errors import RuntimeFailure

STATE_DIR = "/run/fuzz-multinode"
JOBS_DIR = STATE_DIR + "/jobs"
CONTROL_DIR = STATE_DIR + "/ssh"  # the job user's ssh ControlMaster sockets
LOG_DIR = "/var/log/fuzz-multinode"
CONF_DIR = "/etc/fuzz-multinode"
SSH_CONFIG = CONF_DIR + "/ssh_config"
HOSTS_FILE = "/etc/hosts"
# The runtime itself: the directory Python runs (its __main__.py), started
# again for task-array tasks and local-mode connections.
RUNTIME = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
PYTHON = sys.executable or "/usr/bin/python3"
JOB_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")  # \Z: "$" would take a trailing newline

# Entries of a job's directory.
SPEC_FILE = "spec.json"
RUN_FILE = "run"                  # the run holding the job here (claims.py)
NODE_FILE = "node"
SCRIPT_FILE = "script"            # the job's script (mode "script")
NAMESPACES_DIR = "ns"             # the job's UTS namespaces on this node
EVENTS_DIR = "events"             # worker failures reported to the head
CALLS_DIR = "calls"               # call records (calls.py)
SECRETS_FILE = "secrets.json"     # the job's secret values (root only)
CREATED_FILE = "created.json"     # what prepare created for the job's files
CGROUPS_FILE = "cgroups"          # the job's cgroups (cgroups.py)
LOCAL_SOCKET = "launch.sock"      # local mode: the head's launch socket
# The head's agent (agent.py); files/ssh-wrapper names the same paths.
AGENT_DIR = "agent"
AGENT_REQUESTS = "requests"       # in AGENT_DIR: the agent's request FIFO
RESULT_FILE = "result.json"       # the head supervisor's result
HEARTBEAT_FILE = "heartbeat"      # touched by every poll of the controller
CANCEL_FILE = "cancel"            # the controller's cancel request
SUPERVISOR_PID_FILE = "supervisor.pid"  # the head supervisor, started by `start`
SUPERVISOR_OUT_FILE = "supervisor.out"  # what it printed (said when it ends without a result)
# The head: the logs the worker nodes handed over at the job's teardown,
# for the play's cleanup here to bring home (teardown.py).
HANDED_LOGS_FILE = "worker-logs.json"

# Entries of a job's log directory: the job log (rank 0's output and the
# runtime's messages, on the head) and one log per rank or task (log_name).
JOB_LOG_NAME = "job.log"


def runtime_command(*args):
    """The argv that starts this runtime with a subcommand."""
    return [PYTHON, "-I", RUNTIME] + list(args)


def job_dir(job):
    if not JOB_NAME_RE.match(job or ""):
        raise RuntimeFailure("invalid job name %r" % (job,))
    return os.path.join(JOBS_DIR, job)


def job_path(job, name):
    """An entry of the job's directory (one of the names above)."""
    return os.path.join(job_dir(job), name)


def this_node(job):
    with open(job_path(job, NODE_FILE)) as handle:
        return handle.read().strip()


def registered_jobs():
    try:
        return os.listdir(JOBS_DIR)
    except FileNotFoundError:
        return []


def log_name(rank):
    """The file name of a rank's log on its node, rank-<r>.log, or of a
    task's, task-<task id>.log: the one naming rule (the controller copies
    the logs home under the names the runtime reports)."""
    if rank.task_id is not None:
        return "task-%d.log" % rank.task_id
    return "rank-%d.log" % rank.rank


def rank_log_path(job, rank):
    return os.path.join(LOG_DIR, job, log_name(rank))


def job_log_path(job):
    return os.path.join(LOG_DIR, job, JOB_LOG_NAME)


def write_file(path, text, mode, gid=None):
    """Write the whole file, by a rename: another process polling for it
    (the supervisor its cancel file, a status poll the result, a later run
    the claim) reads all of it or none of it, never a file just created."""
    new = "%s.new-%d" % (path, os.getpid())
    try:
        os.unlink(new)  # left by a process of the same pid that died here
    except FileNotFoundError:
        pass
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            os.fchmod(handle.fileno(), mode)
            if gid is not None:
                os.fchown(handle.fileno(), 0, gid)
        os.rename(new, path)
    except BaseException:
        try:
            os.unlink(new)
        except OSError:
            pass
        raise


def hosts_block_markers(job):
    """The lines that open and close the job's block in /etc/hosts."""
    return "# BEGIN fuzz.multinode job %s\n" % job, "# END fuzz.multinode job %s\n" % job


def has_hosts_block(job):
    with open(HOSTS_FILE) as handle:
        return hosts_block_markers(job)[0] in handle.read()


def write_hosts_block(job, entries):
    """Rewrite this job's managed block in /etc/hosts in place: container
    engines bind-mount the file, so it cannot be replaced by a rename."""
    begin, end = hosts_block_markers(job)
    with open(HOSTS_FILE, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        kept, inside = [], False
        for line in handle.read().splitlines(True):
            if line == begin:
                inside = True
            elif line == end:
                inside = False
            elif not inside:
                kept.append(line)
        if kept and not kept[-1].endswith("\n"):
            kept[-1] += "\n"
        if entries:
            kept += [begin] + ["%s %s\n" % e for e in entries] + [end]
        handle.seek(0)
        handle.write("".join(kept))
        handle.truncate()


def create_job_dir(job, node, raw_spec, user, script):
    """The job's directory, its log directory (emptied) and the runtime's
    ssh control directory, owned so that the job user can write what its
    wrapper calls record and read nothing that is root's."""
    for path, mode in ((JOBS_DIR, 0o755), (CONTROL_DIR, 0o700)):
        os.makedirs(path, mode, exist_ok=True)
    os.chown(CONTROL_DIR, user.pw_uid, user.pw_gid)
    os.chmod(CONTROL_DIR, 0o700)
    directory = job_dir(job)
    os.makedirs(directory, 0o755)
    os.makedirs(os.path.join(directory, NAMESPACES_DIR), 0o700)
    for name in (EVENTS_DIR, CALLS_DIR):
        os.makedirs(os.path.join(directory, name), 0o700)
        os.chown(os.path.join(directory, name), user.pw_uid, user.pw_gid)
    write_file(os.path.join(directory, NODE_FILE), node + "\n", 0o644)
    # The spec holds the job's env: readable by root and the job user only.
    write_file(os.path.join(directory, SPEC_FILE), raw_spec, 0o640, gid=user.pw_gid)
    if script is not None:
        write_file(os.path.join(directory, SCRIPT_FILE), script, 0o755)
    logs = os.path.join(LOG_DIR, job)
    os.makedirs(logs, 0o755, exist_ok=True)
    for old in os.listdir(logs):
        os.unlink(os.path.join(logs, old))


def remove_job_dir(job):
    directory = job_dir(job)
    if os.path.isdir(directory):
        for root, dirs, files in os.walk(directory, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
        os.rmdir(directory)
