"""Resources: what a rank asks of its node (the spec's `resources`): CPUs
it is bound to, and a memory limit enforced by a cgroup of its own.
"""

import os
import re
import subprocess

from . import registry
from .errors import RuntimeFailure
from .processes import last_line


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
    wanted = spec.resources
    problems = []
    cores, cpus = wanted.cores, node_cpus()
    if cores and cores > len(cpus):
        problems.append("jobs.%s.resource.cpu.cores: %d requested, but the node has %d CPUs" % (
            spec.job, cores, len(cpus)))
    elif cores and wanted.affinity in AFFINITY_GROUP:
        groups = cpu_groups(wanted.affinity, cpus)
        if choose_cpus(cpus, groups, cores, 0) is None:
            problems.append(
                "jobs.%s.resource.cpu.affinity: %s needs %d CPUs in one %s, but the node's "
                "largest has %d" % (spec.job, wanted.affinity, cores,
                                   AFFINITY_GROUP[wanted.affinity], max(len(g) for g in groups)))
    memory, total = wanted.memory_bytes, node_memory_bytes()
    if memory and total and memory > total:
        problems.append("jobs.%s.resource.memory: %d bytes requested, but the node has %d" % (
            spec.job, memory, total))
    if problems:
        raise RuntimeFailure("job %s cannot start on node %s: %s" % (
            spec.job, node, "; ".join(problems)))


def bind_cpus(spec, rank):
    """Bind this process, and so the rank's processes, to resource.cpu.cores
    CPUs of the node, as Fuzzball gives a job that many cores: with
    cpu.affinity SOCKET or NUMA all of one socket or NUMA node. Tasks of a
    task array that share a node, and in local mode all ranks, take the
    next CPUs in turn."""
    cores, cpus = spec.resources.cores, node_cpus()
    if not cores or cores > len(cpus):
        return
    if spec.local:
        turn = rank.rank  # every rank and task shares this one node
    elif rank.is_task:
        turn = rank.rank // max(1, spec.nodes or 1)
    else:
        turn = 0
    chosen = choose_cpus(cpus, cpu_groups(spec.resources.affinity, cpus), cores, turn)
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
    limit = spec.resources.memory_bytes
    if not limit:
        return None
    try:
        base, why_not = memory_cgroup_base()
        if base is None:
            return "jobs.%s.resource.memory is not enforced on this node: %s" % (spec.job, why_not)
        group = os.path.join(base, rank.name)
        os.makedirs(base, exist_ok=True)
        try:
            os.mkdir(group)
            # Recorded once, by the call that created it: every wrapper
            # call of the rank joins the same group.
            with open(registry.job_path(spec.job, registry.CGROUPS_FILE), "a") as handle:
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
            spec.job, exc.filename or "cgroup", exc.strerror)
    return None


def remove_cgroups(job):
    """Remove the job's memory cgroups (their processes are gone by now)."""
    try:
        with open(registry.job_path(job, registry.CGROUPS_FILE)) as handle:
            groups = handle.read().split()
    except OSError:
        return
    for group in groups:
        try:
            os.rmdir(group)
        except OSError:
            continue
