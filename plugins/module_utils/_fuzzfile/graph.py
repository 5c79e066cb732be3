# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The dependency graph of a workflow: its jobs and services by their
``depends-on``, in execution order and in waves, and the checks that every
dependency names a job or service and that there is no cycle."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Dict, List, Mapping, Sequence, Set, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import _show

if TYPE_CHECKING:  # the model imports this module
    from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Job


def _graph(units: Mapping[str, Job]) -> Dict[str, List[str]]:
    return {name: [d.name for d in unit.depends_on] for name, unit in units.items()}


def dependency_order(
    graph: Mapping[str, Sequence[str]], path: str = "jobs"
) -> Tuple[List[str], List[List[str]]]:
    """Order a dependency graph: ``graph`` maps each name to the names it
    depends on; the mapping's order (the Fuzzfile's) breaks ties.

    Returns ``(order, waves)``. ``order`` is the topological order that
    always takes the earliest ready name in file order. ``waves`` groups the
    names by level: wave 0 holds the names without dependencies, wave k the
    names whose deepest dependency is in wave k-1; each wave is in file
    order. Everything in a wave can run concurrently.

    A cycle raises ``FuzzfileError("jobs: dependency cycle: a -> b -> a")``
    (each name depends on the next), starting at the cycle's earliest name.
    A dependency on a name that is not in ``graph`` raises too.
    """
    position = {name: index for index, name in enumerate(graph)}
    waiting: Dict[str, Set[str]] = {}
    dependants: Dict[str, List[str]] = {name: [] for name in graph}
    for name, deps in graph.items():
        for dep in deps:
            if dep not in position:
                raise FuzzfileError(
                    "%s.%s: depends on %r, which is not a job or service" % (path, name, dep)
                )
        waiting[name] = set(deps)
        for dep in waiting[name]:
            dependants[dep].append(name)
    ready = [(position[name], name) for name in graph if not waiting[name]]
    heapq.heapify(ready)
    order: List[str] = []
    level: Dict[str, int] = {}
    while ready:
        _unused, name = heapq.heappop(ready)
        order.append(name)
        level[name] = max((level[dep] + 1 for dep in graph[name]), default=0)
        for dependant in dependants[name]:
            waiting[dependant].discard(name)
            if not waiting[dependant]:
                heapq.heappush(ready, (position[dependant], dependant))
    if len(order) < len(graph):
        raise FuzzfileError(
            "%s: dependency cycle: %s" % (path, " -> ".join(_find_cycle(graph, level, position)))
        )
    waves: List[List[str]] = [[] for _unused in range(max(level.values(), default=-1) + 1)]
    for name in graph:
        waves[level[name]].append(name)
    return order, waves


def _find_cycle(
    graph: Mapping[str, Sequence[str]], done: Mapping[str, int], position: Mapping[str, int]
) -> List[str]:
    """A cycle among the names not ordered: each of them depends on at least
    one other of them. Walk from the earliest, always to the earliest
    unordered dependency, until a name repeats."""
    remaining = [name for name in graph if name not in done]
    current = remaining[0]
    seen: Dict[str, int] = {}
    walk: List[str] = []
    while current not in seen:
        seen[current] = len(walk)
        walk.append(current)
        current = min(
            (dep for dep in graph[current] if dep not in done), key=position.__getitem__
        )
    cycle = walk[seen[current]:]
    first = min(range(len(cycle)), key=lambda index: position[cycle[index]])
    cycle = cycle[first:] + cycle[:first]
    return cycle + [cycle[0]]


def _check_dependencies(
    units: Mapping[str, Job], paths: Mapping[str, Sequence[Tuple[str, str]]]
) -> None:
    """Every dependency names a job or service; RUNNING only for services."""
    jobs = [name for name, unit in units.items() if unit.kind == "job"]
    services = [name for name, unit in units.items() if unit.kind == "service"]
    for name, unit in units.items():
        for dependency, (name_path, status_path) in zip(unit.depends_on, paths[name]):
            target = units.get(dependency.name)
            if target is None:
                known = "jobs: %s" % ", ".join(jobs)
                if services:
                    known += "; services: %s" % ", ".join(services)
                raise FuzzfileError(
                    "%s: no job or service named %s (%s)"
                    % (name_path, _show(dependency.name), known)
                )
            if dependency.status == "RUNNING" and target.kind != "service":
                raise FuzzfileError(
                    "%s: RUNNING is only for services, and %r is a job; use FINISHED"
                    % (status_path, dependency.name)
                )
