# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The model: a workflow (``Workflow``) of jobs and services (``Job``), each
normalized (defaults merged), with their JSON forms (``to_dict``) passed
between the collection's tasks. Jobs are made by the parser
(``parse_workflow``) or, from a JSON form, by ``job_form.load_job``; both
check every field first."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.graph import _graph, dependency_order
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    SECRET_PREFIX,
    TASK_ARRAY_MAX_CONCURRENCY,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import _int_at_least, _join, _positive_int


class TaskArray(NamedTuple):
    """``task-array``: tasks ``start`` to ``end`` (inclusive), at most
    ``concurrency`` at a time (``None``: not limited by the Fuzzfile)."""

    start: int
    end: int
    concurrency: Optional[int] = None

    @property
    def tasks(self) -> int:
        return self.end - self.start + 1


class Dependency(NamedTuple):
    """One ``depends-on`` entry: the job or service ``name`` must reach
    ``status`` (``FINISHED``, or ``RUNNING`` for a service)."""

    name: str
    status: str = "FINISHED"


class Port(NamedTuple):
    """One ``network.ports`` entry of a service: ``port`` (its number),
    ``protocol`` (``TCP`` or ``UDP``) and the ``name`` a readiness probe or
    an endpoint may name it by (None: unnamed)."""

    name: Optional[str]
    port: int
    protocol: str = "TCP"

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "port": self.port, "protocol": self.protocol}


class Endpoint(NamedTuple):
    """One ``network.endpoints`` entry of a service, resolved: the jobs
    reach it at ``<protocol>://<rank 0's address>:<port><path>``
    (``FB_ENDPOINT_URL_<NAME>``, module_utils/service_endpoints.py).
    ``scope`` is the Fuzzfile's (who Fuzzball lets reach it; None: none
    given): kept and shown with the URL, not enforced here."""

    name: str
    port: int
    protocol: str = "http"
    path: str = "/"
    scope: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "port": self.port, "protocol": self.protocol, "path": self.path,
                "scope": self.scope}


class Transfer(NamedTuple):
    """One item of a volume's ``ingress`` or ``egress``: copy ``source`` to
    ``destination`` (URIs as the Fuzzfile wrote them, checked by
    ``transfers``), with the credentials of ``secret`` (the ``secret://``
    reference of the end that is not the volume; None: none), within
    ``timeout_seconds`` (``policy.timeout.execute``; None: no limit), tried
    up to ``attempts`` times (``policy.retry.attempts``, at least 1)."""

    source: str
    destination: str
    secret: Optional[str] = None
    timeout_seconds: Optional[float] = None
    attempts: int = 1

    def to_dict(self) -> Dict[str, Any]:
        return {"source": self.source, "destination": self.destination, "secret": self.secret,
                "timeout_seconds": self.timeout_seconds, "attempts": self.attempts}


@dataclasses.dataclass
class Volume:
    """A declared volume: its ``store`` (``ephemeral`` or
    ``persistent/NAME``, files_volumes.volume_store) and its data movement,
    ``ingress`` (copied in before the run's first job) and ``egress``
    (copied out after its last)."""

    store: str
    ingress: List[Transfer] = dataclasses.field(default_factory=list)
    egress: List[Transfer] = dataclasses.field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"store": self.store, "ingress": [item.to_dict() for item in self.ingress],
                "egress": [item.to_dict() for item in self.egress]}


# Job.to_dict() keys computed from other fields; load_job ignores them.
DERIVED_JOB_KEYS = ("slots_per_node", "total_slots", "tasks", "max_hosts", "secret_env")


@dataclasses.dataclass
class Job:
    """One job (or service) of a workflow, normalized: defaults merged.

    ``env`` is a list of ``(key, value)`` pairs in the Fuzzfile's order; a key
    given twice keeps its first position and its last value. A job without a
    ``multinode`` section has ``nodes == 1`` and ``implementation is None``.
    ``nodes`` is the number of ranks (host names ``<name>-0`` ...).

    One shape whatever form the Fuzzfile used: ``mounts`` maps each mount
    location (an absolute container path) to its volume's name, from any of
    the three mount forms; ``files`` holds the ``file://`` references and
    ``inline_files`` (container path -> contents) the files whose contents
    are given in place; a service's ``readiness_probe`` is its probe in the
    Fuzzfile's form, normalized (``network._parse_probe``), a named port
    replaced by its number; its ``ports`` and ``endpoints`` are its
    ``network.ports`` and ``network.endpoints`` (``Port``, ``Endpoint``),
    normalized, each endpoint's port resolved.

    Fields added for workflows (all have defaults, so older job dicts still
    load): ``kind`` (``job`` or ``service``), ``depends_on`` (``Dependency``
    list), ``timeout_seconds`` (``policy.timeout.execute``; ``None``: no
    timeout), ``task_array`` (``TaskArray`` or ``None``), ``files``
    (container path -> name of a top-level ``files`` entry), ``mounts``
    (container path -> volume name), ``volumes`` (the name of each volume
    a mount uses -> its store: ``ephemeral`` or ``persistent/NAME``,
    files_volumes.volume_store), ``memory_by_core`` (``memory.size`` is
    per core), ``image_secret`` (``image.secret``, a ``secret://``
    reference to registry credentials), for services ``persist`` (kept
    running until the workflow ends, not only until its last dependant
    has), ``ports`` and ``endpoints``, and the features recorded in
    ``unsupported``: ``cpu_threads``, ``cpu_sockets``, ``devices``,
    ``exclusive``, ``resource_annotations``, ``retry_attempts``,
    ``restart``, ``network_isolated``, ``expose_tcp``, ``expose_udp``.
    """

    name: str
    image_uri: str
    command: Optional[List[str]] = None
    script: Optional[str] = None
    args: List[str] = dataclasses.field(default_factory=list)
    env: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    cwd: Optional[str] = None
    cores: Optional[int] = None
    affinity: Optional[str] = None
    memory_bytes: Optional[int] = None
    nodes: int = 1
    implementation: Optional[str] = None
    procs_per_node: Optional[int] = None
    unsupported: List[str] = dataclasses.field(default_factory=list)
    kind: str = "job"
    depends_on: List[Dependency] = dataclasses.field(default_factory=list)
    timeout_seconds: Optional[float] = None
    task_array: Optional[TaskArray] = None
    files: Dict[str, str] = dataclasses.field(default_factory=dict)
    mounts: Dict[str, str] = dataclasses.field(default_factory=dict)
    volumes: Dict[str, str] = dataclasses.field(default_factory=dict)
    memory_by_core: bool = False
    image_secret: Optional[str] = None
    cpu_threads: Optional[bool] = None
    cpu_sockets: Optional[int] = None
    devices: Dict[str, int] = dataclasses.field(default_factory=dict)
    exclusive: bool = False
    resource_annotations: Dict[str, str] = dataclasses.field(default_factory=dict)
    retry_attempts: Optional[int] = None
    restart: Optional[str] = None
    network_isolated: bool = False
    expose_tcp: List[int] = dataclasses.field(default_factory=list)
    expose_udp: List[int] = dataclasses.field(default_factory=list)
    persist: Optional[bool] = None
    inline_files: Dict[str, str] = dataclasses.field(default_factory=dict)
    readiness_probe: Optional[Dict[str, Any]] = None
    ports: List[Port] = dataclasses.field(default_factory=list)
    endpoints: List[Endpoint] = dataclasses.field(default_factory=list)

    @property
    def slots_per_node(self) -> int:
        """``procs-per-node`` when set, else ``cpu.cores``, else 1."""
        return self.procs_per_node or self.cores or 1

    @property
    def total_slots(self) -> int:
        """``nodes`` x ``slots_per_node`` (``MULTINODE_TOTAL_SLOTS``)."""
        return self.nodes * self.slots_per_node

    @property
    def tasks(self) -> int:
        """Number of task-array tasks; 1 for a job without a task array."""
        return self.task_array.tasks if self.task_array is not None else 1

    @property
    def max_hosts(self) -> int:
        """The most hosts the job can use at once: ``nodes``, or for a task
        array its tasks (at most ``concurrency`` of them), one per host."""
        if self.task_array is None:
            return self.nodes
        return min(self.tasks, self.task_array.concurrency or self.tasks)

    @property
    def secret_env(self) -> List[str]:
        """Keys of ``env`` whose value is a ``secret://`` reference."""
        return [key for key, value in self.env if value.startswith(SECRET_PREFIX)]

    @property
    def multinode(self) -> bool:
        return self.implementation is not None

    @property
    def field_path(self) -> str:
        """Where the unit is in the Fuzzfile, for messages: ``jobs.NAME``
        or ``services.NAME``."""
        return "%s.%s" % ("services" if self.kind == "service" else "jobs", self.name)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form; ``env`` becomes a list of ``[key, value]``,
        ``depends_on`` a list of ``{name, status}``, ``task_array`` a
        ``{start, end, concurrency}`` mapping, ``ports`` and ``endpoints``
        lists of ``{name, port, protocol}`` and ``{name, port, protocol,
        path}``.

        ``slots_per_node``, ``total_slots``, ``tasks`` and ``secret_env`` are
        included for convenience; ``load_job`` ignores them (they are
        derived).
        """
        task_array = None
        if self.task_array is not None:
            task_array = {
                "start": self.task_array.start,
                "end": self.task_array.end,
                "concurrency": self.task_array.concurrency,
            }
        return {
            "name": self.name,
            "image_uri": self.image_uri,
            "command": list(self.command) if self.command is not None else None,
            "script": self.script,
            "args": list(self.args),
            "env": [[key, value] for key, value in self.env],
            "cwd": self.cwd,
            "cores": self.cores,
            "affinity": self.affinity,
            "memory_bytes": self.memory_bytes,
            "nodes": self.nodes,
            "implementation": self.implementation,
            "procs_per_node": self.procs_per_node,
            "slots_per_node": self.slots_per_node,
            "unsupported": list(self.unsupported),
            "kind": self.kind,
            "depends_on": [{"name": d.name, "status": d.status} for d in self.depends_on],
            "timeout_seconds": self.timeout_seconds,
            "task_array": task_array,
            "files": dict(self.files),
            "mounts": dict(self.mounts),
            "volumes": dict(self.volumes),
            "memory_by_core": self.memory_by_core,
            "image_secret": self.image_secret,
            "cpu_threads": self.cpu_threads,
            "cpu_sockets": self.cpu_sockets,
            "devices": dict(self.devices),
            "exclusive": self.exclusive,
            "resource_annotations": dict(self.resource_annotations),
            "retry_attempts": self.retry_attempts,
            "restart": self.restart,
            "network_isolated": self.network_isolated,
            "expose_tcp": list(self.expose_tcp),
            "expose_udp": list(self.expose_udp),
            "persist": self.persist,
            "inline_files": dict(self.inline_files),
            "readiness_probe": copy.deepcopy(self.readiness_probe),
            "ports": [port.to_dict() for port in self.ports],
            "endpoints": [endpoint.to_dict() for endpoint in self.endpoints],
            "total_slots": self.total_slots,
            "tasks": self.tasks,
            "max_hosts": self.max_hosts,
            "secret_env": self.secret_env,
        }


@dataclasses.dataclass
class Workflow:
    """A parsed Fuzzfile: its version, its jobs and services by name (in file
    order, normalized), the top-level ``files`` (name -> contents), the
    declared ``volumes`` by name (``Volume``: store, ingress, egress), notes
    on ignored features and warnings."""

    version: str
    jobs: Dict[str, Job]
    service_defs: Dict[str, Job] = dataclasses.field(default_factory=dict)
    files: Dict[str, str] = dataclasses.field(default_factory=dict)
    volumes: Dict[str, Volume] = dataclasses.field(default_factory=dict)
    unsupported: List[str] = dataclasses.field(default_factory=list)
    warnings: List[str] = dataclasses.field(default_factory=list)

    @property
    def services(self) -> List[str]:
        """Names of the services, in file order."""
        return list(self.service_defs)

    @property
    def units(self) -> Dict[str, Job]:
        """Jobs then services, in file order: the nodes of the DAG."""
        units = dict(self.jobs)
        units.update(self.service_defs)
        return units

    @property
    def order(self) -> List[str]:
        """Every job and service in a dependency order (see dependency_order)."""
        return dependency_order(_graph(self.units))[0]

    @property
    def waves(self) -> List[List[str]]:
        """Jobs and services by wave: each may start once the earlier waves
        have reached the statuses it depends on."""
        return dependency_order(_graph(self.units))[1]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form. ``jobs`` and ``services`` list the names;
        ``job_defs`` and ``service_defs`` hold each one's ``Job.to_dict()``;
        ``order`` and ``waves`` are derived (``load_workflow`` ignores them)."""
        order, waves = dependency_order(_graph(self.units))
        return {
            "version": self.version,
            "jobs": list(self.jobs),
            "services": self.services,
            "unsupported": list(self.unsupported),
            "warnings": list(self.warnings),
            "files": dict(self.files),
            "volumes": {name: volume.to_dict() for name, volume in self.volumes.items()},
            "order": order,
            "waves": waves,
            "job_defs": {name: job.to_dict() for name, job in self.jobs.items()},
            "service_defs": {name: svc.to_dict() for name, svc in self.service_defs.items()},
        }


def _task_array(start: Any, end: Any, concurrency: Any, path: str) -> TaskArray:
    """A TaskArray from its fields, checked: the Fuzzfile's ``task-array`` and
    the JSON form's ``task_array`` follow the same rules."""
    if start is None:
        raise FuzzfileError("%s: required (an integer >= 0)" % _join(path, "start"))
    if end is None:
        raise FuzzfileError("%s: required (an integer >= start)" % _join(path, "end"))
    start = _int_at_least(start, _join(path, "start"), 0)
    end = _int_at_least(end, _join(path, "end"), 0)
    if end < start:
        raise FuzzfileError(
            "%s: must not be less than start (%d), got %d" % (_join(path, "end"), start, end)
        )
    if concurrency is not None:
        concurrency = _positive_int(
            concurrency, _join(path, "concurrency"), TASK_ARRAY_MAX_CONCURRENCY
        )
    return TaskArray(start, end, concurrency)
