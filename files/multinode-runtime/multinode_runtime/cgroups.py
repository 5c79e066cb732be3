"""Cgroups: every process of a run on this node is in a cgroup of the run,
which teardown freezes and kills until it is empty (docs/docsite/rst/guide_security.rst,
"No survivors"); a rank with resource.memory.size is also in a memory
cgroup of its own, limited to its request.

Where the groups are. cgroup v2: under /sys/fs/cgroup/fuzz-multinode, one
group per run (<job>) with a leaf per rank, which carries the memory
limit; teardown writes the run group's cgroup.kill. cgroup v1: the run's
group is in the freezer hierarchy, a rank's memory limit in the memory
hierarchy, each below this process's own cgroup there (so they nest
inside a container's), in the hierarchy where it is mounted writable,
else in a private mount of it (possible with CAP_SYS_ADMIN, as in a
container). Every group made is listed in the job's directory
(CGROUPS_FILE), the list teardown kills and removes.

A process moves itself in (`join`): a wrapper call's launch, before it
starts the command; the head's supervisor, which must not be killed with
the run, only for the moment it starts rank 0 (`spawning_in`: a forked
child stays where it was forked).
"""

import contextlib
import os
import signal
import subprocess
import threading
import time

from . import registry
from .processes import POLL_SECONDS, last_line, reap_children, send_signal

CGROUP_ROOT = "/sys/fs/cgroup"
# Beside the state directory, not in it: nothing that walks job state
# should walk into a cgroup file system.
PRIVATE_MOUNT = "/run/fuzz-multinode-cgroup-%s"  # % the v1 controller
GROUP = "fuzz-multinode"
# Seconds teardown goes on freezing and killing a run's cgroup.
KILL_WITHIN = 10


def own_cgroup(proc_self_cgroup, controller):
    """This process's cgroup path for a v1 controller, from /proc/self/cgroup."""
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2].strip() or "/"
    return "/"


def _own_v2_cgroup(proc_self_cgroup):
    for line in proc_self_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return "/"


def _read_self_cgroup():
    with open("/proc/self/cgroup") as handle:
        return handle.read()


def is_v2():
    return os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers"))


def _can_create_in(directory):
    probe = os.path.join(directory, "fuzz-multinode-probe-%d" % os.getpid())
    try:
        os.mkdir(probe)
        os.rmdir(probe)
        return True
    except OSError:
        return False


def v1_own_group(controller):
    """(this process's own cgroup directory in a writable mount of the v1
    `controller` hierarchy, None), or (None, why there is none)."""
    hierarchy = os.path.join(CGROUP_ROOT, controller)
    if not (os.path.isdir(hierarchy) and _can_create_in(hierarchy)):
        hierarchy = PRIVATE_MOUNT % controller
        if not os.path.ismount(hierarchy):
            os.makedirs(hierarchy, 0o700, exist_ok=True)
            mount = subprocess.run(["mount", "-t", "cgroup", "-o", controller, GROUP, hierarchy],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
            if mount.returncode != 0:
                return None, "no writable cgroup %s controller (%s)" % (controller, (
                    last_line(mount.stderr) or "mount exited with status %d" % mount.returncode))
    own = own_cgroup(_read_self_cgroup(), controller)
    return os.path.join(hierarchy, own.lstrip("/")), None


def _enable_v2_controllers(directory, top):
    """Best effort: +memory in the subtree_control of every group from `top`
    down to `directory`, so that directory's children have memory.max."""
    path = top
    for part in [""] + os.path.relpath(directory, top).split(os.sep):
        path = os.path.join(path, part) if part else path
        try:
            with open(os.path.join(path, "cgroup.subtree_control"), "w") as handle:
                handle.write("+memory")
        except OSError:
            return


def _make_group(job, path):
    """Create a cgroup directory (and its parents) and list it in the job's
    directory, for teardown: also one a run before left (its teardown could
    not remove it), which this run's teardown must empty too."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        if path in run_cgroups(job).groups:
            return  # every wrapper call of a rank joins the same groups
    with open(registry.job_path(job, registry.CGROUPS_FILE), "a") as handle:
        handle.write(path + "\n")


# cgroup v1: the run's group this process joined as a whole (join_run_group),
# which the calls it forks are born in; None: not joined.
_joined_run_group = None
_group_before = None  # the group it was in before (leave_run_group)


def join_run_group(spec):
    """cgroup v1: move this process (a worker's hold, which forks the
    channel's calls) into the run's group, so that every call it forks is
    born in it: a move into a cgroup waits for an RCU grace period, some
    ms, which each call would pay otherwise. On v2 the run's group has a
    leaf per rank, and each call moves itself. Best effort: a call that
    finds no joined group joins as before, and says why it cannot."""
    global _joined_run_group, _group_before
    if is_v2():
        return
    own, _unused = v1_own_group("freezer")
    if own is None:
        return
    group = os.path.join(own, GROUP, spec.job)
    try:
        _make_group(spec.job, group)
        with open(os.path.join(group, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        return
    _joined_run_group, _group_before = group, own


def leave_run_group():
    """cgroup v1: move this process (a worker's hold, at the job's
    teardown, which freezes and empties the run's group) back into the
    group it came from (join_run_group). Whether it is out of the run's
    group: it may never have been in one."""
    global _joined_run_group
    if _joined_run_group is None:
        return True
    try:
        with open(os.path.join(_group_before, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        return False
    _joined_run_group = None
    return True


class Placement:
    """Where a rank's processes go on this node: the run's group (freezer on
    v1, the rank's leaf of the run's group on v2) and, with a memory
    request, a memory group (v1; on v2 the same leaf). `warnings` say what
    could not be had, for the rank's log."""

    def __init__(self, spec, rank):
        self.spec, self.rank = spec, rank
        self.kill_group = None  # the group whose procs teardown kills
        self.memory_group = None
        self.original = []  # (group, its procs or tasks file) to go back to
        self.warnings = []
        limit = spec.resources.memory_bytes
        try:
            if is_v2():
                self._place_v2(limit)
            else:
                self._place_v1(limit)
        except OSError as exc:
            self.warnings.append(self._no_cgroup("%s: %s" % (exc.filename or "cgroup", exc.strerror)))

    def _no_cgroup(self, why):
        return ("no cgroup for run %s on this node (%s): teardown can only find its processes "
                "by host name and ancestry, and kills them in rounds" % (self.spec.job, why))

    def _place_v2(self, limit):
        top = os.path.join(CGROUP_ROOT, GROUP)
        run = os.path.join(top, self.spec.job)
        leaf = os.path.join(run, self.rank.name)
        _make_group(self.spec.job, run)
        _make_group(self.spec.job, leaf)
        if limit:
            _enable_v2_controllers(run, CGROUP_ROOT)
        self.kill_group = leaf
        self.original = [os.path.join(CGROUP_ROOT, _own_v2_cgroup(_read_self_cgroup()).lstrip("/"))]
        if limit:
            if os.path.exists(os.path.join(leaf, "memory.max")):
                self.memory_group = leaf
                self._write_limit(leaf, ("memory.max", "memory.swap.max"), limit)
            else:
                self.warnings.append(self._memory_not_enforced("the cgroup v2 memory controller is not available"))

    def _place_v1(self, limit):
        if _joined_run_group is not None:  # forked in it already (join_run_group)
            self.kill_group = _joined_run_group
        else:
            own, why = v1_own_group("freezer")
            if own is None:
                self.warnings.append(self._no_cgroup(why))
            else:
                group = os.path.join(own, GROUP, self.spec.job)
                _make_group(self.spec.job, group)
                self.kill_group = group
                self.original.append(own)
        if not limit:
            return
        own, why = v1_own_group("memory")
        if own is None:
            self.warnings.append(self._memory_not_enforced(why))
            return
        group = os.path.join(own, GROUP, self.rank.name)
        _make_group(self.spec.job, group)
        self.memory_group = group
        self.original.append(own)
        self._write_limit(group, ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"), limit)

    def _memory_not_enforced(self, why):
        return "jobs.%s.resource.memory is not enforced on this node: %s" % (self.spec.job, why)

    @staticmethod
    def _write_limit(group, names, limit):
        for name in names:
            try:
                with open(os.path.join(group, name), "w") as handle:
                    handle.write("0" if name == "memory.swap.max" else str(limit))
            except FileNotFoundError:
                continue  # no swap accounting on this kernel

    def groups(self):
        return [g for g in dict.fromkeys([self.kill_group, self.memory_group]) if g is not None]

    def join(self):
        """Move this whole process (and so everything it starts) in."""
        for group in self.groups():
            if group != _joined_run_group:  # in that one since it was forked
                self._write(group, "cgroup.procs", os.getpid())
        return self.warnings

    @contextlib.contextmanager
    def spawning_in(self):
        """Processes forked inside this block start in the rank's groups,
        this process stays out of them. cgroup v1 moves only this thread
        (a child is forked into its forking thread's cgroups); v2 moves the
        whole process for the moment (its threads fork nothing meanwhile)."""
        v2 = is_v2()
        tid = threading.get_native_id()
        moved = []
        try:
            for group in self.groups():
                if self._write(group, "cgroup.procs" if v2 else "tasks", os.getpid() if v2 else tid):
                    moved.append(group)
            yield
        finally:
            for group in self.original if moved else ():
                self._write(group, "cgroup.procs" if v2 else "tasks", os.getpid() if v2 else tid)

    def _write(self, group, name, pid):
        try:
            with open(os.path.join(group, name), "w") as handle:
                handle.write(str(pid))
            return True
        except OSError as exc:
            self.warnings.append(self._no_cgroup("%s: %s" % (os.path.join(group, name), exc.strerror)))
            return False


def place(spec, rank):
    """The rank's placement (Placement), made now."""
    return Placement(spec, rank)


class RunCgroups:
    """The cgroups a job made on this node (its CGROUPS_FILE), for
    teardown: the processes in them, killing all of them, removing them."""

    def __init__(self, groups):
        # Deepest first: a v2 run group is removed after its leaves.
        self.groups = sorted(set(groups), key=lambda g: (-g.count("/"), g))

    def __bool__(self):
        return bool(self.groups)

    def pids(self):
        found = set()
        for group in self.groups:
            for directory, _unused, _unused in os.walk(group):
                try:
                    with open(os.path.join(directory, "cgroup.procs")) as handle:
                        found.update(int(line) for line in handle if line.strip())
                except (OSError, ValueError):
                    continue
        return found

    def kill(self, deadline=None):
        """Kill every process in the groups until none is left, or until
        `deadline` (time.monotonic()). Returns the pids killed. A frozen
        group forks no more: freeze, SIGKILL what is in it, thaw (a frozen
        process dies once thawed), again until it is empty; cgroup v2 with
        cgroup.kill does all of that in the kernel."""
        deadline = deadline or time.monotonic() + KILL_WITHIN
        killed = set()
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                break
            killed |= pids
            for group in self.groups:
                if not self._kill_by_kernel(group):
                    self._freeze_and_kill(group, deadline)
            end = min(deadline, time.monotonic() + 1)
            while self.pids() and time.monotonic() < end:
                reap_children()
                time.sleep(POLL_SECONDS / 5)
        reap_children()
        return killed

    @staticmethod
    def _kill_by_kernel(group):
        kill = os.path.join(group, "cgroup.kill")  # cgroup v2, Linux 5.14 on
        if not os.path.exists(kill):
            return False
        try:
            with open(kill, "w") as handle:
                handle.write("1")
            return True
        except OSError:
            return False

    def _freeze_and_kill(self, group, deadline):
        freeze = _freezer(group)
        if freeze:
            freeze(True, deadline)
        try:
            for pid in RunCgroups([group]).pids():
                send_signal(pid, signal.SIGKILL)
        finally:
            if freeze:
                freeze(False, deadline)

    def remove(self):
        for group in self.groups:
            try:
                os.rmdir(group)
            except OSError:
                continue


def _freezer(group):
    """freeze(on, deadline) for a group that can be frozen (v1 freezer.state,
    v2 cgroup.freeze), else None."""
    v1 = os.path.join(group, "freezer.state")
    v2 = os.path.join(group, "cgroup.freeze")
    if os.path.exists(v1):
        def freeze(on, deadline):
            _write_quietly(v1, "FROZEN" if on else "THAWED")
            # FREEZING until every task is frozen; at most a second.
            end = min(deadline, time.monotonic() + 1)
            while on and _read_quietly(v1) == "FREEZING" and time.monotonic() < end:
                time.sleep(POLL_SECONDS / 5)
        return freeze
    if os.path.exists(v2):
        def freeze(on, deadline):
            _write_quietly(v2, "1" if on else "0")
            end = min(deadline, time.monotonic() + 1)
            while on and "frozen 1" not in _read_quietly(os.path.join(group, "cgroup.events")) \
                    and time.monotonic() < end:
                time.sleep(POLL_SECONDS / 5)
        return freeze
    return None


def _write_quietly(path, text):
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError:
        pass


def _read_quietly(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def run_cgroups(job):
    """The job's cgroups on this node (RunCgroups; empty without any)."""
    try:
        with open(registry.job_path(job, registry.CGROUPS_FILE)) as handle:
            return RunCgroups(line.strip() for line in handle if line.strip())
    except OSError:
        return RunCgroups([])
