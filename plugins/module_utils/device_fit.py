# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Which hosts can hold a job's devices (``resource.devices``), from how
many CDI devices of each kind each node has (fuzz.multinode.node_state):
the controller's refusal before any host is touched, and the hosts the
workflow runner may place the job on.

A host needs, of each kind, the job's count times the ranks or tasks it
runs there at once, counted as the node runtime counts them when it
allocates (devices.py ``slots_here``, the last word: it also knows the
devices other runs hold). A host whose devices are unknown (None) is
taken to have enough: its registration decides.

The jobs are the fuzzfile task's ``run`` entries (``Job.to_dict``)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

Counts = Optional[Mapping[str, int]]  # a node's devices by kind; None: unknown


def field_path(job: Mapping[str, Any]) -> str:
    return "%s.%s.resource.devices" % ("services" if job.get("kind") == "service" else "jobs", job["name"])


def slots_per_host(job: Mapping[str, Any], hosts: int, local: bool) -> int:
    """The most ranks or tasks of ``job`` that run at once on one of the
    ``hosts`` hosts it is given. Local mode: every rank (or task slot) on
    the one machine; on a cluster one rank a host, and a task array's tasks
    round-robin (the first host has the most), at most its concurrency."""
    task_array = job.get("task_array")
    if local:
        return int(job.get("max_hosts") or 1) if task_array else int(job.get("nodes") or 1)
    if not task_array:
        return 1
    tasks = int(task_array["end"]) - int(task_array["start"]) + 1
    concurrency = int(task_array.get("concurrency") or hosts)
    return min(-(-tasks // max(1, hosts)), max(1, concurrency))


def per_host_need(job: Mapping[str, Any], hosts: int, local: bool) -> Dict[str, int]:
    """{kind: devices one host needs} for ``job`` on ``hosts`` hosts."""
    slots = slots_per_host(job, hosts, local)
    return {kind: int(count) * slots for kind, count in sorted((job.get("devices") or {}).items())}


def has_room(need: Mapping[str, int], counts: Counts) -> bool:
    return counts is None or all(int(counts.get(kind, 0)) >= count for kind, count in need.items())


def host_count(job: Mapping[str, Any], available: int, local: bool) -> int:
    """How many hosts the job takes when ``available`` hosts are free to
    it: its nodes; a task array up to its ``max_hosts`` (fewer when there
    are fewer: its tasks then share them); local mode the one machine."""
    if local:
        return 1
    if job.get("task_array"):
        return max(1, min(int(job.get("max_hosts") or 1), available))
    return int(job.get("nodes") or 1)


def placement(job: Mapping[str, Any], counts: Sequence[Tuple[str, Counts]],
              local: bool) -> Tuple[List[str], int, Dict[str, int]]:
    """(the hosts of ``counts`` that can hold the job's devices, in their
    order; how many hosts the job takes; what each needs). A task array is
    spread over as many hosts as have room for their share (fewer hosts,
    more tasks a host). Fewer hosts than it takes: it cannot run."""
    names = [name for name, _unused in counts]
    wanted = host_count(job, len(names), local)
    if not job.get("devices"):
        return names, wanted, {}
    able: List[str] = []
    need: Dict[str, int] = {}
    for hosts in range(wanted, 0, -1) if job.get("task_array") else [wanted]:
        need = per_host_need(job, hosts, local)
        able = [name for name, found in counts if has_room(need, found)]
        if len(able) >= hosts:
            return able, hosts, need
    return able, hosts, need


def _shown(name: str, counts: Counts, kinds: Sequence[str]) -> str:
    if counts is None:
        return "%s could not tell" % name
    found = ["%d %s" % (int(counts.get(kind, 0)), kind) for kind in kinds if counts.get(kind)]
    return "%s has %s" % (name, ", ".join(found) or "none")


def refusal(job: Mapping[str, Any], counts: Sequence[Tuple[str, Counts]], local: bool,
            problems: Optional[Mapping[str, Sequence[str]]] = None) -> Optional[str]:
    """Why ``job`` cannot run on the hosts of ``counts`` for lack of
    devices (naming the field, what each host needs and what each has,
    and any CDI specification a host passed over), or None."""
    if not job.get("devices"):
        return None
    able, needed, need = placement(job, counts, local)
    if len(able) >= needed:
        return None
    kinds = sorted(need)
    slots = slots_per_host(job, needed, local)
    what = ", ".join("%d %s" % (need[kind], kind) for kind in kinds)
    each = "task" if job.get("task_array") else "rank"
    share = "one %s a host" % each if slots == 1 else "%d %ss at once on a host" % (slots, each)
    lines = ["%s: %s %s needs %s with %s%s (%s, %s a %s), and %d of the run's %d hosts %s that many "
             "CDI devices: %s" % (
                 field_path(job), "service" if job.get("kind") == "service" else "job", job["name"],
                 "1 host" if needed == 1 else "%d hosts" % needed, what, "" if needed == 1 else " each", share,
                 ", ".join("%d %s" % (int(job["devices"][kind]), kind) for kind in kinds), each,
                 len(able), len(counts), "has" if len(able) == 1 else "have",
                 "; ".join(_shown(name, found, kinds) for name, found in counts))]
    for name, _unused in counts:
        for problem in (problems or {}).get(name) or []:
            lines.append("%s passed over %s" % (name, problem))
    return "; ".join(lines)
