"""The job registry on this node: where a job's state, logs and settings
live, and the files in a job's directory.

A job registered on this node (by `prepare`) has a directory JOBS_DIR/<job>
holding its spec (spec.json), this node's inventory name (node), and the
records the runtime keeps while it runs (see the names below). Its logs are
under LOG_DIR/<job>. Every other module finds these paths here.
"""

import errno
import fcntl
import hashlib
import itertools
import json
import os
import re
import stat
import sys

from .errors import RuntimeFailure

STATE_DIR = "/run/fuzz-multinode"
JOBS_DIR = STATE_DIR + "/jobs"
CONTROL_DIR = STATE_DIR + "/ssh"  # the jobs' ssh ControlMaster sockets, a directory each (control_dir)
LOG_DIR = "/var/log/fuzz-multinode"
CONF_DIR = "/etc/fuzz-multinode"
SSH_CONFIG = CONF_DIR + "/ssh_config"
CLUSTER_KEY = CONF_DIR + "/cluster_ed25519"  # its private key (roles/node)
HOSTS_FILE = "/etc/hosts"
# Held while /etc/hosts is rewritten: root's own file, not /etc/hosts
# itself, which every user may open and so lock.
HOSTS_LOCK = STATE_DIR + "/hosts.lock"
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
EVENTS_DIR = "events"             # worker failures reported to the head (job user's)
CALLS_DIR = "calls"               # call records (calls.py; job user's)
# The most root reads of a record in a job-writable directory (read_job_record).
RECORD_LIMIT = 64 << 10
SECRETS_FILE = "secrets.json"     # the job's secret values (root only)
CREATED_FILE = "created.json"     # what prepare created for the job's files
CGROUPS_FILE = "cgroups"          # the job's cgroups (cgroups.py)
DEVICES_FILE = "devices.json"     # the job's devices on this node (devices.py; root only)
DEVICE_SLOTS_DIR = "device-slots"  # which task holds which of them (devices.py; root only)
LOCAL_SOCKET = "launch.sock"      # local mode: the head's launch socket
# The head's agent (agent.py); files/ssh-wrapper names the same paths.
AGENT_DIR = "agent"
AGENT_REQUESTS = "requests"       # in AGENT_DIR: the agent's request FIFO
RESULT_FILE = "result.json"       # the head supervisor's result
HEARTBEAT_FILE = "heartbeat"      # touched by every poll of the controller
CANCEL_FILE = "cancel"            # the controller's cancel request
RUN_ENDS_FILE = "run-ends"        # with it: the run ends with the job (its ephemeral volumes go)
READY_FILE = "ready"              # a service's: its readiness probe passed (readiness.py)
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
    the claim) reads all of it or none of it, never a file just created.
    Plain syscalls: the agent writes two call records per wrapper call."""
    new = "%s.new-%d" % (path, os.getpid())
    data = text.encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(new, flags, mode)
    except FileExistsError:  # left by a process of the same pid that died here
        os.unlink(new)
        fd = os.open(new, flags, mode)
    try:
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fchmod(fd, mode)
            if gid is not None:
                os.fchown(fd, 0, gid)
        finally:
            os.close(fd)
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
    os.makedirs(STATE_DIR, 0o755, exist_ok=True)
    # O_NOFOLLOW: STATE_DIR is root's, but never follow a link in any case.
    lock = os.open(HOSTS_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(HOSTS_FILE, "r+") as handle:
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
    finally:
        os.close(lock)


def control_dir(job):
    """The directory of the job's ssh ControlMaster sockets (the job
    user's): named by a hash of the job, as a socket's path must stay
    short (108 bytes) and ssh's %C name of one takes 40."""
    return os.path.join(CONTROL_DIR, hashlib.sha256(job.encode()).hexdigest()[:16])


def create_job_dir(job, node, raw_spec, user, script):
    """The job's directory, its log directory (emptied) and its ssh control
    directory, owned so that the job user can write what its wrapper calls
    record and read nothing that is root's; no other user reads any of it:
    the job's directory is 0751 (others may only pass through it: to its
    launch socket, whose own check refuses them) with the job's group, its
    files are root's or the group's only; LOG_DIR and CONTROL_DIR are 0711.
    (JOBS_DIR stays listable: the wrapper finds its job there.)"""
    for path, mode in ((STATE_DIR, 0o755), (JOBS_DIR, 0o755), (CONTROL_DIR, 0o711), (LOG_DIR, 0o711)):
        os.makedirs(path, mode, exist_ok=True)
        os.chmod(path, mode)
        os.chown(path, 0, 0)
    remove_tree(control_dir(job))  # another run's left behind
    os.makedirs(control_dir(job), 0o700)
    os.chown(control_dir(job), user.pw_uid, user.pw_gid)
    directory = job_dir(job)
    os.makedirs(directory, 0o751)
    os.chown(directory, 0, user.pw_gid)
    os.chmod(directory, 0o751)
    os.makedirs(os.path.join(directory, NAMESPACES_DIR), 0o700)
    for name in (EVENTS_DIR, CALLS_DIR):
        os.makedirs(os.path.join(directory, name), 0o700)
        os.chown(os.path.join(directory, name), user.pw_uid, user.pw_gid)
    write_file(os.path.join(directory, NODE_FILE), node + "\n", 0o640, gid=user.pw_gid)
    # The spec holds the job's env: readable by root and the job user only.
    write_file(os.path.join(directory, SPEC_FILE), raw_spec, 0o640, gid=user.pw_gid)
    if script is not None:
        write_file(os.path.join(directory, SCRIPT_FILE), script, 0o750, gid=user.pw_gid)
    # Logs hold whatever the job printed: root's and the job's group's only
    # (set-group-id: every log made in it is of the job's group).
    logs = os.path.join(LOG_DIR, job)
    os.makedirs(logs, 0o750, exist_ok=True)
    os.chown(logs, 0, user.pw_gid)
    os.chmod(logs, 0o2750)
    for old in os.listdir(logs):
        os.unlink(os.path.join(logs, old))


def remove_job_dir(job):
    remove_tree(control_dir(job))
    remove_tree(job_dir(job))


def remove_tree(path):
    """Remove the directory `path` and everything in it, never following a
    symbolic link: parts of a job's directory are the job user's, who may
    swap a directory for a link to elsewhere at any moment. Every entry is
    removed by name relative to an open descriptor of the directory holding
    it (opened O_NOFOLLOW), so a swap removes the link, never what it points
    to. Below REMOVE_DEPTH levels a directory is first moved up into `path`
    itself (by descriptors too): a tree of any depth takes a bounded number
    of descriptors and no deep recursion."""
    parent, name = os.path.split(path.rstrip("/"))
    try:
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        _remove_entry(parent_fd, name, None, 0)
    finally:
        os.close(parent_fd)


REMOVE_DEPTH = 32
REMOVE_PASSES = 10000  # of a directory's listing: entries made while it is removed


def _remove_entry(parent_fd, name, top_fd, depth):
    try:
        os.unlink(name, dir_fd=parent_fd)  # a file, a link, a FIFO, a socket
        return
    except FileNotFoundError:
        return
    except IsADirectoryError:
        pass
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file since
            return _remove_entry(parent_fd, name, top_fd, depth)
        raise
    try:
        top = fd if top_fd is None else top_fd
        for _unused in range(REMOVE_PASSES):
            entries = os.listdir(fd)
            if not entries:
                break
            for entry in entries:
                if depth >= REMOVE_DEPTH and _is_directory(fd, entry):
                    _move_up(fd, entry, top)
                else:
                    _remove_entry(fd, entry, top, depth + 1)
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except NotADirectoryError:
        _remove_entry(parent_fd, name, top_fd, depth)  # swapped for a link since


def _move_up(fd, name, top_fd):
    for number in itertools.count():
        moved = ".removing-%d-%d" % (os.getpid(), number)
        if not _exists(top_fd, moved):
            os.rename(name, moved, src_dir_fd=fd, dst_dir_fd=top_fd)
            return


def _exists(parent_fd, name):
    try:
        os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _is_directory(parent_fd, name):
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def read_job_record(directory, name, limit=RECORD_LIMIT):
    """The JSON value of the record `name` in a job-writable `directory`
    (events, calls), or None: only a regular file of a single link, owned
    by root or by the directory's owner (the job user), opened without
    following a link or waiting on a FIFO, of at most `limit` bytes (a
    longer one is not a record of the runtime)."""
    try:
        owners = {0, os.lstat(directory).st_uid}
    except OSError:
        return None
    data = _read_regular(os.path.join(directory, name), owners, limit)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None  # being written, or not a record


def open_owned(path, flags, owners, is_kind=stat.S_ISREG):
    """An fd of `path` in a job-writable place, or None: opened without
    following a link or waiting on a FIFO, and kept only if it is of the
    kind `is_kind` tells and owned by one of `owners`."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    info = os.fstat(fd)
    if not is_kind(info.st_mode) or info.st_uid not in owners:
        os.close(fd)
        return None
    return fd


def _read_regular(path, owners, limit):
    fd = open_owned(path, os.O_RDONLY, owners)
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if info.st_nlink != 1 or info.st_size > limit:
            return None
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def list_job_records(directory, limit=10000):
    """The names ending in .json in a job-writable directory, sorted; at
    most `limit` of them (a job cannot make root sort millions)."""
    names = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(".json"):
                    names.append(entry.name)
                    if len(names) >= limit:
                        break
    except OSError:
        return []
    return sorted(names)
