"""A run's sandbox on the bare host (fuzz_multinode_execution: host): the
PID, mount and IPC namespaces a job's processes are entered into, as a
job's container gives them where it runs in its image (containers.py), with
the host's own file system.

Its PID 1 is a process of the runtime's (root), made at registration, that
reaps the orphans of the job's processes and lives until the run's cleanup
kills it, and with it every process left in the namespace. In its mount
namespace /proc is the namespace's own (a run sees only its own processes,
so it can neither signal, trace nor read the environment of another run's),
the job's volumes are at their mount locations (volumes.py) and the volume
root is empty (the job user owns every run's volumes), and of the
runtime's state only the run's own job directory and ssh
control directory are there: the rest of the state and the logs are under
empty file systems, and the cluster key reads as an empty read-only file,
as do the device nodes of the node's CDI devices that are not the job's
(devices.py): a rank opens only its own job's devices.
"""

import ctypes
import os
import signal

from . import registry

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
READY = b"ready\n"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, "%s: %s" % (what, os.strerror(errno)))


def _mount(source, target, fstype, flags, data=None):
    _check(_libc.mount(os.fsencode(source) if source else None, os.fsencode(target),
                       os.fsencode(fstype) if fstype else None, ctypes.c_ulong(flags),
                       os.fsencode(data) if data else None), "mount %s" % target)


def hidden_paths():
    """(path, how) of what a run does not see of the node besides the other
    runs' state: 'dir' is put under an empty file system, 'file' reads as
    an empty, read-only file."""
    return [(registry.LOG_DIR, "dir"), (registry.CLUSTER_KEY, "file")]


def start(job, mounts=(), volume_root=None, hidden_devices=()):
    """Make the run's sandbox here, with the job's volumes (`mounts`,
    [(directory, location)]) at their locations and the rest of the volume
    root (other runs' volumes) under an empty file system, and the device
    nodes of the node's devices that are not the job's (`hidden_devices`,
    devices.hidden_paths) reading as empty read-only files; returns its
    record: the host pid of its PID 1, and the inodes of its mount and PID
    namespaces. Raises OSError naming the step that failed."""
    ready_r, ready_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # leaves the caller's session, makes the namespaces, forks their PID 1
        status = 1
        try:
            os.close(ready_r)
            os.setsid()
            _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
            holder = os.fork()
            if holder == 0:
                _holder(job, mounts, volume_root, hidden_devices, ready_w)  # never returns
            os.write(ready_w, b"%d\n" % holder)
            status = 0
        except OSError as exc:
            os.write(ready_w, b"error %s\n" % str(exc).encode())
        finally:
            os._exit(status)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        answer = ready.read()  # until the middle process and PID 1 both closed it
    os.waitpid(middle, 0)
    lines = answer.decode(errors="replace").splitlines()
    errors = [line[len("error "):] for line in lines if line.startswith("error ")]
    pids = [line for line in lines if line.isdigit()]
    if errors or not pids or READY.decode().strip() not in lines:
        raise OSError(errors[0] if errors else "the sandbox did not start")
    pid = int(pids[0])
    return {"pid": pid, "mnt": os.stat("/proc/%d/ns/mnt" % pid).st_ino,
            "pidns": os.stat("/proc/%d/ns/pid" % pid).st_ino}


def _holder(job, mounts, volume_root, hidden_devices, ready_w):
    """PID 1 of the run's namespaces: set up its mounts, say so, then reap."""
    try:
        for fd in range(3):
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
        os.closerange(3, ready_w)
        os.closerange(ready_w + 1, 1 << 16)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below goes back to the host
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        empty = _show_only_own_state(job)
        for path, how in hidden_paths():
            if how == "dir" and os.path.isdir(path):
                _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k")
            elif how == "file" and os.path.isfile(path):
                _hide_file(empty, path)
        for path in hidden_devices:
            if os.path.exists(path) and not os.path.isdir(path):
                _hide_file(empty, path)
        for directory, location in mounts:
            _mount_volume(directory, location)
        if volume_root and os.path.isdir(volume_root):  # after the binds, which it would hide
            _mount("tmpfs", volume_root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k")
        os.write(ready_w, READY)
        os.close(ready_w)
    except OSError as exc:
        os.write(ready_w, b"error %s\n" % str(exc).encode())
        os._exit(1)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        signal.sigwait({signal.SIGCHLD})
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def _hide_file(empty, path):
    """`path` (a file, a device node) reads as the empty file `empty`, and
    cannot be written, in the sandbox."""
    _mount(empty, path, None, MS_BIND)
    _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def _mount_volume(directory, location):
    """A volume's directory at its location, in the sandbox only. A
    location the host lacks is made there first, an empty directory of
    root's that stays: removing it later could pull it from under another
    run's sandbox that mounts a volume at the same place."""
    try:
        os.makedirs(location, 0o755, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, "volume at %s: %s" % (location, exc.strerror)) from None
    if not os.path.isdir(location) or os.path.islink(location):
        raise OSError("volume at %s: the host has something other than a directory there" % location)
    _mount(directory, location, None, MS_BIND | MS_REC)
    _mount(None, location, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)


def _show_only_own_state(job):
    """Of the runtime's state (STATE_DIR), only the run's own job directory
    and ssh control directory, at their places: an empty file system over
    it, with those two bound back. Returns the path of an empty root-only
    file there, which hides a file (hidden_paths)."""
    own = [path for path in (registry.job_dir(job), registry.control_dir(job)) if os.path.isdir(path)]
    fds = [os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC) for path in own]
    try:
        _mount("tmpfs", registry.STATE_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k")
        for path, fd in zip(own, fds):
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            os.mkdir(path, 0o700)
            _mount("/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC)
    finally:
        for fd in fds:
            os.close(fd)
    empty = os.path.join(registry.STATE_DIR, "empty")
    os.close(os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))
    return empty
