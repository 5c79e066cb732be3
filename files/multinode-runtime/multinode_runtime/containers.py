"""The job's container on a node: one long-lived Podman container per job
and node, made from the job's image at registration (prepare) and removed
at cleanup; every rank command and wrapper call of the job on the node is
entered into it (execution.py).

The container lends the job its image's file system (and its own IPC
namespace): it shares the host's network, and the job's processes are
entered into its mount namespace only, so they keep their host pids (the
host's /proc is mounted over the container's: the agent, the process scans
and cgroups of processes.py and cgroups.py see them as on the bare host),
and each call keeps the UTS namespace of its own the launcher made, named
after its rank. Its PID 1 is root's (`/bin/sh` reading a stdin that Podman
keeps open), so root can enter it where root may not open a job-user
process's namespaces.

The record (CONTAINER_FILE in the job's directory, root's) names the
container before it is made, so cleanup removes one that a crash left half
made, and holds the pid and mount namespace of its PID 1 once it runs: a
pid whose mount namespace is another is no longer the container.
"""

import ctypes
import json
import os
import socket
import subprocess

from . import image_registry, registry
from .errors import RuntimeFailure

PODMAN = "/usr/bin/podman"
NSENTER = "/usr/bin/nsenter"
CONTAINER_FILE = "container.json"
# Host paths every job container sees read-only: the helper and the
# wrapper. (start_container also mounts the job's directory and the host's
# /etc/hosts, which are per job or need other options.)
SHARED_PATHS = ("/multinode",)
PULL_WITHIN = 1800  # seconds a pull may take
PODMAN_WITHIN = 120  # seconds for any other podman command
CLONE_NEWNS = 0x00020000
# Root's: where SIF files are unpacked while they become Podman images.
SIF_WORK_DIR = "/var/lib/fuzz-multinode/sif"

_libc = ctypes.CDLL(None, use_errno=True)


def container_name(job):
    return "fuzz-multinode-" + job


def record_path(job):
    return registry.job_path(job, CONTAINER_FILE)


class Container:
    """A job's running container on this node, as its record says."""

    def __init__(self, job, record):
        self.job = job
        self.name = record["name"]
        self.image = record.get("image", "")
        self.pid = record.get("pid")
        self.mount_ns = record.get("mnt")

    def alive(self):
        """Whether the recorded pid is still the container's PID 1."""
        try:
            return self.pid is not None and os.stat("/proc/%d/ns/mnt" % self.pid).st_ino == self.mount_ns
        except OSError:
            return False

    def check_alive(self, node):
        if not self.alive():
            raise RuntimeFailure("the container of job %s on node %s (image %s) is not running "
                                 "any more" % (self.job, node, self.image))

    def enter_argv(self, user, cwd, argv):
        """argv run as the job user inside the container, in `cwd` there
        (entered as the job user, after the privileges are gone)."""
        return [NSENTER, "--target", str(self.pid), "--mount", "--ipc", "--root", "--wd",
                "--setuid", str(user.pw_uid), "--setgid", str(user.pw_gid), "--",
                "/bin/sh", "-c", ENTER_SCRIPT, "fuzz-multinode", cwd] + list(argv)

    def enter_here(self):
        """Move this (single-threaded, root) process into the container's
        file system: its mount namespace, and its root as ours."""
        root = os.open("/proc/%d/root" % self.pid, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        mount_ns = os.open("/proc/%d/ns/mnt" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _libc.setns(mount_ns, CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "setns: " + os.strerror(ctypes.get_errno()))
            os.fchdir(root)
            os.chroot(".")
            os.chdir("/")
        finally:
            os.close(root)
            os.close(mount_ns)


# The cwd is entered by the job user inside the image: never a path root
# follows. A missing one says so in the job's terms.
ENTER_SCRIPT = (
    'cd -- "$1" 2>/dev/null || { printf "%s\\n" "fuzz.multinode: cwd $1: no such directory in '
    'the job\'s image, or the job user may not enter it" >&2; exit 1; }; shift; exec "$@"'
)


def _read_record(job):
    """The job's container record here: None when it has none (it runs on
    the bare host, or was never registered here)."""
    try:
        with open(record_path(job)) as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RuntimeFailure("the container record of job %s is unreadable: %s" % (job, exc)) from None
    if not isinstance(record, dict):
        raise RuntimeFailure("the container record of job %s is unreadable: not a mapping" % job)
    return record


def job_container(job):
    """The job's container here, or None (the job runs on the bare host)."""
    record = _read_record(job)
    return Container(job, record) if record and record.get("pid") else None


def podman(args, within=PODMAN_WITHIN):
    """Run podman; (exit status, its output, the last line of its stderr)."""
    try:
        done = subprocess.run([PODMAN] + args, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=within, check=False)
    except subprocess.TimeoutExpired:
        return 124, b"", "podman %s did not finish within %d s" % (args[0], within)
    lines = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    return done.returncode, done.stdout, (lines[-1].strip() if lines else "")


def local_image(uri):
    """The name Podman knows the docker:// image of `uri` by."""
    if uri.startswith("docker://"):
        return uri[len("docker://"):]
    raise RuntimeFailure("image %s: only docker:// and oras:// images exist in Fuzzball" % uri)


def pull(uri, node, authfile=None):
    """Make the image of `uri` present here (an oras:// SIF is imported as
    a Podman image: oras.py), with the registry credentials in `authfile`
    (image_registry.pull_credentials) when the job gives some. Fails
    naming the node, the image and the reason.

    A cached image is used as it is (no registry request) unless the job
    gives credentials, or the image came with another job's: then the
    registry is asked every time (the manifest; layers already here are not
    fetched again), so that no run gets a private image that another run
    pulled with credentials unless its own pass."""
    if uri.startswith("oras://"):
        from .oras import image_name, parse_reference, podman_image
        os.makedirs(SIF_WORK_DIR, 0o700, exist_ok=True)
        digest = parse_reference(uri).digest
        ask = authfile is not None or (digest is not None and _credentialed(image_name(digest)))
        try:
            name = podman_image(uri, SIF_WORK_DIR, authfile, ask_registry=ask)
        except RuntimeFailure as exc:  # "image URI: why"
            raise RuntimeFailure("node %s cannot pull %s" % (node, exc)) from None
        if authfile is not None:
            _remember_credentialed(node, uri, name)
        return name
    name = local_image(uri)
    if authfile is None:
        cached = _image_id(name)
        if cached is not None and not image_registry.pulled_with_credentials(cached):
            return name
    auth = ["--authfile", authfile] if authfile else []
    status, _, why = podman(["pull", "--quiet"] + auth + ["docker://" + name], within=PULL_WITHIN)
    if status != 0:
        raise RuntimeFailure("node %s cannot pull image %s: %s" % (node, uri, _pull_failure(status, why, authfile)))
    if authfile is not None:
        _remember_credentialed(node, uri, name)
    return name


def _remember_credentialed(node, uri, name):
    image_id = _image_id(name)
    if image_id is None:
        raise RuntimeFailure("node %s pulled image %s, but Podman has no image %s" % (node, uri, name))
    image_registry.remember_credentialed(image_id)


def _credentialed(name):
    """Whether the local image `name` came with a job's credentials."""
    image_id = _image_id(name)
    return image_id is not None and image_registry.pulled_with_credentials(image_id)


def _image_id(name):
    """The ID of the local image `name`, or None: there is none."""
    status, out, _ = podman(["image", "inspect", "--format", "{{.Id}}", name])
    image_id = out.decode(errors="replace").strip()
    return image_id if status == 0 and image_id else None


def _pull_failure(status, why, authfile):
    """Why `podman pull` failed: the reason it gives (image_registry.pull_reason)
    with its message, or what went wrong around it."""
    if status == 124 or not why:  # podman() timed it out, or it said nothing
        return why or "podman pull exited with status %d" % status
    detail = why[len("Error: "):] if why.startswith("Error: ") else why
    return "%s (podman: %s)" % (image_registry.pull_reason(detail, authfile is not None), detail)


def start_container(spec, node, hostname, secrets=None):
    """Pull the job's image (with the credentials its image.secret names,
    from `secrets`, the values its registration brought) and start its
    container here; the record names the container first, so cleanup finds
    even a half-made one."""
    uri = spec.image.get("uri", "")
    name = container_name(spec.job)
    registry.write_file(record_path(spec.job), json.dumps({"name": name, "image": uri}), 0o600)
    with image_registry.pull_credentials(spec, node, secrets) as authfile:
        image = pull(uri, node, authfile)
    directory = registry.job_dir(spec.job)
    args = ["run", "--detach", "--interactive", "--replace", "--name", name,
            "--network", "host", "--hostname", hostname,
            "--user", "0:0", "--entrypoint", "/bin/sh",
            "--label", "fuzz.multinode.job=" + spec.job, "--label", "fuzz.multinode.run=" + spec.run,
            "--volume", "%s:%s:bind" % (directory, directory),
            "--volume", "/proc:/proc", "--volume", "/etc/hosts:/etc/hosts:ro"]
    for path in SHARED_PATHS:
        if os.path.isdir(path):
            args += ["--volume", "%s:%s:ro" % (path, path)]
    args += [image, "-c", "read -r _"]
    status, _, why = podman(args)
    if status != 0:
        raise RuntimeFailure("node %s cannot start the container of job %s (image %s): %s" % (
            node, spec.job, uri, why or "podman run exited with status %d" % status))
    status, out, why = podman(["inspect", "--format", "{{.State.Pid}}", name])
    pid = int(out.strip() or 0) if status == 0 and out.strip().isdigit() else 0
    if pid <= 0:
        raise RuntimeFailure("node %s: the container of job %s (image %s) did not stay up: %s" % (
            node, spec.job, uri, why or "no process"))
    record = {"name": name, "image": uri, "pid": pid, "mnt": os.stat("/proc/%d/ns/mnt" % pid).st_ino}
    registry.write_file(record_path(spec.job), json.dumps(record), 0o600)
    return Container(spec.job, record)


def remove_container(job):
    """Remove the job's container here, if it has one (cleanup)."""
    try:
        record = _read_record(job)
    except RuntimeFailure:
        record = {"name": container_name(job)}  # unreadable: the name it would hold
    if record is None or "name" not in record:
        return  # none, or the bare host
    name = record["name"]
    status, _, why = podman(["rm", "--force", "--time", "0", "--ignore", name])
    if status != 0:
        raise RuntimeFailure("cannot remove the container %s of job %s on %s: %s" % (
            name, job, socket.gethostname(), why))


def place_job(spec, node, secrets=None):
    """At registration: the job's container here (pulled, with the
    registry credentials of its image.secret among `secrets`, and started), or
    None when the job runs on the bare host: asked so
    (fuzz_multinode_execution: host), or local mode on a machine without
    Podman, which the record says for the job log (host_reason)."""
    if spec.execution != "container":
        return None
    ranks = [rank for rank in spec.ranks if rank.node == node]
    if not ranks:
        return None
    missing = [path for path in (PODMAN, NSENTER) if not os.access(path, os.X_OK)]
    if missing and spec.local:
        reason = "this machine has no Podman (%s), so image %s is not used" % (
            " or ".join(missing), spec.image.get("uri", ""))
        registry.write_file(record_path(spec.job), json.dumps({"host": reason}), 0o600)
        return None
    if missing:
        raise RuntimeFailure(
            "node %s has no %s to run job %s in its image; the node role installs Podman when "
            "fuzz_multinode_execution is container, or set fuzz_multinode_execution: host to run "
            "on the bare host" % (node, " or ".join(missing), spec.job))
    return start_container(spec, node, ranks[0].name, secrets)


def ran_in(spec):
    """Where the job's ranks run, for its summary."""
    if job_container(spec.job) is not None:
        return "in image %s" % spec.image.get("uri", "")
    return "on the bare host"


def host_reason(job):
    """Why a job that asked for its image runs on the bare host here, or
    None (for the job log)."""
    try:
        record = _read_record(job)
    except RuntimeFailure:
        return None
    return record.get("host") if record else None
