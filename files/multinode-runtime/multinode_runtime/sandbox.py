"""A run's sandbox on a node: the namespaces every process of the run there
is entered into (execution.py), made at registration (prepare) and removed
at cleanup. Where the job runs in its image it is the job's Podman
container (containers.py); on the bare host, namespaces of the runtime's
own over the host's file system (host_sandbox.py). Either way its PID 1 is
root's, the run has a PID namespace and a /proc of its own (it sees, and
can signal, trace or read the environment of, only its own processes),
and of the runtime's state only its own job directory.

The record (RECORD_FILE in the job's directory, root's) names a container
before it is made, so cleanup removes one that a crash left half made, and
holds the pid of the sandbox's PID 1 and the inodes of its mount and PID
namespaces once it runs: a pid whose mount namespace is another is no
longer the sandbox, and nothing is entered into it.
"""

import ctypes
import json
import os
import signal
import socket

from . import containers, devices, host_sandbox, registry, volumes
from .cgroups import run_cgroups
from .errors import RuntimeFailure
from .inputs import job_user
from .processes import run_as

NSENTER = "/usr/bin/nsenter"
RECORD_FILE = "sandbox.json"
CLONE_NEWNS = 0x00020000

_libc = ctypes.CDLL(None, use_errno=True)

# The cwd is entered by the job user inside the sandbox: never a path root
# follows. Whether it could, and whether the command is there to run, is
# reported on its stdin (a pipe of the launcher's, which nsenter holds open
# too; the command's own stdin is /dev/null): the launcher then says why
# not (execution.py).
ENTER_SCRIPT = (
    'cd -- "$1" 2>/dev/null || { echo cwd >&0; exit 1; }; shift; '
    'case $1 in */*) if [ ! -e "$1" ]; then r=missing; elif [ -f "$1" ] && [ -x "$1" ]; then r=; else r=denied; fi ;; '
    '*) if command -v -- "$1" >/dev/null; then r=; else r=missing; fi ;; esac; '
    '[ -z "$r" ] || { echo "exec $r" >&0; exit 127; }; echo ok >&0; exec </dev/null; exec "$@"'
)


def record_path(job):
    return registry.job_path(job, RECORD_FILE)


class Sandbox:
    """A run's sandbox on this node, as its record says: a container of
    the job's image (`image` its URI), or the bare host's (`image` None)."""

    def __init__(self, job, record):
        self.job = job
        self.image = record.get("image") if record.get("kind") == "container" else None
        self.pid = record.get("pid")
        self.mount_ns = record.get("mnt")
        self.pid_ns = record.get("pidns")

    def alive(self):
        """Whether the recorded pid is still the sandbox's PID 1."""
        try:
            return self.pid is not None and os.stat("/proc/%d/ns/mnt" % self.pid).st_ino == self.mount_ns
        except OSError:
            return False

    def check_alive(self, node):
        if not self.alive():
            what = "container of job %s on node %s (image %s)" % (self.job, node, self.image) if self.image \
                else "sandbox of job %s on node %s" % (self.job, node)
            raise RuntimeFailure("the %s is not running any more" % what)

    def enter_argv(self, user, cwd, argv):
        """argv run as the job user inside the sandbox, in `cwd` there
        (entered as the job user, after the privileges are gone; a cwd it
        cannot enter is reported on the stdin it is given)."""
        root = ["--root", "--wd"] if self.image else []
        return [NSENTER, "--target", str(self.pid), "--mount", "--ipc", "--pid"] + root + [
            "--setuid", str(user.pw_uid), "--setgid", str(user.pw_gid), "--",
            "/bin/sh", "-c", ENTER_SCRIPT, "fuzz-multinode", cwd] + list(argv)

    def enter_here(self):
        """Move this (single-threaded, root) process into the sandbox's
        file system: its mount namespace, and (a container's) its root."""
        root = os.open("/proc/%d/root" % self.pid, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        mount_ns = os.open("/proc/%d/ns/mnt" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _libc.setns(mount_ns, CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "setns: " + os.strerror(ctypes.get_errno()))
            if self.image:
                os.fchdir(root)
                os.chroot(".")
            os.chdir("/")
        finally:
            os.close(root)
            os.close(mount_ns)

    def host_pid(self, pid, user=None):
        """The host pid of the sandbox's process `pid` (as the process
        itself knows it: a wrapper client's `$$`), or None (gone, or not
        the sandbox's). The run's processes here are in its cgroups: those
        are looked at first, then every other process. Root without
        CAP_SYS_PTRACE may not see the PID namespace of the job user's
        processes: the run's cgroup then vouches for them, or `user` (the
        job user) looks."""
        in_run = run_cgroups(self.job).pids()
        unseen = []
        for candidates, vouched in ((sorted(in_run), True), ([p for p in _all_pids() if p not in in_run], False)):
            for host in candidates:
                levels = _ns_pids(host)
                if len(levels) < 2 or levels[-1] != pid:
                    continue
                try:
                    if os.stat("/proc/%d/ns/pid" % host).st_ino == self.pid_ns:
                        return host
                except PermissionError:
                    if vouched:
                        return host
                    unseen.append(host)
                except OSError:
                    continue
        if unseen and user is not None:
            def look(emit):
                for host in unseen:
                    try:
                        if os.stat("/proc/%d/ns/pid" % host).st_ino == self.pid_ns:
                            emit({"pid": host})
                    except OSError:
                        continue
            records, _unused = run_as(user, look)
            return next((record["pid"] for record in records if "pid" in record), None)
        return None

    def has_pid(self, pid):
        """Whether the sandbox's process `pid` (its own pid) lives."""
        return os.path.exists("/proc/%d/root/proc/%d" % (self.pid, pid))


def _all_pids():
    return sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())


def _ns_pids(pid):
    """A process's pid in our PID namespace and each one nested in it that
    it is in (NSpid), outermost first; [] when it is gone."""
    try:
        with open("/proc/%d/status" % pid, "rb") as handle:
            for line in handle:
                if line.startswith(b"NSpid:"):
                    return [int(word) for word in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def _read_record(job):
    """The job's sandbox record here: None when it has none (it was never
    registered here, or its registration ended before the sandbox)."""
    try:
        with open(record_path(job)) as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RuntimeFailure("the sandbox record of job %s is unreadable: %s" % (job, exc)) from None
    if not isinstance(record, dict):
        raise RuntimeFailure("the sandbox record of job %s is unreadable: not a mapping" % job)
    return record


def job_sandbox(job):
    """The run's sandbox here, or None (none made, or not made yet)."""
    record = _read_record(job)
    return Sandbox(job, record) if record and record.get("pid") else None


def place_job(spec, node, secrets=None):
    """At registration: make the run's sandbox here, the job's container
    (its image pulled, with the registry credentials of its image.secret
    among `secrets`) or the bare host's: asked so (fuzz_multinode_execution:
    host), or local mode on a machine without Podman, which the record says
    for the job log (host_reason); with the job's volumes (volumes.py) at
    their mount locations. None on a node with no rank of the job."""
    ranks = [rank for rank in spec.ranks if rank.node == node]
    if not ranks:
        return None
    mounts = volumes.prepare(spec, job_user(spec))
    reason = None
    if spec.execution == "container":
        missing = containers.missing_tools()
        if not missing:
            return _start_container(spec, node, ranks[0].name, secrets, mounts)
        if not spec.local:
            raise RuntimeFailure(
                "node %s has no %s to run job %s in its image; the node role installs Podman when "
                "fuzz_multinode_execution is container, or set fuzz_multinode_execution: host to run "
                "on the bare host" % (node, " or ".join(missing), spec.job))
        reason = "this machine has no Podman (%s), so image %s is not used" % (
            " or ".join(missing), spec.image.get("uri", ""))
    try:
        record = dict(host_sandbox.start(spec.job, mounts, spec.volume_root, devices.hidden_paths(spec.job)),
                      kind="host")
    except OSError as exc:
        raise RuntimeFailure("node %s cannot make the sandbox of job %s: %s" % (node, spec.job, exc)) from None
    if reason:
        record["reason"] = reason
    registry.write_file(record_path(spec.job), json.dumps(record), 0o600)
    return Sandbox(spec.job, record)


def _start_container(spec, node, hostname, secrets, mounts):
    uri = spec.image.get("uri", "")
    record = {"kind": "container", "name": containers.container_name(spec.job), "image": uri}
    registry.write_file(record_path(spec.job), json.dumps(record), 0o600)
    record.update(containers.start_container(spec, node, hostname, secrets, mounts))
    registry.write_file(record_path(spec.job), json.dumps(record), 0o600)
    return Sandbox(spec.job, record)


def remove_sandbox(job):
    """Remove the run's sandbox here (cleanup): its container, or its PID 1
    on the bare host (the kernel then kills whatever is left in it)."""
    try:
        record = _read_record(job)
    except RuntimeFailure:  # unreadable: the container it would name, if any
        record = {"kind": "container", "name": containers.container_name(job)}
    if record is None:
        return
    if record.get("kind") == "container":
        status, _unused, why = containers.podman(["rm", "--force", "--time", "0", "--ignore", record["name"]])
        if status != 0:
            raise RuntimeFailure("cannot remove the container %s of job %s on %s: %s" % (
                record["name"], job, socket.gethostname(), why))
        return
    sandbox = Sandbox(job, record)
    if sandbox.alive():
        os.kill(sandbox.pid, signal.SIGKILL)


def ran_in(spec):
    """Where the job's ranks ran, for its summary."""
    sandbox = job_sandbox(spec.job)
    if sandbox is not None and sandbox.image:
        return "in image %s" % sandbox.image
    return "on the bare host"


def host_reason(job):
    """Why a job that asked for its image runs on the bare host here, or
    None (for the job log)."""
    try:
        record = _read_record(job)
    except RuntimeFailure:
        return None
    return record.get("reason") if record else None
