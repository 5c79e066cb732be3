"""fuzz.multinode node runtime (Python 3 standard library only).

Run as `/usr/bin/python3 -I multinode-runtime.py SUBCOMMAND ...`.

Installed on every node of a cluster by the fuzz.multinode.node role and run
as one of these subcommands:

  prepare --node NODE   (root) register a job on this node; the job spec
                        (JSON, see docs/design.md) is read from stdin
  head JOB              (root, head node) run rank 0 and supervise the job;
                        prints the job's result as JSON
  launch                (root, sshd forced command) start one wrapper call
                        for a rank of an active job on this node
  wrapper [OPTS] HOST CMD...
                        (job user) MULTINODE_SSH_WRAPPER: run CMD on the
                        node of rank HOST, ssh's argv contract
  secrets JOB           (root) take the values of the job's secret://
                        references (JSON {"scope/name": value} on stdin)
  task JOB INDEX        (job user, head node) run task INDEX of a task-array
                        job on its node, the way a wrapper call runs
  connect JOB REQUEST   (job user, local mode) carry a launch request to
                        the head's local launch socket, as ssh would
  cleanup JOB [--everywhere]
                        (root) kill every process of JOB on this node,
                        remove the files it placed, unregister it; prints
                        JSON. --everywhere (head): on the job's other nodes
                        too, when no play will (the playbook was interrupted)

Every process of a rank runs in a UTS namespace whose host name is the rank's
name (<job>-<rank>). The namespaces are recorded per job, so cleanup finds
every process of the job, including ones that called setsid, by namespace.
"""

import base64
import ctypes
import fcntl
import json
import os
import pwd
import re
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

STATE_DIR = "/run/fuzz-multinode"
JOBS_DIR = STATE_DIR + "/jobs"
CONTROL_DIR = STATE_DIR + "/ssh"
LOG_DIR = "/var/log/fuzz-multinode"
CONF_DIR = "/etc/fuzz-multinode"
SSH_CONFIG = CONF_DIR + "/ssh_config"
HOSTS_FILE = "/etc/hosts"
PROG = "multinode-ssh-wrapper"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
JOB_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CLONE_NEWUTS = 0x04000000
MS_BIND = 0x1000
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
MPI_NAMES = {"openmpi": "Open MPI", "ompi": "Open MPI", "mpich": "MPICH"}


class RuntimeFailure(Exception):
    """An error to report to the user as one clear line, never a traceback."""


# --------------------------------------------------------------------------
# Job registry on this node
# --------------------------------------------------------------------------

def job_dir(job):
    if not JOB_NAME_RE.match(job or ""):
        raise RuntimeFailure("invalid job name %r" % (job,))
    return os.path.join(JOBS_DIR, job)


def load_spec(job):
    try:
        with open(os.path.join(job_dir(job), "spec.json")) as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise RuntimeFailure("job %s is not active on this node" % job) from None


def this_node(job):
    with open(os.path.join(job_dir(job), "node")) as handle:
        return handle.read().strip()


def rank_log_path(job, rank):
    """The log of a rank (rank-<r>.log) or of a task (its spec `log`)."""
    return os.path.join(LOG_DIR, job, rank.get("log") or "rank-%d.log" % rank["rank"])


def job_log_path(job):
    return os.path.join(LOG_DIR, job, "job.log")


def rank_environment(spec, rank, user):
    """The environment a rank's processes start with: login basics, then the
    rank's env from the job spec (job env, HOSTNAME, RANK, MULTINODE_*)."""
    env = {
        "PATH": DEFAULT_PATH,
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "LOGNAME": user.pw_name,
        "SHELL": "/bin/sh",
    }
    if user.pw_uid == 0:
        # Open MPI refuses root unless told twice (fuzzfile-reference §6).
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if spec.get("local"):
        # Every rank is on this machine, at a loopback address: Open MPI's
        # TCP transport must use the loopback interface, or with several
        # interfaces it can wait forever for a peer that answers from
        # another one. The job's own env still wins.
        env["OMPI_MCA_btl_tcp_if_include"] = "127.0.0.0/8"
    env.update(rank["env"])
    return env


def job_user(spec):
    try:
        return pwd.getpwnam(spec["user"])
    except KeyError:
        raise RuntimeFailure("job user %r does not exist on %s"
                             % (spec["user"], socket.gethostname())) from None


# --------------------------------------------------------------------------
# Rank namespaces: host names and the unit of cleanup
# --------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def enter_rank_namespace(job, name):
    """Move this process into a new UTS namespace named `name` and record
    the namespace under the job, so cleanup can find all its processes."""
    if _libc.unshare(CLONE_NEWUTS) != 0:
        err = ctypes.get_errno()
        raise RuntimeFailure(
            "cannot give rank %s its host name: unshare(CLONE_NEWUTS) failed: "
            "%s (the runtime needs root with CAP_SYS_ADMIN; containers need "
            "--cap-add SYS_ADMIN)" % (name, os.strerror(err)))
    socket.sethostname(name)
    ns = os.stat("/proc/self/ns/uts").st_ino
    record = os.path.join(job_dir(job), "ns", str(ns))
    open(record, "w").close()
    # Pin the namespace to its record (a bind mount holds it alive): the
    # kernel gives a dead namespace's inode number to the next namespace
    # made anywhere on the machine (a container's, say), and cleanup by
    # that number would then kill processes that are not the job's. Best
    # effort: pids_in_namespaces also keeps to our own PID namespace.
    _libc.mount(b"/proc/self/ns/uts", record.encode(), None, MS_BIND, None)
    return ns


def release_namespace(job, ns):
    """Unpin and forget a recorded namespace (it has no process left)."""
    record = os.path.join(job_dir(job), "ns", str(ns))
    _libc.umount2(record.encode(), MNT_DETACH)
    try:
        os.unlink(record)
    except FileNotFoundError:
        pass


def become_subreaper():
    # Orphaned job processes re-parent to us, so we reap them (no zombies).
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def recorded_namespaces(job):
    try:
        return {int(n) for n in os.listdir(os.path.join(job_dir(job), "ns"))}
    except FileNotFoundError:
        return set()


def pids_in_namespaces(namespaces, exclude=(), user=None):
    """Processes whose UTS namespace is one of `namespaces`. Root without
    CAP_SYS_PTRACE (a container's default) may not read another user's
    /proc/PID/ns; the job user may read its own processes', so those are
    checked again as the job user."""
    found, unreadable = [], []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            if os.stat("/proc/%s/ns/uts" % entry).st_ino in namespaces and _same_pid_namespace(entry):
                found.append(int(entry))
        except PermissionError:
            unreadable.append(int(entry))
        except OSError:
            continue  # gone, or a zombie
    if unreadable and user is not None and os.getuid() == 0 and user.pw_uid != 0:
        found += pids_in_namespaces_as(user, namespaces, unreadable)
    return found


def _same_pid_namespace(pid):
    """Whether a process is in our PID namespace: a host-side runtime (local
    mode) sees the processes of every container on the machine, and must
    never take one of theirs for its own."""
    return os.stat("/proc/%s/ns/pid" % pid).st_ino == os.stat("/proc/self/ns/pid").st_ino


def pids_in_namespaces_as(user, namespaces, pids):
    def scan(emit):
        for pid in pids:
            try:
                if os.stat("/proc/%d/ns/uts" % pid).st_ino in namespaces and _same_pid_namespace(pid):
                    emit({"pid": pid})
            except OSError:
                continue
    records, _ = run_as(user, scan)
    return [record["pid"] for record in records if "pid" in record]


def reap_children():
    """Reap every exited child; returns {pid: wait status}."""
    done = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = status


def descendants(ancestor):
    """Every process below `ancestor` in the process tree. While a runtime
    process lives it is a subreaper, so this includes processes that
    daemonized (setsid, double fork) and ones whose namespace we may not read
    (non-dumpable processes such as ssh, without CAP_SYS_PTRACE)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ppid = _parent(int(entry))
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [ancestor]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def job_processes(namespaces, user):
    me = os.getpid()
    return set(pids_in_namespaces(namespaces, {me}, user)) | set(descendants(me))


def kill_job_processes(namespaces, grace, user):
    """SIGTERM every process of ours (in the namespaces, or below us), wait
    up to `grace` seconds, then SIGKILL what is left. Returns how many
    processes were signalled."""
    victims = job_processes(namespaces, user)
    # The top of each process tree first (a rank's shell, a launched
    # command), the processes they started a moment later: signalled all at
    # once, a child could die and let a shell go on past its `wait` before
    # the shell's own SIGTERM lands, so its trap would never run.
    tops = {pid for pid in victims if _parent(pid) not in victims}
    for pid in tops:
        _signal(pid, signal.SIGTERM)
    if victims - tops:
        time.sleep(POLL_SECONDS)
        for pid in victims - tops:
            _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while job_processes(namespaces, user) and time.monotonic() < deadline:
        reap_children()
        time.sleep(POLL_SECONDS)
    for pid in job_processes(namespaces, user):
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while job_processes(namespaces, user) and time.monotonic() < deadline:
        reap_children()
        time.sleep(POLL_SECONDS)
    reap_children()
    return len(victims)


def _parent(pid):
    """A process's parent pid (None if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def exit_status(wait_status):
    """Shell convention: the exit code, or 128 + signal number."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def spawn_as(user, argv, env, cwd, stdin, stdout, stderr):
    """Start argv as the job user in its own session (process group)."""
    kwargs = {}
    if os.getuid() == 0 and user.pw_uid != 0:
        kwargs = dict(user=user.pw_uid, group=user.pw_gid,
                      extra_groups=os.getgrouplist(user.pw_name, user.pw_gid))
    try:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin,
                                stdout=stdout, stderr=stderr,
                                start_new_session=True, close_fds=True,
                                **kwargs)
    except OSError as exc:
        raise RuntimeFailure("cannot run %r: %s" % (argv[0], exc.strerror)) from None


# --------------------------------------------------------------------------
# Streams: whole lines, one write each
# --------------------------------------------------------------------------

class LineWriter:
    """Buffers a byte stream and writes only complete lines to `fd`, all
    complete lines of a chunk in one write(2), so concurrent writers to the
    same O_APPEND file never tear each other's lines. flush() writes the
    unterminated tail at end of stream: to a log (a file opened O_APPEND:
    the job log, a rank log) followed by a newline, so it stays a line of
    its own instead of being glued to the next line another writer appends;
    elsewhere (a pipe, a file opened without O_APPEND) as it is, the bytes
    ssh would deliver."""

    MAX_PENDING = 8 << 20  # a line longer than this is written in pieces

    def __init__(self, fd):
        self.fd = fd
        self.pending = b""
        try:
            self.terminate = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
        except OSError:
            self.terminate = False

    def feed(self, data):
        self.pending += data
        cut = self.pending.rfind(b"\n") + 1
        if cut == 0 and len(self.pending) >= self.MAX_PENDING:
            cut = len(self.pending)
        if cut:
            write_all(self.fd, self.pending[:cut])
            self.pending = self.pending[cut:]

    def flush(self):
        if self.pending:
            write_all(self.fd, self.pending + b"\n" if self.terminate else self.pending)
            self.pending = b""


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            return


# Framed records from launcher to wrapper on ssh's stdout: one type byte,
# a 4-byte big-endian length, the payload. The exit status has its own
# record because ssh's own exit code (255) is ambiguous.
FRAME_STDOUT, FRAME_STDERR, FRAME_EXIT, FRAME_ERROR = b"O", b"E", b"X", b"!"
_HEADER = struct.Struct(">cI")


def send_frame(fd, kind, payload):
    write_all(fd, _HEADER.pack(kind, len(payload)) + payload)


class FrameReader:
    def __init__(self):
        self.buffer = b""

    def feed(self, data):
        self.buffer += data
        while len(self.buffer) >= _HEADER.size:
            kind, size = _HEADER.unpack_from(self.buffer)
            end = _HEADER.size + size
            if len(self.buffer) < end:
                return
            yield kind, self.buffer[_HEADER.size:end]
            self.buffer = self.buffer[end:]


# --------------------------------------------------------------------------
# prepare / cleanup (run by the job role as root on every node of the job)
# --------------------------------------------------------------------------

def cmd_prepare(args):
    if len(args) != 2 or args[0] != "--node":
        raise RuntimeFailure("usage: prepare --node NODE < spec.json")
    node = args[1]
    spec = json.load(sys.stdin)
    job = spec["job"]
    check_resources(spec, node)  # before anything is written
    directory = job_dir(job)
    if os.path.isdir(directory):
        cleanup_job(job, spec.get("kill_grace", 10), job_user(spec))  # a stale run
    user = job_user(spec)
    for path, mode in ((JOBS_DIR, 0o755), (CONTROL_DIR, 0o700)):
        os.makedirs(path, mode, exist_ok=True)
    os.chown(CONTROL_DIR, user.pw_uid, user.pw_gid)
    os.chmod(CONTROL_DIR, 0o700)
    os.makedirs(directory, 0o755)
    os.makedirs(os.path.join(directory, "ns"), 0o700)
    events = os.path.join(directory, "events")
    os.makedirs(events, 0o700)
    os.chown(events, user.pw_uid, user.pw_gid)
    calls = os.path.join(directory, "calls")  # wrapper calls made here (record_call)
    os.makedirs(calls, 0o700)
    os.chown(calls, user.pw_uid, user.pw_gid)
    write_file(os.path.join(directory, "node"), node + "\n", 0o644)
    # The spec holds the job's env: readable by root and the job user only.
    write_file(os.path.join(directory, "spec.json"), json.dumps(spec), 0o640,
               gid=user.pw_gid)
    if spec.get("mode") == "script":
        write_file(os.path.join(directory, "script"), spec["script"], 0o755)
    logs = os.path.join(LOG_DIR, job)
    os.makedirs(logs, 0o755, exist_ok=True)
    for old in os.listdir(logs):
        os.unlink(os.path.join(logs, old))
    write_hosts_block(job, [(r["address"], r["name"]) for r in spec["ranks"]])
    prepare_inputs(spec, node, user)
    print(json.dumps({"changed": True, "job": job, "node": node}))


def write_file(path, text, mode, gid=None):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)
    if gid is not None:
        os.chown(path, 0, gid)


def write_hosts_block(job, entries):
    """Rewrite this job's managed block in /etc/hosts in place: container
    engines bind-mount the file, so it cannot be replaced by a rename."""
    begin = "# BEGIN fuzz.multinode job %s\n" % job
    end = "# END fuzz.multinode job %s\n" % job
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


def cleanup_job(job, grace, user):
    namespaces = recorded_namespaces(job)
    killed = kill_job_processes(namespaces, grace, user)
    for ns in namespaces:
        release_namespace(job, ns)
    remove_cgroups(job)
    remove_job_files(job, user)
    write_hosts_block(job, [])
    directory = job_dir(job)
    if os.path.isdir(directory):
        for root, dirs, files in os.walk(directory, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
        os.rmdir(directory)
    return killed


def cmd_cleanup(args):
    """cleanup JOB: stop every process of the job on this node and remove
    its registration. --everywhere (on the head, when no play will clean up
    after the job: it was interrupted) does the same on the job's other
    nodes first."""
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] != "--everywhere"):
        raise RuntimeFailure("usage: cleanup JOB [--everywhere]")
    job = args[0]
    grace, user, spec = 10, None, None
    try:
        spec = load_spec(job)
        grace, user = spec.get("kill_grace", grace), job_user(spec)
    except RuntimeFailure:
        pass  # not registered here (any more): only the hosts block to clear
    if spec is not None and len(args) == 2 and not spec.get("local"):
        here = this_node(job)
        others = {}
        for rank in spec["ranks"]:
            if rank["node"] != here:
                others.setdefault(rank["node"], rank)
        clean_nodes(spec, user, others, unregister=True)
    killed = cleanup_job(job, grace, user)
    print(json.dumps({"changed": killed > 0, "job": job, "killed": killed}))


# --------------------------------------------------------------------------
# Job inputs: secrets, files, cwd
# --------------------------------------------------------------------------
#
# Secrets: the spec keeps `secret://NAME` references (secret_env: {key: NAME},
# secret_args: arguments that expand them); the values arrive separately
# (`secrets JOB`, from a no_log task) and are kept in the job's directory on
# /run, readable by root only. Only the processes that start a rank's command
# (head supervisor, launcher: root) read them, and only into that command's
# environment and argv.
#
# Files: written by prepare as the job user (never root: the paths are on a
# real host), parents created as the job user where missing. A new file is
# mode 0644, owned by the job user, and removed again at cleanup with the
# directories prepare created for it (when empty). An existing regular file
# of the job user is overwritten and kept; any other existing path (another
# user's file, a symbolic link, a directory) is never written and fails the
# job before it starts.
#
# cwd: never created (the vendor's image would provide it); a cwd the job
# user cannot enter fails the job before it starts, naming node and rank.

SECRETS_FILE = "secrets.json"
CREATED_FILE = "created.json"
FILE_MODE = 0o644


def secret_names(spec):
    """The secret names (scope/name) a job references, in its env
    (secret_env) and in arguments that expand them (secret_args)."""
    names = set((spec.get("secret_env") or {}).values())
    for item in spec.get("secret_args") or []:
        names.update(value for kind, value in item["parts"] if kind == "secret")
    return names


def job_secrets(spec):
    """{name: value} of the job's secrets on this node. Messages name the
    secret, never its value."""
    names = secret_names(spec)
    if not names:
        return {}
    try:
        with open(os.path.join(job_dir(spec["job"]), SECRETS_FILE)) as handle:
            stored = json.load(handle)
    except FileNotFoundError:
        stored = {}
    values = {}
    for name in sorted(names):
        if name not in stored:
            raise RuntimeFailure(
                "the value of secret://%s was not delivered to node %s; the play gives each "
                "node the values from fuzz_multinode_secrets" % (name, socket.gethostname()))
        value = stored[name]
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise RuntimeFailure("secret://%s: its value in fuzz_multinode_secrets must be a string" % name)
        if "\0" in value:
            raise RuntimeFailure("secret://%s: its value contains a NUL character, which an "
                                 "environment variable cannot hold" % name)
        values[name] = value
    return values


def job_environment(spec, rank, user):
    """What a rank's command starts with: rank_environment with the job's
    secret:// env values resolved."""
    env = rank_environment(spec, rank, user)
    secret_env = spec.get("secret_env") or {}
    if secret_env:
        values = job_secrets(spec)
        for key, name in secret_env.items():
            if key in rank["env"]:
                env[key] = values[name]
    return env


def job_argv(spec):
    """The spec's argv with the arguments that expand secrets filled in."""
    argv = list(spec["argv"])
    if spec.get("secret_args"):
        values = job_secrets(spec)
        for item in spec["secret_args"]:
            argv[item["index"]] = "".join(
                values[value] if kind == "secret" else value for kind, value in item["parts"])
    return argv


def job_cwd(spec, rank):
    """The job's cwd, which must exist: a rank never runs somewhere else."""
    cwd = spec.get("cwd") or "/"
    if not os.path.isdir(cwd):
        raise RuntimeFailure("jobs.%s.cwd: %s: no such directory on node %s (rank %d, %s)" % (
            spec["job"], cwd, rank["node"], rank["rank"], rank["name"]))
    return cwd


def forget_secrets(job):
    """Remove the job's secret values from this node. They are needed only
    to start the job's commands, so they go when the job is torn down, also
    when no play comes to clean up after it (an interrupted playbook)."""
    try:
        os.unlink(os.path.join(job_dir(job), SECRETS_FILE))
    except FileNotFoundError:
        pass


def cmd_secrets(args):
    if len(args) != 1:
        raise RuntimeFailure('usage: secrets JOB < {"scope/name": "value", ...}')
    spec = load_spec(args[0])
    try:
        given = json.load(sys.stdin)
    except ValueError:
        given = None
    if not isinstance(given, dict):
        raise RuntimeFailure("secrets: stdin must be a JSON mapping of secret names to values")
    wanted = secret_names(spec)
    missing = sorted(wanted - set(given))
    if missing:
        raise RuntimeFailure("secrets: no value given for %s" % ", ".join(
            "secret://" + name for name in missing))
    write_file(os.path.join(job_dir(spec["job"]), SECRETS_FILE),
               json.dumps({name: given[name] for name in wanted}), 0o600)
    print(json.dumps({"changed": True, "job": spec["job"], "secrets": len(wanted)}))


def run_as(user, work, *args):
    """Run work(emit, *args) in a child process with the job user's uid,
    gid and groups, so it touches the node with the job user's rights only.
    emit(record) sends a JSON record back. Returns (the records, None), or
    (the records sent, why) when work did not finish."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1

        def emit(record):
            write_all(writer, (json.dumps(record) + "\n").encode())

        try:
            os.close(reader)
            if os.getuid() == 0 and user.pw_uid != 0:
                os.setgroups(os.getgrouplist(user.pw_name, user.pw_gid))
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
            os.umask(0o022)
            work(emit, *args)
            emit({"done": True})
            status = 0
        except BaseException as exc:
            emit({"failed": "%s: %s" % (type(exc).__name__, exc)})
        finally:
            os._exit(status)
    os.close(writer)
    data = b""
    while True:
        chunk = os.read(reader, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(reader)
    os.waitpid(child, 0)
    records = [json.loads(line) for line in data.decode().splitlines() if line]
    if records and records[-1] == {"done": True}:
        return records[:-1], None
    failed = "working as user %s on %s failed" % (user.pw_name, socket.gethostname())
    if records and "failed" in records[-1]:
        failed += ": " + records.pop()["failed"]
    return records, failed


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "uid %d" % uid


def place_file(emit, path, data):
    """Write data at path as the calling (job) user, creating missing parent
    directories; emit {"created": path, "kind": "dir"|"file"} for everything
    created, before writing into it. Raises OSError or RuntimeFailure."""
    parts = path.split("/")[1:-1]
    for depth in range(1, len(parts) + 1):
        directory = "/" + "/".join(parts[:depth])
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            continue  # ours to use, or not a directory: open() says which
        except OSError as exc:
            raise RuntimeFailure("cannot create directory %s: %s" % (directory, exc.strerror)) from None
        emit({"created": directory, "kind": "dir"})
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
        emit({"created": path, "kind": "file"})
    except FileExistsError:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise RuntimeFailure("exists as a symbolic link, which is never followed") from None
        if not stat.S_ISREG(info.st_mode):
            raise RuntimeFailure("exists and is not a regular file") from None
        if info.st_uid != os.getuid():
            raise RuntimeFailure("exists and belongs to %s, not to the job user, so it is "
                                 "never overwritten" % _owner(info.st_uid)) from None
        fd = os.open(path, flags)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            os.close(fd)
            raise RuntimeFailure("was replaced while it was being written") from None
        os.ftruncate(fd, 0)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _prepare_as_user(emit, spec):
    for entry in spec.get("files") or []:
        where = "jobs.%s.files.%s" % (spec["job"], entry["path"])
        try:
            place_file(emit, entry["path"], entry["contents"].encode("utf-8"))
        except RuntimeFailure as exc:
            emit({"error": "%s: %s" % (where, exc)})
        except OSError as exc:
            emit({"error": "%s: cannot write it: %s" % (where, exc.strerror)})
    cwd = spec.get("cwd") or "/"
    try:
        os.chdir(cwd)
    except FileNotFoundError:
        emit({"error": "jobs.%s.cwd: %s: no such directory" % (spec["job"], cwd)})
    except NotADirectoryError:
        emit({"error": "jobs.%s.cwd: %s: not a directory" % (spec["job"], cwd)})
    except OSError as exc:
        emit({"error": "jobs.%s.cwd: %s: cannot enter it: %s" % (spec["job"], cwd, exc.strerror)})


# --------------------------------------------------------------------------
# Resources: what a rank asks of its node (spec "resources")
# --------------------------------------------------------------------------

def node_cpus():
    """The CPUs this node lets us run on (a container's cpuset included)."""
    return sorted(os.sched_getaffinity(0))


def node_memory_bytes():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


SYSFS_CPU = "/sys/devices/system/cpu"
SYSFS_NODE = "/sys/devices/system/node"
AFFINITY_GROUP = {"SOCKET": "socket", "NUMA": "NUMA node"}


def parse_cpu_list(text):
    """The CPUs of a kernel CPU list such as `0-3,8`."""
    cpus = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpu_groups(affinity, cpus):
    """The node's usable CPUs grouped by socket (SOCKET) or NUMA node (NUMA),
    from sysfs; None for CORE (any CPUs). Without the sysfs topology all
    CPUs count as one group."""
    groups = {}
    if affinity == "SOCKET":
        for cpu in cpus:
            try:
                with open("%s/cpu%d/topology/physical_package_id" % (SYSFS_CPU, cpu)) as handle:
                    groups.setdefault(int(handle.read()), []).append(cpu)
            except (OSError, ValueError):
                return [sorted(cpus)]
    elif affinity == "NUMA":
        try:
            names = sorted(n for n in os.listdir(SYSFS_NODE) if re.match(r"node\d+$", n))
            for name in names:
                with open(os.path.join(SYSFS_NODE, name, "cpulist")) as handle:
                    mine = sorted(parse_cpu_list(handle.read()) & set(cpus))
                if mine:
                    groups[int(name[4:])] = mine
        except (OSError, ValueError):
            return [sorted(cpus)]
        if not groups:
            return [sorted(cpus)]
    else:
        return None
    return [groups[key] for key in sorted(groups)]


def choose_cpus(cpus, groups, cores, turn):
    """`cores` CPUs for a rank, the `turn`-th one on its node (tasks sharing
    a node take turns): any CPUs (groups None: CORE), else CPUs of one group
    (socket or NUMA node) that has enough. None when no group has enough."""
    if groups is None:
        first = turn * cores
        return sorted({cpus[(first + i) % len(cpus)] for i in range(cores)})
    fitting = [group for group in groups if len(group) >= cores]
    if not fitting:
        return None
    group = fitting[turn % len(fitting)]
    first = (turn // len(fitting)) * cores
    return sorted({group[(first + i) % len(group)] for i in range(cores)})


def check_resources(spec, node):
    """Refuse, before the job starts, a request larger than this node has."""
    wanted = spec.get("resources") or {}
    problems = []
    cores, cpus = wanted.get("cores"), node_cpus()
    if cores and cores > len(cpus):
        problems.append("jobs.%s.resource.cpu.cores: %d requested, but the node has %d CPUs" % (
            spec["job"], cores, len(cpus)))
    elif cores and wanted.get("affinity") in AFFINITY_GROUP:
        groups = cpu_groups(wanted["affinity"], cpus)
        if choose_cpus(cpus, groups, cores, 0) is None:
            problems.append(
                "jobs.%s.resource.cpu.affinity: %s needs %d CPUs in one %s, but the node's "
                "largest has %d" % (spec["job"], wanted["affinity"], cores,
                                   AFFINITY_GROUP[wanted["affinity"]], max(len(g) for g in groups)))
    memory, total = wanted.get("memory_bytes"), node_memory_bytes()
    if memory and total and memory > total:
        problems.append("jobs.%s.resource.memory: %d bytes requested, but the node has %d" % (
            spec["job"], memory, total))
    if problems:
        raise RuntimeFailure("job %s cannot start on node %s: %s" % (
            spec["job"], node, "; ".join(problems)))


def bind_cpus(spec, rank):
    """Bind this process, and so the rank's processes, to resource.cpu.cores
    CPUs of the node, as Fuzzball gives a job that many cores: with
    cpu.affinity SOCKET or NUMA all of one socket or NUMA node. Tasks of a
    task array that share a node, and in local mode all ranks, take the
    next CPUs in turn."""
    wanted = spec.get("resources") or {}
    cores, cpus = wanted.get("cores"), node_cpus()
    if not cores or cores > len(cpus):
        return
    if spec.get("local"):
        turn = rank["rank"]  # every rank and task shares this one node
    elif "task_id" in rank:
        turn = rank["rank"] // max(1, spec.get("nodes") or 1)
    else:
        turn = 0
    chosen = choose_cpus(cpus, cpu_groups(wanted.get("affinity"), cpus), cores, turn)
    if chosen:
        os.sched_setaffinity(0, chosen)


# Memory limits: each rank (or task) in a memory cgroup of its own, limited to
# resource.memory.size (times the cores with by-core). cgroup v2: under
# /sys/fs/cgroup/fuzz-multinode. cgroup v1: below this process's own memory
# cgroup (so limits nest inside a container's), in the memory hierarchy where
# it is mounted writable, else in a private mount of it (possible with
# CAP_SYS_ADMIN, as in a container). The created cgroups are listed in the
# job's directory and removed at cleanup.
CGROUP_ROOT = "/sys/fs/cgroup"
# Beside the state directory, not in it: nothing that walks job state
# should walk into a cgroup file system.
PRIVATE_MEMORY_MOUNT = "/run/fuzz-multinode-cgroup-memory"
CGROUPS_FILE = "cgroups"


def own_cgroup(proc_self_cgroup, controller):
    """This process's cgroup path for a v1 controller, from /proc/self/cgroup."""
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2].strip() or "/"
    return "/"


def memory_cgroup_base():
    """(directory to create the job's memory cgroups in, None), or
    (None, why memory cannot be limited on this node)."""
    controllers = os.path.join(CGROUP_ROOT, "cgroup.controllers")
    if os.path.exists(controllers):  # cgroup v2
        with open(controllers) as handle:
            if "memory" not in handle.read().split():
                return None, "the cgroup v2 memory controller is not available"
        try:
            with open(os.path.join(CGROUP_ROOT, "cgroup.subtree_control"), "w") as handle:
                handle.write("+memory")
        except OSError as exc:
            return None, "cannot enable the cgroup v2 memory controller: %s" % exc.strerror
        return os.path.join(CGROUP_ROOT, "fuzz-multinode"), None
    hierarchy = os.path.join(CGROUP_ROOT, "memory")
    if not (os.path.isdir(hierarchy) and _can_create_in(hierarchy)):
        hierarchy = PRIVATE_MEMORY_MOUNT
        if not os.path.ismount(hierarchy):
            os.makedirs(hierarchy, 0o700, exist_ok=True)
            mount = subprocess.run(["mount", "-t", "cgroup", "-o", "memory", "fuzz-multinode", hierarchy],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if mount.returncode != 0:
                return None, "no writable cgroup memory controller (%s)" % (
                    last_line(mount.stderr) or "mount exited with status %d" % mount.returncode)
    with open("/proc/self/cgroup") as handle:
        own = own_cgroup(handle.read(), "memory")
    return os.path.join(hierarchy, own.lstrip("/"), "fuzz-multinode"), None


def _can_create_in(directory):
    probe = os.path.join(directory, "fuzz-multinode-probe-%d" % os.getpid())
    try:
        os.mkdir(probe)
        os.rmdir(probe)
        return True
    except OSError:
        return False


def limit_memory(spec, rank):
    """Move this process (and so the rank's processes) into a memory cgroup
    limited to the rank's request. Returns a warning when the node cannot
    limit memory, else None."""
    limit = (spec.get("resources") or {}).get("memory_bytes")
    if not limit:
        return None
    try:
        base, why_not = memory_cgroup_base()
        if base is None:
            return "jobs.%s.resource.memory is not enforced on this node: %s" % (spec["job"], why_not)
        group = os.path.join(base, rank["name"])
        os.makedirs(base, exist_ok=True)
        try:
            os.mkdir(group)
            # Recorded once, by the call that created it: every wrapper
            # call of the rank joins the same group.
            with open(os.path.join(job_dir(spec["job"]), CGROUPS_FILE), "a") as handle:
                handle.write(group + "\n")
        except FileExistsError:
            pass
        v2 = os.path.exists(os.path.join(group, "memory.max"))
        for name in (("memory.max", "memory.swap.max") if v2 else
                     ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")):
            try:
                with open(os.path.join(group, name), "w") as handle:
                    handle.write("0" if name == "memory.swap.max" else str(limit))
            except FileNotFoundError:
                continue  # no swap accounting on this kernel
        with open(os.path.join(group, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
    except OSError as exc:
        return "jobs.%s.resource.memory is not enforced on this node: %s: %s" % (
            spec["job"], exc.filename or "cgroup", exc.strerror)
    return None


def remove_cgroups(job):
    """Remove the job's memory cgroups (their processes are gone by now)."""
    try:
        with open(os.path.join(job_dir(job), CGROUPS_FILE)) as handle:
            groups = handle.read().split()
    except OSError:
        return
    for group in groups:
        try:
            os.rmdir(group)
        except OSError:
            continue


def prepare_inputs(spec, node, user):
    """As the job user: write the job's files (recording what was created,
    for cleanup) and check that it can enter the job's cwd. Every problem
    found fails the job before it starts, in one message."""
    if not spec.get("files") and (spec.get("cwd") or "/") == "/":
        return
    records, failed = run_as(user, _prepare_as_user, spec)
    created = [r for r in records if "created" in r]
    if created:
        write_file(os.path.join(job_dir(spec["job"]), CREATED_FILE), json.dumps(created), 0o600)
    errors = [r["error"] for r in records if "error" in r] + ([failed] if failed else [])
    if errors:
        where = "node %s" % node
        for rank in spec["ranks"]:
            if rank["node"] == node:
                where += " (rank %d, %s)" % (rank["rank"], rank["name"])
        raise RuntimeFailure("job %s cannot start on %s as user %s: %s" % (
            spec["job"], where, user.pw_name, "; ".join(errors)))


def _remove_created(emit, created):
    for record in reversed(created):  # files, then directories deepest first
        try:
            if record["kind"] == "dir":
                os.rmdir(record["created"])  # only when empty
            elif not stat.S_ISDIR(os.lstat(record["created"]).st_mode):
                os.unlink(record["created"])
        except OSError:
            continue  # gone, or no longer ours to remove


def remove_job_files(job, user):
    """Remove what prepare created for the job's files, as the job user
    (a path the job could have replaced is never removed with root's
    rights). Without the job user nothing is removed."""
    path = os.path.join(job_dir(job), CREATED_FILE)
    try:
        with open(path) as handle:
            created = json.load(handle)
    except (OSError, ValueError):
        return
    if user is not None:
        _, failed = run_as(user, _remove_created, created)
        if failed:  # the rest of the cleanup still has to happen
            sys.stderr.write("multinode-runtime: removing the job's files: %s\n" % failed)
        os.unlink(path)


# --------------------------------------------------------------------------
# head: rank 0 and the job's supervisor
# --------------------------------------------------------------------------

def clean_nodes(spec, user, nodes, unregister):
    """Send the cleanup request to `nodes` ({node: a rank on it}) in
    parallel, over fresh ssh connections as the job user (the multiplexed
    ones are gone by now): each node stops what is left of the job there,
    and with `unregister` also removes the job's registration (cleanup_job).
    Returns the call records the nodes answer with."""
    request = encode_request({"job": spec["job"], "cleanup": True, "unregister": unregister})
    head = spec["ranks"][0]
    calls = [spawn_as(user, ssh_command(node, rank["address"]) + [
                 "-o", "ControlMaster=no", "-o", "ControlPath=none", "-T", request],
                 rank_environment(spec, head, user), "/",
                 subprocess.DEVNULL, subprocess.PIPE, subprocess.DEVNULL)
             for node, rank in nodes.items()]
    records = []
    deadline = time.monotonic() + spec.get("kill_grace", 10) + 20
    for call in calls:
        try:
            answer, _ = call.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            call.kill()
            call.communicate()
            continue
        for kind, payload in FrameReader().feed(answer):
            if kind == FRAME_STDOUT:
                try:
                    records += json.loads(payload)
                except ValueError:
                    pass
    return records


class Cancelled(Exception):
    pass


class TimedOut(Exception):
    """The job ran longer than its policy.timeout.execute."""


def cmd_head(args):
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--controller-timeout"):
        raise RuntimeFailure("usage: head JOB [--controller-timeout SECONDS]")
    job = args[0]
    spec = load_spec(job)
    if len(args) == 3:
        spec["controller_timeout"] = float(args[2])
    supervisor = (TaskArraySupervisor if spec.get("task_array") else Supervisor)(spec)
    result = supervisor.run()
    result["ranks"] = supervisor.rank_report(time.time())
    directory = job_dir(job)
    write_file(os.path.join(directory, "result.json"), json.dumps(result), 0o644)
    print(json.dumps(result))


class Supervisor:
    """Runs rank 0 on the head and fails the job on the first failed worker."""

    def __init__(self, spec):
        self.spec = spec
        self.job = spec["job"]
        self.head = spec["ranks"][0]
        self.user = job_user(spec)
        self.grace = spec.get("kill_grace", 10)
        self.cancelled = None
        self.lost_nodes = set()
        self.local_launcher = None  # pid of the local launch socket's server
        self.rank0_call = None  # rank 0's own run, as a call record
        self.remote_calls = []  # the call records of the workers' nodes

    def run(self):
        started = time.time()
        result = {"job": self.job, "status": "FAILED", "rc": None,
                  "failed_rank": None, "message": "",
                  "log": job_log_path(self.job)}
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        namespace = None
        log_fd = None
        try:
            log_fd = os.open(result["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            namespace = enter_rank_namespace(self.job, self.namespace_name())
            become_subreaper()
            if self.spec.get("local"):
                self.local_launcher = start_local_launcher(self.spec, self.user)
            self.open_connections()
            result.update(self.execute(log_fd))
        except Cancelled as exc:
            result["status"] = "CANCELED"
            result["message"] = "job %s canceled by %s" % (self.job, exc)
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, result["message"])).encode())
        except TimedOut:
            result["message"] = "job %s timed out: it ran longer than its policy.timeout.execute (%gs)" % (
                self.job, self.spec["timeout"])
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, result["message"])).encode())
        except RuntimeFailure as exc:
            result["message"] = str(exc)
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, exc)).encode())
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if self.local_launcher is not None:
                # No new launches while the job is torn down.
                _signal(self.local_launcher, signal.SIGKILL)
            if namespace is not None:
                # The job is over when rank 0 ends: stop what is left of it
                # here, then on every worker node.
                kill_job_processes(self.local_namespaces(namespace), self.grace, self.user)
                self.clean_workers()
            forget_secrets(self.job)
            if log_fd is not None:
                os.close(log_fd)
        result["duration"] = round(time.time() - started, 3)
        return result

    def namespace_name(self):
        """The host name of the supervisor's own namespace: rank 0's."""
        return self.head["name"]

    def local_namespaces(self, namespace):
        """The namespaces on the head to stop at the end: rank 0's (the
        supervisor's own), and every other one the job has here: in local
        mode all the ranks'."""
        return {namespace} | recorded_namespaces(self.job)

    def remote_nodes(self):
        """{node: a rank on it} of the nodes reached over ssh: the workers'."""
        nodes = {}
        for rank in self.spec["ranks"]:
            if rank["node"] != self.head["node"]:
                nodes.setdefault(rank["node"], rank)
        return nodes

    def connect_nodes(self):
        """{node: a rank on it} of the nodes to connect to before the start."""
        return self.remote_nodes()

    def execute(self, log_fd):
        """Run rank 0 and wait for the job; returns the result's fields."""
        child = self.start_rank0(log_fd)
        status, failure = self.wait(child)
        if failure:
            if failure.get("lost"):
                self.lost_nodes.add(failure["node"])
            return failure_result(failure)
        if status == 0:
            return {"rc": 0, "status": "FINISHED", "message": "job %s finished" % self.job}
        return {"rc": status, "failed_rank": rank_summary(self.head, status),
                "message": "rank 0 (%s on %s) exited with status %d" % (
                    self.head["name"], self.head["node"], status)}

    def check_stop(self, timeout_at):
        """Raise TimedOut or Cancelled when the job must stop now."""
        if timeout_at is not None and time.monotonic() > timeout_at:
            raise TimedOut()
        if self.cancelled:
            raise Cancelled(self.cancelled)
        if self.controller_gone():
            raise Cancelled("the controller: it stopped polling the job")
        reason = self.cancel_requested()
        if reason:
            raise Cancelled(reason)

    def clean_workers(self):
        """Ask every worker node to stop what is left of the job there; each
        answers with the call records made there (remote_calls)."""
        # A node that was lost is skipped: a fresh connection would only time out.
        nodes = {node: rank for node, rank in self.remote_nodes().items()
                 if node not in self.lost_nodes}
        self.remote_calls += clean_nodes(self.spec, self.user, nodes, unregister=False)

    def controller_gone(self):
        """True when the controller stopped polling the job (the play was
        interrupted or lost its connection) for longer than allowed."""
        timeout = self.spec.get("controller_timeout") or 0
        if timeout <= 0:
            return False
        try:
            return time.time() - os.stat(os.path.join(job_dir(self.job), "heartbeat")).st_mtime > timeout
        except FileNotFoundError:
            return False

    def cancel_requested(self):
        """The reason written to the job's `cancel` file by the controller
        (fuzz.multinode.launch_job when the playbook is interrupted), if any."""
        try:
            with open(os.path.join(job_dir(self.job), "cancel"), "rb") as handle:
                return handle.read().decode(errors="replace").strip() or "the controller"
        except FileNotFoundError:
            return None

    def _on_signal(self, signum, frame):
        if self.cancelled is None:
            self.cancelled = signal.Signals(signum).name

    def open_connections(self):
        """Open a multiplexed ssh connection to every worker node, in
        parallel, before the job starts; a node we cannot reach fails the job
        now, with ssh's reason. Local mode has no ssh."""
        if self.spec.get("local"):
            return
        procs = []
        for node, rank in self.connect_nodes().items():
            argv = ssh_command(node, rank["address"]) + ["-M", "-N", "-f", "-o", "ControlPersist=yes"]
            procs.append((rank, spawn_as(self.user, argv, rank_environment(self.spec, self.head, self.user),
                                         "/", subprocess.DEVNULL, subprocess.DEVNULL, subprocess.PIPE)))
        errors = []
        for rank, proc in procs:
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                errors.append("cannot connect to node %s (%s) for rank %s: no connection within 60 s" % (
                    rank["node"], rank["address"], rank["name"]))
                continue
            if proc.returncode != 0:
                errors.append("cannot connect to node %s (%s) for rank %s: %s" % (
                    rank["node"], rank["address"], rank["name"],
                    last_line(err) or "ssh exited with status %d" % proc.returncode))
        if errors:
            raise RuntimeFailure("; ".join(errors))

    def start_rank0(self, log_fd):
        bind_cpus(self.spec, self.head)
        warning = limit_memory(self.spec, self.head)
        if warning:
            write_all(log_fd, ("fuzz.multinode: warning: %s\n" % warning).encode())
        env = job_environment(self.spec, self.head, self.user)
        argv = job_command(self.spec, env, "rank 0 (%s)" % self.head["name"])
        child = spawn_as(self.user, argv, env, job_cwd(self.spec, self.head),
                         subprocess.DEVNULL, log_fd, log_fd)
        self.rank0_call = {"rank": self.head["rank"], "start": time.time()}
        return child

    def rank_report(self, ended):
        """How each rank ran (rank_outcomes): the call records of every
        node, and rank 0's own run."""
        calls = read_call_records(self.job) + self.remote_calls
        if self.rank0_call is not None:
            calls.append(self.rank0_call)
        return rank_outcomes(self.spec, calls, ended)

    def wait(self, child):
        """Wait for rank 0, then give wrapper calls still in flight up to the
        grace period to finish, so output and failures of workers dispatched
        just before the end are not lost. Returns (rank 0's exit status,
        None) or (None, the first worker failure)."""
        events = os.path.join(job_dir(self.job), "events")
        deadline = None
        timeout = self.spec.get("timeout")
        timeout_at = time.monotonic() + timeout if timeout else None
        while True:
            # After rank 0 ended the timeout no longer applies (the grace).
            self.check_stop(timeout_at if deadline is None else None)
            failure = first_failure(events)
            if failure:
                return None, failure
            for pid, status in reap_children().items():
                if pid == child.pid:
                    child.returncode = exit_status(status)
                    deadline = time.monotonic() + self.grace
                    self.rank0_call.update(end=time.time(), status=child.returncode)
            if deadline is not None and (time.monotonic() > deadline
                                         or not wrapper_calls(descendants(os.getpid()))):
                failure = first_failure(events)
                return (None, failure) if failure else (child.returncode, None)
            time.sleep(POLL_SECONDS)


class TaskArraySupervisor(Supervisor):
    """Runs a task array from the head. Its "ranks" are the tasks, each
    placed on a node; at most `concurrency` run at once, and the next task
    started is the next one of the least busy node. Every task, the ones on
    the head's own node included, is started the way a wrapper call is (an
    ssh launch: `multinode-runtime task JOB INDEX` as the job user), so it
    runs under its own host name <job>-<task id> with FB_TASK_ID set and
    writes task-<id>.log on its node. A failed task stops new tasks from
    starting; the job fails once every started task has ended."""

    PREFIX = "fuzz.multinode"

    def namespace_name(self):
        # The supervisor is not a task: its namespace is named after the job.
        return self.job

    def connect_nodes(self):
        nodes = {}
        for task in self.spec["ranks"]:
            nodes.setdefault(task["node"], task)
        return nodes

    def say(self, log_fd, text):
        write_all(log_fd, ("%s: %s\n" % (self.PREFIX, text)).encode())

    def execute(self, log_fd):
        limit = self.spec["task_array"]["concurrency"]
        timeout = self.spec.get("timeout")
        timeout_at = time.monotonic() + timeout if timeout else None
        env = rank_environment(self.spec, self.head, self.user)
        program = [sys.executable, "-I", os.path.realpath(__file__), "task", self.job]
        pending = list(self.spec["ranks"])
        busy = {task["node"]: 0 for task in pending}
        running, failed = {}, []
        while running or (pending and not failed):
            self.check_stop(timeout_at)
            while pending and not failed and len(running) < limit:
                task = min(pending, key=lambda t: (busy[t["node"]], t["rank"]))
                pending.remove(task)
                busy[task["node"]] += 1
                proc = spawn_as(self.user, program + [str(task["rank"])], env, "/",
                                subprocess.DEVNULL, log_fd, log_fd)
                # Keep the Popen: a dropped one is reaped by the subprocess
                # module behind our back, and its task's status lost.
                running[proc.pid] = (task, proc)
                self.say(log_fd, "task %s started on %s" % (task["name"], task["node"]))
            for pid, status in reap_children().items():
                task, proc = running.pop(pid, (None, None))
                if task is None:
                    continue  # an orphan we reaped as subreaper
                proc.returncode = exit_status(status)
                busy[task["node"]] -= 1
                status = exit_status(status)
                if status == 0:
                    self.say(log_fd, "task %s finished" % task["name"])
                else:
                    failed.append(rank_summary(task, status))
                    self.say(log_fd, "task %s on %s exited with status %d" % (
                        task["name"], task["node"], status))
            time.sleep(POLL_SECONDS)
        total = len(self.spec["ranks"])
        if not failed:
            return {"rc": 0, "status": "FINISHED",
                    "message": "job %s finished: %d tasks" % (self.job, total)}
        message = "task array %s: %d of %d tasks failed: %s" % (
            self.job, len(failed), total, ", ".join(
                "%s on %s (status %d)" % (f["name"], f["node"], f["status"]) for f in failed))
        if pending:
            message += "; %d not started" % len(pending)
        return {"rc": failed[0]["status"], "failed_rank": failed[0], "message": message}


def job_command(spec, env, who):
    """The argv the job's command or script runs with (on rank 0, or as a
    task), argv[0] looked up on the job's PATH; `who` names it in errors."""
    if spec["mode"] == "script":
        script = os.path.join(job_dir(spec["job"]), "script")
        argv = [script] if spec["script"].startswith("#!") else ["/bin/sh", script]
        argv += job_argv(spec)
    else:
        argv = job_argv(spec)
    # openmpi/ompi, mpich: the MPI launcher runs the command (or the
    # script, written at the same path on every node) on all ranks.
    launcher = list(spec.get("launcher") or [])
    argv = launcher + argv
    if "/" not in argv[0]:
        found = which(argv[0], env.get("PATH", DEFAULT_PATH))
        if found is None:
            hint = ""
            if launcher:
                hint = (" (multinode.implementation %s runs the job with %s: put %s's bin "
                        "directory on PATH in the job's env)" % (
                            spec["implementation"], argv[0],
                            MPI_NAMES.get(spec["implementation"], "the MPI")))
            raise RuntimeFailure("%s: command not found: %s%s" % (who, argv[0], hint))
        argv[0] = found
    return argv


def wrapper_calls(pids):
    """The processes among pids that are wrapper calls of this runtime."""
    calls = []
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[2].endswith(b"multinode-runtime.py") and argv[3] == b"wrapper":
            calls.append(pid)
    return calls


def first_failure(events):
    names = sorted(os.listdir(events))
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(events, name)) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            continue  # still being written
    return None


def failure_result(failure):
    return {"status": "FAILED", "rc": failure["status"],
            "failed_rank": {k: failure[k] for k in ("rank", "name", "node", "status")},
            "message": failure["message"]}


def rank_summary(rank, status):
    return {"rank": rank["rank"], "name": rank["name"], "node": rank["node"], "status": status}


def which(name, path):
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def last_line(data):
    lines = [line for line in (data or b"").decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


# --------------------------------------------------------------------------
# wrapper: MULTINODE_SSH_WRAPPER HOST CMD [ARGS...]
# --------------------------------------------------------------------------

def ssh_command(node, address):
    # Host keys are pinned per node under its inventory name (HostKeyAlias),
    # whatever name or address the rank is reached by. ssh is looked up on
    # the system PATH: the job's PATH may not have it.
    return [which("ssh", DEFAULT_PATH) or "ssh", "-F", SSH_CONFIG, "-o", "HostKeyAlias=" + node, "root@" + address]


def transport_command(spec, target, request):
    """The command that carries a launch request to the target rank's node:
    ssh with the cluster key, or in local mode (every rank on this node) a
    connection to the head's local launch socket. Both relay the launcher's
    framed output on stdout, and both end the launch when their stdin
    closes."""
    if spec.get("local"):
        return [sys.executable, "-I", os.path.realpath(__file__), "connect", spec["job"],
                encode_request(request)]
    return ssh_command(target["node"], target["address"]) + ["-T", encode_request(request)]


def current_job():
    """The job and rank this process belongs to, from its rank host name."""
    name = socket.gethostname()
    try:
        jobs = os.listdir(JOBS_DIR)
    except FileNotFoundError:
        jobs = []
    for job in jobs:
        if name.startswith(job + "-"):
            try:
                spec = load_spec(job)
            except (RuntimeFailure, OSError, ValueError):
                continue
            for rank in spec["ranks"]:
                if rank["name"] == name:
                    return spec, rank
    raise RuntimeFailure("not inside a fuzz.multinode job (host name %s)" % name)


def find_rank(spec, host):
    for key in ("name", "node", "address"):
        for rank in spec["ranks"]:
            if rank[key] == host:
                return rank
    raise RuntimeFailure("unknown host %r: job %s has ranks %s" % (
        host, spec["job"], ", ".join(r["name"] for r in spec["ranks"])))


# ssh's options (OpenSSH 9), so the wrapper takes ssh's whole argv syntax:
# MPICH Hydra calls `LAUNCHER -x HOST CMD...`, other launchers pass -q, -o ...
SSH_FLAGS = "46AaCfGgKkMNnqsTtVvXxYy"
SSH_OPTIONS_WITH_VALUE = "BbcDEeFIiJLlmOoPpQRSWw"


def parse_ssh_argv(args):
    """(host, command words) from ssh-style arguments `[OPTIONS] HOST CMD...`.

    Options are accepted and not applied: the connection is always the
    cluster's own (its key, pinned host keys, no X11/agent forwarding)."""
    args = list(args)
    while args and args[0].startswith("-") and args[0] != "-":
        word = args.pop(0)
        if word == "--":
            break
        for i, letter in enumerate(word[1:], 1):
            if letter in SSH_OPTIONS_WITH_VALUE:
                if i == len(word) - 1:  # value is the next word: -o Foo=bar
                    if not args:
                        raise RuntimeFailure("option -%s needs a value" % letter)
                    args.pop(0)
                break  # value attached: -oFoo=bar
            if letter not in SSH_FLAGS:
                raise RuntimeFailure("unknown ssh option -%s" % letter)
    if len(args) < 2:
        raise RuntimeFailure("usage: %s [SSH OPTIONS] HOST COMMAND [ARGS...]" % PROG)
    return args[0], args[1:]


def cmd_wrapper(args):
    spec, me = current_job()
    try:
        host, words = parse_ssh_argv(args)
        target = find_rank(spec, host)
    except RuntimeFailure as exc:
        # A call that cannot be made fails the job like a failing worker
        # command would; a launcher waiting for it (mpiexec) would hang.
        if me["rank"] == 0:
            report_failure(spec, me, 255, "a wrapper call on %s failed: %s" % (me["name"], exc))
        raise
    request = {
        "job": spec["job"],
        "rank": target["rank"],
        "command": " ".join(words),  # ssh joins the words; sh -c splits
        "forward": os.environ.get("MULTINODE_WRAPPER_FORWARD_STREAMS") == "1",
    }
    status, reason, lost = call_rank(spec, target, request)
    if status != 0 and me["rank"] == 0:
        report_failure(spec, target, status, reason, lost)
    return status


def cmd_task(args):
    """`task JOB INDEX` (job user, started by the head's task-array
    supervisor): run task INDEX of JOB on its node, like a wrapper call."""
    if len(args) != 2 or not args[1].isdigit():
        raise RuntimeFailure("usage: task JOB INDEX")
    spec = load_spec(args[0])
    tasks = [t for t in spec["ranks"] if t["rank"] == int(args[1]) and "task_id" in t]
    if not spec.get("task_array") or not tasks:
        raise RuntimeFailure("job %s has no task %s" % (args[0], args[1]))
    request = {"job": spec["job"], "rank": tasks[0]["rank"], "task": True, "forward": False}
    return call_rank(spec, tasks[0], request)[0]


def call_rank(spec, target, request):
    """Send one launch request to the target rank's node and relay its
    output; returns (exit status, reason when it is not 0, lost: the node
    did not answer). Launcher errors and lost connections are also written
    to stderr. The call is recorded for the job's summary (record_call)."""
    record = {"rank": target["rank"], "start": time.time()}
    record_call(spec["job"], record)
    ssh = subprocess.Popen(transport_command(spec, target, request),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    status, error, ssh_errors = relay(ssh)
    where = "rank %d (%s on %s)" % (target["rank"], target["name"], target["node"])
    lost = status is None
    record_call(spec["job"], dict(record, end=time.time(), status=255 if lost else status))
    if lost:
        status = 255
        reason = "lost connection to %s: %s" % (
            where, error or last_line(ssh_errors) or "ssh exited with status %d" % ssh.returncode)
    elif error:
        reason = "%s: %s" % (where, error)
    else:
        reason = "%s exited with status %d" % (where, status)
    if error or status == 255:
        write_all(2, ("%s: %s\n" % (PROG, reason)).encode())
    return status, reason, lost


def relay(ssh):
    """Copy framed worker output to our stdout/stderr as whole lines; returns
    (remote exit status or None, launcher error or None, ssh's stderr)."""
    out, err = LineWriter(1), LineWriter(2)
    frames = FrameReader()
    status = error = None
    ssh_errors = b""
    frames_fd, chatter_fd = ssh.stdout.fileno(), ssh.stderr.fileno()
    watched = [frames_fd, chatter_fd]
    while frames_fd in watched:
        for fd in select.select(watched, [], [])[0]:
            data = os.read(fd, 1 << 16)
            if not data:
                watched.remove(fd)
            elif fd == chatter_fd:
                ssh_errors = (ssh_errors + data)[-4096:]  # client chatter: never logged
            else:
                for kind, payload in frames.feed(data):
                    if kind == FRAME_STDOUT:
                        out.feed(payload)
                    elif kind == FRAME_STDERR:
                        err.feed(payload)
                    elif kind == FRAME_EXIT:
                        status = int(payload)
                    elif kind == FRAME_ERROR:
                        error = payload.decode(errors="replace")
    out.flush()
    err.flush()
    ssh.stdin.close()
    ssh.wait()
    # ssh's last words, unless a persisted master process holds the pipe.
    while chatter_fd in watched and select.select([chatter_fd], [], [], 0)[0]:
        data = os.read(chatter_fd, 1 << 16)
        if not data:
            break
        ssh_errors = (ssh_errors + data)[-4096:]
    return status, error, ssh_errors


def report_failure(spec, target, status, reason, lost=False):
    """Tell the head's supervisor that a worker failed: it stops the job."""
    record = rank_summary(target, status)
    record["message"] = reason
    record["lost"] = lost  # the node did not answer: do not wait for it again
    events = os.path.join(job_dir(spec["job"]), "events")
    name = os.path.join(events, "%.6f-%d" % (time.time(), os.getpid()))
    try:
        write_file(name + ".tmp", json.dumps(record), 0o600)
        os.rename(name + ".tmp", name + ".json")
    except OSError:
        pass  # the job is already being torn down


# --------------------------------------------------------------------------
# Call records: when each rank ran and how it ended, for the job's summary
# --------------------------------------------------------------------------
#
# The process that makes a wrapper call (or starts a task of a task array)
# records it on its node, in the job's `calls` directory: one file per call,
# written when the call starts ({rank, start}) and rewritten when it returns
# ({rank, start, end, status}). A call killed when the job was torn down
# keeps its start record only. The head's supervisor reads its own node's
# records, gets the workers' (calls made there, e.g. by Open MPI's tree
# spawn) with their cleanup, adds rank 0's own run, and sums them up per
# rank (rank_outcomes) in the job's result.

def record_call(job, record):
    """Write, or rewrite, the record of this process's call. Best effort: a
    missing record only makes the job's summary say less."""
    path = os.path.join(job_dir(job), "calls", "%.6f-%d.json" % (record["start"], os.getpid()))
    try:
        write_file(path + ".tmp", json.dumps(record), 0o600)
        os.rename(path + ".tmp", path)
    except OSError:
        pass


def read_call_records(job):
    """Every call record of the job on this node."""
    directory = os.path.join(job_dir(job), "calls")
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    records = []
    for name in names:
        if name.endswith(".json"):
            try:
                with open(os.path.join(directory, name)) as handle:
                    records.append(json.load(handle))
            except (OSError, ValueError):
                continue  # being rewritten
    return records


def rank_outcomes(spec, calls, ended):
    """One entry per rank (or task) of the job, in spec order, from the call
    records: `state` is "exited" with `status` (the first non-zero status of
    its calls by end time, else 0), "killed" (a call was still running when
    the job was torn down; `status` null) or "not started" (no call reached
    it); `start`, `end` (the job's end, `ended`, when a call was killed) and
    `duration` in seconds; `calls`; `log`, where its output went on its node
    (rank 0 of a job that is no task array: the job log, "job.log")."""
    outcomes = []
    for rank in spec["ranks"]:
        mine = [c for c in calls if c.get("rank") == rank["rank"]]
        head = rank["rank"] == 0 and not spec.get("task_array")
        entry = {"rank": rank["rank"], "name": rank["name"], "node": rank["node"],
                 "log": "job.log" if head else os.path.basename(rank_log_path(spec["job"], rank)),
                 "state": "not started", "status": None, "start": None, "end": None,
                 "duration": None, "calls": len(mine)}
        if "task_id" in rank:
            entry["task_id"] = rank["task_id"]
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


# --------------------------------------------------------------------------
# launch: the sshd forced command on the target node
# --------------------------------------------------------------------------

def cmd_launch(args):
    return serve_launch(os.environ.get("SSH_ORIGINAL_COMMAND", ""))


def serve_launch(original):
    """Carry out one launch request (the ssh command, or the first line on
    the local launch socket); stdin is the lifeline, stdout the frames."""
    out = 1
    try:
        request = parse_launch_request(original)
        spec = load_spec(request["job"])
        if request.get("cleanup"):
            kill_job_processes(recorded_namespaces(spec["job"]), spec.get("kill_grace", 10),
                               job_user(spec))
            forget_secrets(spec["job"])
            # The wrapper calls made on this node, for the job's summary.
            records = read_call_records(spec["job"])
            if request.get("unregister"):
                # Nothing is left to kill: the rest of the registration.
                cleanup_job(spec["job"], spec.get("kill_grace", 10), job_user(spec))
            send_frame(out, FRAME_STDOUT, json.dumps(records).encode())
            send_frame(out, FRAME_EXIT, b"0")
            return 0
        ranks = [r for r in spec["ranks"] if r["rank"] == request["rank"]]
        node = this_node(spec["job"])
        if not ranks or ranks[0]["node"] != node:
            raise RuntimeFailure("rank %r of job %s does not run on node %s" % (
                request["rank"], spec["job"], node))
        status = Launch(spec, ranks[0], request).run()
    except RuntimeFailure as exc:
        send_frame(out, FRAME_ERROR, str(exc).encode())
        status = 255
    send_frame(out, FRAME_EXIT, str(status).encode())
    return 0


# --------------------------------------------------------------------------
# local mode: the head's launch socket stands in for sshd
# --------------------------------------------------------------------------
#
# In local mode every rank runs on this node, and no sshd is needed: the
# head supervisor (root) listens on `launch.sock` in the job's directory,
# which only the job user may connect to, and serves each connection like
# sshd's forced command would (`serve_launch`, in a child of its own). The
# wrapper side (`connect`) behaves like `ssh -T HOST REQUEST`.

LOCAL_SOCKET = "launch.sock"
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def start_local_launcher(spec, user):
    """Listen on the job's launch socket and serve it in a forked process;
    returns that process's pid."""
    path = os.path.join(job_dir(spec["job"]), LOCAL_SOCKET)
    if os.path.lexists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, 0o600)
    server.listen(64)
    pid = os.fork()
    if pid:
        server.close()
        return pid
    status = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        server.settimeout(0.5)
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                conn = None
            if conn is not None:
                if os.fork() == 0:
                    server.close()
                    os._exit(serve_local_connection(conn, user))
                conn.close()
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
    finally:
        os._exit(status)


def serve_local_connection(conn, user):
    """One connection to the launch socket: check the peer, read the request
    line, then serve it with the connection as stdin and stdout."""
    conn.settimeout(None)
    _, uid, _ = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid not in (0, user.pw_uid):
        return 1
    line = b""
    while not line.endswith(b"\n") and len(line) < 1 << 20:
        byte = conn.recv(1)  # byte by byte: what follows is the lifeline
        if not byte:
            return 1
        line += byte
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    conn.close()
    return serve_launch(line.decode(errors="replace").strip())


def cmd_connect(args):
    """`connect JOB REQUEST` (job user, local mode): ssh's part of a wrapper
    call: send REQUEST to the job's launch socket, then copy our stdin to it
    and its replies to our stdout until the launcher closes it."""
    if len(args) != 2:
        raise RuntimeFailure("usage: connect JOB REQUEST")
    path = os.path.join(job_dir(args[0]), LOCAL_SOCKET)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        raise RuntimeFailure("cannot reach the local launcher of job %s at %s: %s"
                             % (args[0], path, exc.strerror)) from None
    conn.sendall(args[1].encode() + b"\n")
    watched = [0, conn.fileno()]
    while conn.fileno() in watched:
        for fd in select.select(watched, [], [])[0]:
            if fd == 0:
                data = os.read(0, 1 << 16)
                if data:
                    conn.sendall(data)
                else:
                    conn.shutdown(socket.SHUT_WR)  # the lifeline ends
                    watched.remove(0)
            else:
                data = conn.recv(1 << 16)
                if not data:
                    watched.remove(fd)
                else:
                    write_all(1, data)
    return 0


def parse_launch_request(original):
    """A request is base64 JSON: {job, rank, command, forward} to run a
    command for a rank, {job, rank, task: true, forward} to run task-array
    task `rank` (its command comes from the job spec on the node), or
    {job, cleanup: true} to stop every process of the job on the target
    node."""
    words = original.split()
    if len(words) != 2 or words[0] != "launch":
        raise RuntimeFailure("this key only launches fuzz.multinode job commands")
    try:
        request = json.loads(base64.b64decode(words[1], validate=True))
        if not isinstance(request["job"], str):
            raise ValueError
        if request.get("cleanup") is not True and not (
                isinstance(request["rank"], int) and (
                    request.get("task") is True or isinstance(request["command"], str))):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise RuntimeFailure("malformed launch request") from None
    return request


def encode_request(request):
    return "launch " + base64.b64encode(json.dumps(request).encode()).decode()


class Launch:
    """One wrapper call on its target node: the command runs in the rank's
    host name as the job user; its output goes to the rank log and, when
    forwarding is on, back to the wrapper; ssh's stdin is the lifeline."""

    def __init__(self, spec, rank, request):
        self.spec, self.rank, self.request = spec, rank, request
        self.user = job_user(spec)

    def run(self):
        job = self.spec["job"]
        namespace = enter_rank_namespace(job, self.rank["name"])
        try:
            return self.run_in(namespace)
        finally:
            # Nothing of the call is left in its namespace (processes that
            # called setsid would be, for cleanup): unpin it now, so a job
            # making many wrapper calls holds no mount per call until cleanup.
            if not pids_in_namespaces({namespace}, {os.getpid()}, self.user):
                release_namespace(job, namespace)

    def run_in(self, namespace):
        job = self.spec["job"]
        become_subreaper()
        bind_cpus(self.spec, self.rank)
        log_fd = os.open(rank_log_path(job, self.rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        warning = limit_memory(self.spec, self.rank)
        if warning:
            write_all(log_fd, ("fuzz.multinode: warning: %s\n" % warning).encode())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        env = job_environment(self.spec, self.rank, self.user)
        cwd = job_cwd(self.spec, self.rank)
        if self.request.get("task"):
            if "task_id" not in self.rank:
                raise RuntimeFailure("%s is not a task of job %s" % (self.rank["name"], job))
            argv = job_command(dict(self.spec, argv=self.rank["argv"]), env,
                               "task %s" % self.rank["name"])
        else:
            argv = ["/bin/sh", "-c", "--", self.request["command"]]
        try:
            child = spawn_as(self.user, argv, env, cwd, subprocess.DEVNULL, out_w, err_w)
        finally:
            os.close(out_w)
            os.close(err_w)
        forward = self.request.get("forward")
        logs = {out_r: (LineWriter(log_fd), FRAME_STDOUT), err_r: (LineWriter(log_fd), FRAME_STDERR)}
        open_fds = [out_r, err_r, 0]
        child_status = None
        while out_r in open_fds or err_r in open_fds:
            ready, _, _ = select.select(open_fds, [], [], 0.5)
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if fd == 0:
                    if not data:  # ssh session gone: stop everything we started
                        kill_job_processes({namespace}, self.spec.get("kill_grace", 10), self.user)
                        return 255
                    continue
                if not data:
                    open_fds.remove(fd)
                    logs[fd][0].flush()
                    continue
                logs[fd][0].feed(data)
                if forward:
                    send_frame(1, logs[fd][1], data)
            for pid, status in reap_children().items():
                if pid == child.pid:
                    child_status = exit_status(status)
        while child_status is None:
            if 0 in select.select([0], [], [], POLL_SECONDS)[0] and not os.read(0, 1 << 16):
                kill_job_processes({namespace}, self.spec.get("kill_grace", 10), self.user)
                return 255
            for pid, status in reap_children().items():
                if pid == child.pid:
                    child_status = exit_status(status)
        child.returncode = child_status
        os.close(log_fd)
        return child_status


# --------------------------------------------------------------------------

COMMANDS = {
    "prepare": cmd_prepare,
    "head": cmd_head,
    "launch": cmd_launch,
    "wrapper": cmd_wrapper,
    "task": cmd_task,
    "connect": cmd_connect,
    "secrets": cmd_secrets,
    "cleanup": cmd_cleanup,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        sys.stderr.write("usage: %s {%s} ...\n" % (argv[0], ",".join(COMMANDS)))
        return 2
    try:
        return COMMANDS[argv[1]](argv[2:]) or 0
    except RuntimeFailure as exc:
        sys.stderr.write("%s: %s\n" % (PROG if argv[1] == "wrapper" else "multinode-runtime", exc))
        return 255 if argv[1] == "wrapper" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
