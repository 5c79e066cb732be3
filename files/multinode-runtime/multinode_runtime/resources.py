"""Resources: what a rank asks of its node (the spec's `resources`): CPUs
it is bound to; its memory limit is a cgroup's (cgroups.py).
"""

import os
import re

from .errors import RuntimeFailure


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
            low, _unused, high = part.partition("-")
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
