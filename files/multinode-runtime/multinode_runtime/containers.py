"""The job's container on a node, where the job runs in its image: one
long-lived Podman container per job and node (podman-hpc's "shared run"),
made from the job's image at registration and removed at cleanup; it is
the run's sandbox there (sandbox.py), which every rank command and wrapper
call of the job on the node is entered into (execution.py). This module
pulls images (an oras:// SIF through oras.py) and starts containers.

The container shares the host's network; it has its own PID namespace and
/proc (the job's processes are entered into it), its own IPC namespace,
and sees of the host only the job's directory (its script, the agent's
FIFOs), /etc/hosts with the rank names and /multinode. Its PID 1 is root's
(catatonit, which reaps the job's orphans, running `/bin/sh` reading a
stdin that Podman keeps open), so root can enter it where root may not open
a job-user process's namespaces.
"""

import os
import subprocess
import time

from . import devices, image_registry, registry
from .errors import RuntimeFailure

PODMAN = "/usr/bin/podman"
NSENTER = "/usr/bin/nsenter"
# Host paths every job container sees read-only: the helper and the
# wrapper. (start_container also mounts the job's directory and the host's
# /etc/hosts, which are per job or need other options.)
SHARED_PATHS = ("/multinode",)
PULL_WITHIN = 1800  # seconds a pull may take
PODMAN_WITHIN = 120  # seconds for any other podman command
NAMESPACE_WITHIN = 5  # seconds a new container's PID 1 may take to exec its program
CONTAINER_PID_FILE = "container.pid"  # in the job's directory, while the container starts
# Root's: where SIF files are unpacked while they become Podman images.
SIF_WORK_DIR = "/var/lib/fuzz-multinode/sif"


def container_name(job):
    return "fuzz-multinode-" + job


def missing_tools():
    """The programs this node lacks to run a job in its image."""
    return [path for path in (PODMAN, NSENTER) if not os.access(path, os.X_OK)]


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
    status, _unused, why = podman(["pull", "--quiet"] + auth + ["docker://" + name], within=PULL_WITHIN)
    if status != 0:
        raise RuntimeFailure("node %s cannot pull image %s: %s" % (node, uri, _pull_failure(status, why, authfile)))
    if authfile is not None:
        _remember_credentialed(node, uri, name)
    return name


def _namespace(pid, kind, within=NAMESPACE_WITHIN):
    """The inode of the `kind` namespace of the container's PID 1. `podman
    run --detach` may answer before the OCI runtime's init process has
    exec'd PID 1's program: until then the process is not dumpable, and
    root without CAP_SYS_PTRACE (a node inside a container) may not look at
    its namespaces (EACCES), for a moment."""
    deadline = time.monotonic() + within
    while True:
        try:
            return os.stat("/proc/%d/ns/%s" % (pid, kind)).st_ino
        except PermissionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _cached_as_it_is(spec):
    """The name of the job's docker:// image when a copy of it here, if
    there is one, is the job's to use without asking the registry (as pull
    would find): the job gives no credentials, and no image here came with
    a job's; else None."""
    uri = spec.image.get("uri", "")
    if uri.startswith("docker://") and not spec.image.get("secret") and not image_registry.any_credentialed():
        return local_image(uri)
    return None


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
    status, out, _unused = podman(["image", "inspect", "--format", "{{.Id}}", name])
    image_id = out.decode(errors="replace").strip()
    return image_id if status == 0 and image_id else None


def _pull_failure(status, why, authfile):
    """Why `podman pull` failed: the reason it gives (image_registry.pull_reason)
    with its message, or what went wrong around it."""
    if status == 124 or not why:  # podman() timed it out, or it said nothing
        return why or "podman pull exited with status %d" % status
    detail = why[len("Error: "):] if why.startswith("Error: ") else why
    return image_registry.pull_failure_text(image_registry.pull_reason(detail, authfile is not None), "podman", detail)


def start_container(spec, node, hostname, secrets=None, mounts=()):
    """Pull the job's image (with the credentials its image.secret names,
    from `secrets`, the values its registration brought) and start its
    container here, with the job's volumes (`mounts`, [(directory,
    location)]) at their locations; returns the pid of its PID 1 and the
    inodes of its mount and PID namespaces."""
    uri = spec.image.get("uri", "")
    name = container_name(spec.job)
    directory = registry.job_dir(spec.job)
    # Podman writes its PID 1 here as it starts it: no `podman inspect`
    # after the run (a Podman start, 50 to 150 ms of CPU on every node).
    pid_file = registry.job_path(spec.job, CONTAINER_PID_FILE)
    args = ["run", "--detach", "--interactive", "--replace", "--name", name, "--pidfile", pid_file,
            "--network", "host", "--hostname", hostname,
            "--user", "0:0", "--init", "--entrypoint", "/bin/sh",
            "--label", "fuzz.multinode.job=" + spec.job, "--label", "fuzz.multinode.run=" + spec.run,
            "--volume", "%s:%s:bind" % (directory, directory),
            "--volume", "/etc/hosts:/etc/hosts:ro"]
    for path in SHARED_PATHS:
        if os.path.isdir(path):
            args += ["--volume", "%s:%s:ro" % (path, path)]
    for directory, location in mounts:
        args += ["--volume", "%s:%s:rw" % (directory, location)]
    args += devices.podman_arguments(spec.job)  # the job's devices here (CDI)
    status = None
    cached = _cached_as_it_is(spec)
    if cached is not None:  # no `podman image inspect` first: a Podman start less
        status, _unused, why = podman(args + ["--pull=never", cached, "-c", "read -r _"])
    if status != 0:  # not cached after all (or not to be taken unasked), or it did not start
        with image_registry.pull_credentials(spec, node, secrets) as authfile:
            image = pull(uri, node, authfile)
        status, _unused, why = podman(args + [image, "-c", "read -r _"])
    if status != 0:
        hint = ""
        if "CDI" in why:
            hint = " (Podman reads the CDI specifications in %s itself; Podman 4.3 takes cdiVersion " \
                   "0.5.0 and older)" % " and ".join(devices.CDI_DIRS)
        raise RuntimeFailure("node %s cannot start the container of job %s (image %s): %s%s" % (
            node, spec.job, uri, why or "podman run exited with status %d" % status, hint))
    try:
        with open(pid_file, encoding="ascii") as handle:
            pid = int(handle.read().strip() or 0)
        os.unlink(pid_file)
        return {"pid": pid, "mnt": _namespace(pid, "mnt"), "pidns": _namespace(pid, "pid")}
    except (OSError, ValueError) as exc:  # no pid written, or its process gone
        raise RuntimeFailure("node %s: the container of job %s (image %s) did not stay up: %s" % (
            node, spec.job, uri, exc.strerror if isinstance(exc, OSError) else "no process")) from None
