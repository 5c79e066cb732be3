"""Processes and namespaces: how teardown finds and kills a job's processes.

Every process of a rank runs in a UTS namespace whose host name is the
rank's name (<job>-<rank>). The namespaces are recorded per job, so cleanup
finds every process of the job, including ones that called setsid, by
namespace; while a runtime process lives it is also a subreaper, so the
processes below it are found by ancestry. Both are the second net: first
of all the processes are in the run's cgroup (cgroups.py).
"""

import ctypes
import fcntl
import json
import os
import signal
import socket
import subprocess
import time

from . import registry
from .errors import RuntimeFailure
from .wire import read_all, write_all

CLONE_NEWUTS = 0x04000000
MS_BIND = 0x1000
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
NS_GET_PARENT = 0xB702  # ioctl: the parent of a PID namespace (linux/nsfs.h)
MAX_PID_NAMESPACE_DEPTH = 33  # the kernel nests at most 32
# Seconds teardown goes on killing, round after round, what it still finds.
KILL_ROUNDS_WITHIN = 10

_libc = ctypes.CDLL(None, use_errno=True)


def _namespace_record(job, ns):
    return os.path.join(registry.job_path(job, registry.NAMESPACES_DIR), str(ns))


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
    record = _namespace_record(job, ns)
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
    record = _namespace_record(job, ns)
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
        return {int(n) for n in os.listdir(registry.job_path(job, registry.NAMESPACES_DIR))}
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
        found += _pids_in_namespaces_as(user, namespaces, unreadable)
    return found


def process_in_namespaces(pid, namespaces, user):
    """Whether process `pid` is in one of `namespaces` (UTS, in our PID
    namespace); checked as the job user where root may not look."""
    try:
        return os.stat("/proc/%d/ns/uts" % pid).st_ino in namespaces and _same_pid_namespace(pid)
    except PermissionError:
        return pid in _pids_in_namespaces_as(user, namespaces, [pid])
    except OSError:
        return False


def _same_pid_namespace(pid):
    """Whether a process is in our PID namespace or one nested in it (a job
    process can make one: `unshare -Urpf`). Together with the UTS namespace
    this keeps a host-side runtime (local mode), which sees the processes
    of every container on the machine, from taking one of theirs for its
    own: a container's UTS namespace is never one of the job's."""
    own = os.stat("/proc/self/ns/pid").st_ino
    if os.stat("/proc/%s/ns/pid" % pid).st_ino == own:
        return True
    try:
        fd = os.open("/proc/%s/ns/pid" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        for _unused in range(MAX_PID_NAMESPACE_DEPTH):
            try:
                parent = fcntl.ioctl(fd, NS_GET_PARENT)
            except OSError:
                return False  # the top, or a parent outside our own: not below us
            os.close(fd)
            fd = parent
            if os.fstat(fd).st_ino == own:
                return True
        return False
    finally:
        os.close(fd)


def _pids_in_namespaces_as(user, namespaces, pids):
    def scan(emit):
        for pid in pids:
            try:
                if os.stat("/proc/%d/ns/uts" % pid).st_ino in namespaces and _same_pid_namespace(pid):
                    emit({"pid": pid})
            except OSError:
                continue
    records, _unused = run_as(user, scan)
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


def descendants(ancestor, *more):
    """Every process below `ancestor` (or any of `more`) in the process
    tree. While a runtime process lives it is a subreaper, so this includes
    processes that daemonized (setsid, double fork) and ones whose namespace
    we may not read (non-dumpable processes such as ssh, without
    CAP_SYS_PTRACE)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ppid = parent(int(entry))
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [ancestor, *more]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid):
    """A process's argv (None if it is gone)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return None


def job_processes(namespaces, user, cgroups=None, spare=frozenset()):
    """The processes of ours: in the namespaces, below us, or in `cgroups`
    (cgroups.RunCgroups: its pids(); None: no cgroup); none of `spare`."""
    me = os.getpid()
    found = set(pids_in_namespaces(namespaces, {me}, user)) | set(descendants(me))
    if cgroups:
        found |= cgroups.pids() - {me}
    return found - set(spare)


def kill_job_processes(namespaces, grace, user, cgroups=None, spare=frozenset()):
    """SIGTERM every process of ours (job_processes), wait up to `grace`
    seconds, then kill what is left: the run's cgroups frozen and killed
    until empty (cgroups.RunCgroups.kill), then rounds of SIGSTOP and
    SIGKILL of whatever the namespaces and ancestry still show
    (kill_in_rounds). Processes of `spare` (never in the cgroups) are left
    for the caller. Returns how many processes were signalled."""
    victims = job_processes(namespaces, user, cgroups, spare)
    # Parents before their children, a level of the process trees at a
    # time, a moment apart: signalled all at once, a child could die and let
    # its shell go on past its `wait` before the shell's own SIGTERM lands,
    # so the shell's trap would never run (a rank's script, the shell it
    # starts with a trap, that shell's sleep: three levels).
    for number, level in enumerate(tree_levels(victims, parent)):
        if number:
            time.sleep(POLL_SECONDS)
        for pid in level:
            send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while job_processes(namespaces, user, cgroups, spare) and time.monotonic() < deadline:
        reap_children()
        time.sleep(POLL_SECONDS)
    if cgroups:
        victims |= cgroups.kill()
    victims |= kill_in_rounds(lambda: job_processes(namespaces, user, cgroups, spare))
    reap_children()
    return len(victims)


def kill_in_rounds(find, within=KILL_ROUNDS_WITHIN):
    """Kill what find() returns until it returns nothing (or `within`
    seconds passed); returns the pids killed. A process that forks and
    exits (a new pid every few ms) outruns one scan and one SIGKILL: each
    round stops what it finds, scans again for what those forked
    meanwhile, stops those too, and kills them all once a scan finds
    nothing new (a stopped process forks no more)."""
    killed = set()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = find()
        if not found:
            break
        stopped = set()
        while found - stopped and time.monotonic() < deadline:
            for pid in found - stopped:
                send_signal(pid, signal.SIGSTOP)
            stopped |= found
            found = find()
        for pid in stopped:
            send_signal(pid, signal.SIGKILL)
        killed |= stopped
        end = min(deadline, time.monotonic() + 1)
        while find() and time.monotonic() < end:
            reap_children()
            time.sleep(POLL_SECONDS / 5)
    reap_children()
    return killed


def tree_levels(pids, parent_of):
    """`pids` by depth in their process trees (parent_of(pid): its parent
    pid): first the tops (whose parent is not one of them), then their
    children, and so on."""
    depth = {}
    for pid in pids:
        chain = []
        while pid in pids and pid not in depth and len(chain) <= len(pids):
            chain.append(pid)
            pid = parent_of(pid)
        above = depth.get(pid, -1)
        for member in reversed(chain):
            above += 1
            depth[member] = above
    levels = {}
    for pid, level in depth.items():
        levels.setdefault(level, []).append(pid)
    return [sorted(levels[level]) for level in sorted(levels)]


def parent(pid):
    """A process's parent pid (None if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def process_state(pid):
    """A process's state letter (R, S, D; Z: ended, not reaped yet; X:
    being reaped), None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def has_ended(pid):
    """Whether a process has ended and waits to be reaped, or is being
    reaped; False once it is gone."""
    return process_state(pid) in ("Z", "X")


def send_signal(pid, sig):
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
    """Start argv as the job user (None: as this process's user) in its
    own session (process group)."""
    kwargs = {}
    if user is not None and os.getuid() == 0 and user.pw_uid != 0:
        kwargs = dict(user=user.pw_uid, group=user.pw_gid,
                      extra_groups=os.getgrouplist(user.pw_name, user.pw_gid))
    try:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin,
                                stdout=stdout, stderr=stderr,
                                start_new_session=True, close_fds=True,
                                **kwargs)
    except OSError as exc:
        raise RuntimeFailure("cannot run %r: %s" % (argv[0], exc.strerror)) from None


def run_as(user, work, *args, enter=None):
    """Run work(emit, *args) in a child process with the job user's uid,
    gid and groups, so it touches the node with the job user's rights only;
    with `enter`, called first as root (into the job's container:
    containers.Container.enter_here). emit(record) sends a JSON record
    back. Returns (the records, None), or (the records sent, why) when work
    did not finish."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1

        def emit(record):
            write_all(writer, (json.dumps(record) + "\n").encode())

        try:
            os.close(reader)
            if enter is not None:
                enter()
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
    data = read_all(reader)
    os.close(reader)
    os.waitpid(child, 0)
    records = [json.loads(line) for line in data.decode().splitlines() if line]
    if records and records[-1] == {"done": True}:
        return records[:-1], None
    failed = "working as user %s on %s failed" % (user.pw_name, socket.gethostname())
    if records and "failed" in records[-1]:
        failed += ": " + records.pop()["failed"]
    return records, failed


def which(name, path):
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def last_line(data):
    lines = [line for line in (data or b"").decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
