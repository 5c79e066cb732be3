"""A job's volumes on a node: the directories under the volume root
(spec.volume_root) that its mounts show at their locations in the run's
sandbox (a bind mount in the job's container, or in the bare host's
sandbox), never at those paths on the host itself.

An ephemeral volume is one run's: ROOT/ephemeral/<run>/<volume>, made by
the first job of the run that mounts it, removed when the run ends
(remove_run). A persistent one, ROOT/persistent/<name>, lives across runs,
as do the job user's default one (store user/persistent,
ROOT/user/persistent) and the account's (account/persistent,
ROOT/account/persistent): every run of the cluster's job user sees both.
Root makes every directory down to the volume's own, which is the job
user's: the job can change only what is inside it, and root never walks
into it except to remove a run's volumes, without following links
(registry.remove_tree).
"""

import os
import re
import subprocess

from . import registry
from .errors import RuntimeFailure

EPHEMERAL = "ephemeral"
PERSISTENT = "persistent"
# The default persistent volumes (volume://user/persistent,
# volume://account/persistent): each store is its directory under the root.
DEFAULT_STORES = ("user/persistent", "account/persistent")
_RUN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_NAME_RE = _RUN_RE
# File systems that every node of a cluster mounts alike (stat -f's names):
# a volume root on one of them is shared (volume_sharing "auto").
SHARED_FILE_SYSTEMS = ("nfs", "nfs4", "lustre", "gpfs", "ceph", "cifs", "smb2", "smb", "afs",
                       "fuse.glusterfs", "glusterfs", "beegfs", "panfs", "wekafs", "orangefs", "v9fs")


def volume_dir(spec, mount):
    """The directory of `mount` (a spec.Mount) on this node."""
    if mount.store == EPHEMERAL and not _RUN_RE.match(spec.run or ""):
        raise RuntimeFailure("job %s mounts the ephemeral volume %s but its spec names no run"
                             % (spec.job, mount.volume))
    return store_dir(spec.volume_root, spec.run, mount.volume, mount.store,
                     "volume %s (mounted at %s)" % (mount.volume, mount.location))


def store_dir(root, run, volume, store, what=None):
    """The directory of volume `volume` of run `run` whose store is `store`
    (ephemeral, persistent/NAME, user/persistent, account/persistent) under
    the volume root `root`; `what` names the volume in errors."""
    what = what or "volume %s" % volume
    if store in DEFAULT_STORES:
        return os.path.join(root, store)
    kind, _unused, name = store.partition("/")
    if kind == EPHEMERAL and not name:
        if not _RUN_RE.match(run or ""):
            raise RuntimeFailure("%s: %r is not a run id" % (what, run))
        return os.path.join(root, EPHEMERAL, run, _checked(volume, what))
    if kind == PERSISTENT:
        return os.path.join(root, PERSISTENT, _checked(name, what))
    raise RuntimeFailure("malformed job spec (mounts: volume %s has store %r)" % (volume, store))


def _checked(name, what):
    if not _NAME_RE.match(name):
        raise RuntimeFailure("%s: %r cannot name a directory" % (what, name))
    return name


def prepare(spec, user):
    """Make the job's volumes here (those missing) and return [(directory,
    location)] in the order they are mounted."""
    placed = []
    for mount in spec.mounts:
        if (mount.location + "/").startswith(spec.volume_root.rstrip("/") + "/"):
            raise RuntimeFailure("volume %s: its mount location %s is inside the volume root %s, which "
                                 "a run does not see" % (mount.volume, mount.location, spec.volume_root))
        directory = volume_dir(spec, mount)
        make_volume_dir(directory, user, mount.volume)
        placed.append((directory, mount.location))
    return placed


def make_volume_dir(directory, user, volume):
    """Make a volume's directory (when missing): root's directories down to
    it, it the job user's (0700). RuntimeFailure when what is there is not
    a directory of the job user's."""
    _make_root_dirs(os.path.dirname(directory))
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    _finish_making(directory, user)
    check_volume_dir(directory, user, volume)


def _finish_making(directory, user):
    """Give the job user a volume directory that is being made: empty,
    root's, 0700, as mkdir left it here or, on shared storage, on another
    node an instant ago (the nodes of a job make its volumes at once); only
    root writes in its parent. Anything else is left as it is."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # not a directory: check_volume_dir says so
    try:
        info = os.fstat(fd)
        if info.st_uid == 0 and info.st_mode & 0o777 == 0o700 and not os.listdir(fd):
            os.fchown(fd, user.pw_uid, user.pw_gid)
    finally:
        os.close(fd)


def check_volume_dir(directory, user, volume):
    """RuntimeFailure unless `directory` is a directory of the job user's
    (not a link to one)."""
    info = os.lstat(directory)
    if not os.path.isdir(directory) or os.path.islink(directory) or info.st_uid != user.pw_uid:
        raise RuntimeFailure("volume %s: %s is not a directory of the job user %s" % (
            volume, directory, user.pw_name))


def _make_root_dirs(path):
    """`path` and its parents as root's directories (0755)."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            pass


def remove_run(root, run):
    """Remove the ephemeral volumes of `run` here; whether there were any."""
    if not _RUN_RE.match(run):
        raise RuntimeFailure("remove-volumes: %r is not a run id" % run)
    path = os.path.join(root, EPHEMERAL, run)
    existed = os.path.isdir(path)
    registry.remove_tree(path)
    return existed


def is_shared(root, sharing):
    """Whether the volume root is storage the nodes share: as `sharing`
    says, or ("auto") by the type of the file system it is on."""
    if sharing != "auto":
        return sharing == "shared"
    path = root
    while not os.path.exists(path):
        path = os.path.dirname(path)
    done = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True, check=False)
    return done.returncode == 0 and done.stdout.strip() in SHARED_FILE_SYSTEMS


def sharing_note(spec):
    """What the job log says of a multinode job's volumes on storage the
    nodes do not share, or None."""
    if not spec.mounts or len({rank.node for rank in spec.ranks}) < 2:
        return None
    if is_shared(spec.volume_root, spec.volume_sharing):
        return None
    return ("the volumes of job %s (%s) are under %s, which is each node's own storage: its ranks on "
            "different nodes see different files (fuzz_multinode_volume_root on shared storage, "
            "or fuzz_multinode_volume_sharing: shared if it is)" % (
                spec.job, ", ".join(sorted({m.volume for m in spec.mounts})), spec.volume_root))
