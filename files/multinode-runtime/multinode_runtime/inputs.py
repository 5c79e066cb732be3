"""A job's inputs on a node: the job user, the environment and argv a rank
starts with, secrets, files and cwd.

Secrets: the spec keeps `secret://NAME` references (secret_env: {key: NAME};
arguments that expand them, secret_args, as parts: text and NAMEs, built
into the argument here, job_argv); the values arrive separately
(with the registration, `prepare --secrets`, or `secrets JOB`, from a no_log task)
and are kept in the job's directory on /run, readable by root only. Only the
processes that start a rank's command (head supervisor, launcher: root) read
them, and only into that command's environment and arguments. The image.secret's registry
credentials are not kept: prepare uses them for the image's pull only
(image_registry.py).

Files: written by prepare as the job user (never root: the paths are on a
real host), parents created as the job user where missing. A new file is
mode 0644, owned by the job user, and removed again at cleanup with the
directories prepare created for it (when empty). An existing regular file
of the job user is overwritten and kept; any other existing path (another
user's file, a symbolic link, a directory) is never written and fails the
job before it starts.

cwd: never created (the vendor's image would provide it); a cwd the job
user cannot enter fails the job before it starts, naming node and rank.
"""

import json
import os
import pwd
import socket
import stat
import sys

from . import devices, registry
from .errors import RuntimeFailure
from .image_registry import forget_credentials
from .processes import run_as, which

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FILE_MODE = 0o644
MPI_NAMES = {"openmpi": "Open MPI", "ompi": "Open MPI", "mpich": "MPICH"}


def job_user(spec):
    try:
        return pwd.getpwnam(spec.user)
    except KeyError:
        raise RuntimeFailure("job user %r does not exist on %s"
                             % (spec.user, socket.gethostname())) from None


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
    if spec.local:
        # Every rank is on this machine, at a loopback address: Open MPI's
        # TCP transport must use the loopback interface, or with several
        # interfaces it can wait forever for a peer that answers from
        # another one. The job's own env still wins.
        env["OMPI_MCA_btl_tcp_if_include"] = "127.0.0.0/8"
    env.update(rank.env)
    if spec.run:
        env["FB_WORKFLOW_ID"] = spec.run  # the run's, in every job, rank and task of it
    return env


# -- secrets ----------------------------------------------------------------

def job_secrets(spec):
    """{name: value} of the job's secrets on this node. Messages name the
    secret, never its value."""
    names = spec.secret_names()
    if not names:
        return {}
    try:
        with open(registry.job_path(spec.job, registry.SECRETS_FILE)) as handle:
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


def secret_values(spec, given):
    """The values of the job's env secret references among `given` ({name:
    value}); values the job's env does not reference are dropped (the
    image.secret's are used for the pull only: image_registry.py)."""
    if not isinstance(given, dict):
        raise RuntimeFailure("secrets: stdin must be a JSON mapping of secret names to values")
    wanted = spec.secret_names()
    missing = sorted(wanted - set(given))
    if missing:
        raise RuntimeFailure("secrets: no value given for %s" % ", ".join(
            "secret://" + name for name in missing))
    return {name: given[name] for name in wanted}


def store_secrets(spec, given):
    """Keep the values of the job's env secret references (root only);
    returns how many (secret_values)."""
    values = secret_values(spec, given)
    registry.write_file(registry.job_path(spec.job, registry.SECRETS_FILE), json.dumps(values), 0o600)
    return len(values)


def forget_secrets(job):
    """Remove the job's secret values from this node. They are needed only
    to start the job's commands, so they go when the job is torn down, also
    when no play comes to clean up after it (an interrupted playbook); its
    registry credentials, used for the pull only, are gone long before
    (they are removed here too, should a pull have been cut short)."""
    forget_credentials(job)
    try:
        os.unlink(registry.job_path(job, registry.SECRETS_FILE))
    except FileNotFoundError:
        pass


def job_environment(spec, rank, user):
    """What a rank's command starts with: rank_environment with the job's
    secret:// env values resolved, and what it gets of its devices here
    (devices.rank_environment: their CDI env, CUDA_VISIBLE_DEVICES), which
    wins."""
    env = rank_environment(spec, rank, user)
    if spec.secret_env:
        values = job_secrets(spec)
        for key, name in spec.secret_env.items():
            if key in rank.env:
                env[key] = values[name]
    env.update(devices.rank_environment(spec, rank))
    return env


def job_argv(spec):
    """The spec's argv, each argument of secret_args built from its parts
    with the secrets' values (the spec holds references only)."""
    argv = list(spec.argv)
    if spec.secret_args:
        values = job_secrets(spec)
        for item in spec.secret_args:
            if not 0 <= item.index < len(argv):
                raise RuntimeFailure("malformed job spec (secret_args: argument %d of %d)" % (item.index, len(argv)))
            argv[item.index] = "".join(values[value] if kind == "secret" else value for kind, value in item.parts)
    return argv


def program_shown(spec, rank, argv):
    """argv[0] (of job_command) for a message: the reference form when the
    job's own first argument expands a secret, never its value."""
    own, secret_args = (rank.argv, rank.secret_args) if rank.is_task else (spec.argv, spec.secret_args)
    if spec.mode == "command" and not spec.launcher and own and any(
            item.index == 0 for item in secret_args or []):
        return own[0]
    return argv[0]


# -- what a rank runs, and where ---------------------------------------------

def job_command(spec, env, who, in_image=False):
    """The argv the job's command or script runs with (on rank 0, or as a
    task), argv[0] looked up on the job's PATH (in the job's image the
    image's shell looks it up); `who` names it in errors."""
    prefix = []
    if spec.mode == "script":
        script = registry.job_path(spec.job, registry.SCRIPT_FILE)
        prefix = [script] if spec.script.startswith("#!") else ["/bin/sh", script]
    argv = prefix + job_argv(spec)
    shown = (list(spec.launcher) + prefix + list(spec.argv))[0]  # a secret's reference, never its value
    # openmpi/ompi, mpich: the MPI launcher runs the command (or the
    # script, written at the same path on every node) on all ranks.
    launcher = list(spec.launcher)
    argv = launcher + argv
    if "/" not in argv[0] and not in_image:
        found = which(argv[0], env.get("PATH", DEFAULT_PATH))
        if found is None:
            hint = ""
            if launcher:
                hint = (" (multinode.implementation %s runs the job with %s: put %s's bin "
                        "directory on PATH in the job's env)" % (
                            spec.implementation, argv[0],
                            MPI_NAMES.get(spec.implementation, "the MPI")))
            raise RuntimeFailure("%s: command not found: %s%s" % (who, shown, hint))
        argv[0] = found
    return argv


# -- files and cwd, checked and placed at prepare ------------------------------

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
    for entry in spec.files:
        where = "jobs.%s.files.%s" % (spec.job, entry.path)
        try:
            place_file(emit, entry.path, entry.contents.encode("utf-8"))
        except RuntimeFailure as exc:
            emit({"error": "%s: %s" % (where, exc)})
        except OSError as exc:
            emit({"error": "%s: cannot write it: %s" % (where, exc.strerror)})
    try:
        os.chdir(spec.cwd)
    except FileNotFoundError:
        emit({"error": "jobs.%s.cwd: %s: no such directory" % (spec.job, spec.cwd)})
    except NotADirectoryError:
        emit({"error": "jobs.%s.cwd: %s: not a directory" % (spec.job, spec.cwd)})
    except OSError as exc:
        emit({"error": "jobs.%s.cwd: %s: cannot enter it: %s" % (spec.job, spec.cwd, exc.strerror)})


def prepare_inputs(spec, node, user, sandbox=None):
    """As the job user: write the job's files (recording what was created,
    for cleanup) and check that it can enter the job's cwd, inside the
    run's sandbox (in a container, what is written there goes with it).
    Every problem found fails the job before it starts, in one message."""
    if not spec.files and spec.cwd == "/":
        return
    enter = sandbox.enter_here if sandbox is not None else None
    records, failed = run_as(user, _prepare_as_user, spec, enter=enter)
    created = [r for r in records if "created" in r]
    if created and (sandbox is None or sandbox.image is None):
        registry.write_file(registry.job_path(spec.job, registry.CREATED_FILE), json.dumps(created), 0o600)
    errors = [r["error"] for r in records if "error" in r] + ([failed] if failed else [])
    if errors:
        where = "node %s" % node
        for rank in spec.ranks:
            if rank.node == node:
                where += " (rank %d, %s)" % (rank.rank, rank.name)
        if sandbox is not None and sandbox.image:
            where += " in image %s" % sandbox.image
        raise RuntimeFailure("job %s cannot start on %s as user %s: %s" % (
            spec.job, where, user.pw_name, "; ".join(errors)))


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
    path = registry.job_path(job, registry.CREATED_FILE)
    try:
        with open(path) as handle:
            created = json.load(handle)
    except (OSError, ValueError):
        return
    if user is not None:
        _unused, failed = run_as(user, _remove_created, created)
        if failed:  # the rest of the cleanup still has to happen
            sys.stderr.write("multinode-runtime: removing the job's files: %s\n" % failed)
        os.unlink(path)
