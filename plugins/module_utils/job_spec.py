# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The job spec: what every node of a job receives (docs/design.md, "The job
spec"): rank names, slots, per-rank environment, argument expansion, files,
resources and the launcher. This module renders it; its parts are in the
private package ``_job_spec`` (see its ``__init__``): the plan's settings
(``options``), argument expansion (``expansion``), the MPI launcher
(``launcher``), the job's files (``files``) and its resources
(``resources``).

Pure Python (standard library only); it does not import Ansible.

``plan_job(job, nodes, user=..., wrapper_path=..., kill_grace=..., claim_lease=...)`` renders
the job spec of docs/design.md ("The job spec"): one document that every node
of the job receives.

Environment of rank ``r`` of job ``J`` (a multinode job, any implementation):

- the job's ``env`` (every rank), then
- ``HOSTNAME=J-r`` and ``RANK=r`` (every rank; rank 0 gets ``RANK=0`` too), and
- on rank 0 only: ``MULTINODE_HOSTLIST`` (``J-0:S,J-1:S,...``),
  ``MULTINODE_HOSTLIST_NOSLOTS`` (``J-0,J-1,...``), ``MULTINODE_TOTAL_SLOTS``
  (nodes x S), ``MULTINODE_NODE_IP`` (rank 0's address),
  ``MULTINODE_SSH_WRAPPER`` and ``MULTINODE_RSH_WRAPPER`` (the wrapper path).

The runtime's values win: a job ``env`` entry for one of these names is
dropped on every rank and a note is added to the spec's ``unsupported`` list.
A job without a ``multinode`` section runs as a single rank ``J-0`` with only
``HOSTNAME`` set by the runtime (no ``RANK``, no ``MULTINODE_*``: Fuzzball sets
those only for multinode jobs).

The spec's env holds the job's variables and the runtime's; base variables of
a login (``PATH`` when the job sets none, ``HOME``, ``USER``) are the node
runtime's business.

Arguments: ``$NAME`` and ``${NAME}`` expand from rank 0's environment
(``_job_spec/expansion.py``).

Secrets (``secret://NAME`` env values, NAME being ``scope/name``): the spec
keeps the references, in every rank's ``env`` and in ``secret_env`` (``{key:
NAME}``); an argument that expands a secret key keeps the reference in
``argv`` and is listed in ``secret_args`` by its parts
(``_job_spec/expansion.py``). The
``image.secret`` reference (registry credentials for the image's pull) is
``image.secret``: its NAME, or None (none, or the job runs on the bare
host and pulls nothing). Values never pass through
the controller's modules: the node runtime resolves the references from the
values the play delivers to it separately. ``check_secrets`` (the run
policy, module_utils/fuzzfile.py) refuses a reference to a name that
``fuzz_multinode_secrets`` does not define, ``check_registry_secret`` an
``image.secret`` whose value is not registry credentials.

A plan checks its job once: ``load_job`` reads it (a task's argument, or a
``Job``), ``admit_once`` applies the run policy unless the job's form shows
that the fuzzfile task admitted this very job in this run; the rendering
after that trusts the job.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ansible_collections.fuzz.multinode.plugins.module_utils._job_spec.expansion import (
    expand,
    expansion_env,
    secret_argument_parts,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._job_spec.files import plan_files
from ansible_collections.fuzz.multinode.plugins.module_utils._job_spec.launcher import launcher
from ansible_collections.fuzz.multinode.plugins.module_utils._job_spec.options import (
    CLAIM_LEASE,
    EXECUTIONS,
    SERVICE_READY_TIMEOUT,
    VOLUME_ROOT,
    VOLUME_SHARINGS,
    check_options,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._job_spec.resources import plan_resources
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    ADMISSION_KEY,
    FuzzfileError,
    Job,
    admit_once,
    image_secret_name,
    load_job,
    rank_name,
    reserved_env,
    secret_references,
    task_name,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.service_endpoints import (
    RunningService,
    access,
    endpoint_url,
    running_services,
)

__all__ = [
    "CLAIM_LEASE",
    "EXECUTIONS",
    "SERVICE_READY_TIMEOUT",
    "VOLUME_ROOT",
    "VOLUME_SHARINGS",
    "expand",
    "launcher",
    "plan_files",
    "plan_job",
    "plan_resources",
    "plan_task_array",
    "secret_argument_parts",
]


def _local_nodes(job: Job, nodes: Any, count: int) -> List[Any]:
    """Local mode: the one node given, once per rank (or task slot), rank
    ``r`` at the node's address plus ``r`` (127.0.0.1, 127.0.0.2, ...: all
    loopback). Distinct addresses keep MPI launchers from taking a rank for
    the local host, so they start it through the wrapper as on a cluster."""
    if not isinstance(nodes, (list, tuple)) or len(nodes) != 1:
        raise FuzzfileError(
            "nodes: local mode runs job %r on exactly one node, got %s"
            % (job.name, len(nodes) if isinstance(nodes, (list, tuple)) else nodes)
        )
    (node,) = _check_nodes(dataclasses.replace(job, nodes=1), nodes)
    first = ipaddress.ip_address(node["address"])
    return [dict(node, address=str(first + rank)) for rank in range(count)]


def _check_nodes(job: Job, nodes: Any, shared: bool = False) -> List[Dict[str, str]]:
    """The nodes, checked; ``shared`` (local mode) lets ranks share one node."""
    if not isinstance(nodes, (list, tuple)):
        raise FuzzfileError("nodes: must be a list of {node, address} mappings")
    if len(nodes) != job.nodes:
        raise FuzzfileError(
            "nodes: job %r needs %d node(s) (multinode.nodes), but %d were given"
            % (job.name, job.nodes, len(nodes))
        )
    checked: List[Dict[str, str]] = []
    seen: Dict[str, int] = {}
    for rank, item in enumerate(nodes):
        path = "nodes[%d]" % rank
        if not isinstance(item, Mapping):
            raise FuzzfileError("%s: must be a mapping with 'node' and 'address'" % path)
        extra = sorted(str(key) for key in item if key not in ("node", "address"))
        if extra:
            raise FuzzfileError(
                "%s.%s: unknown key; expected one of address, node" % (path, extra[0])
            )
        node = item.get("node")
        if not isinstance(node, str) or not node:
            raise FuzzfileError("%s.node: must be a non-empty inventory host name" % path)
        if node in seen and not shared:
            raise FuzzfileError(
                "%s.node: %r already runs rank %d; every rank needs its own node"
                % (path, node, seen[node])
            )
        seen[node] = rank
        address = item.get("address")
        if address == "":
            raise FuzzfileError(
                "%s.address: %s has no default IPv4 address; set fuzz_multinode_address for it "
                "to the address the other nodes reach it by" % (path, node)
            )
        try:
            ip = ipaddress.ip_address(address if isinstance(address, str) else "")
        except ValueError:
            raise FuzzfileError(
                "%s.address: must be an IP address, got %r" % (path, address)
            ) from None
        checked.append({"node": node, "address": str(ip)})
    return checked


def _load(job: Union[Job, Mapping[str, Any]]) -> Job:
    """The job to plan, from its JSON form (the ``rank_plan`` task's ``job``)
    or a ``Job``, every field checked (``load_job``)."""
    if isinstance(job, Job):
        job = job.to_dict()  # a Job made by hand is checked like a task's dict
    if not isinstance(job, Mapping):
        raise FuzzfileError("job: must be a job mapping, got %s" % type(job).__name__)
    return load_job(job)


def _admission(job: Union[Job, Mapping[str, Any]]) -> Any:
    """The admission the fuzzfile task recorded in the job's form, if any."""
    return job.get(ADMISSION_KEY) if isinstance(job, Mapping) else None


def plan_job(
    job: Union[Job, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    *,
    user: str,
    wrapper_path: str,
    kill_grace: int,
    claim_lease: int = CLAIM_LEASE,
    files: Optional[Mapping[str, Any]] = None,
    secret_names: Optional[Iterable[Any]] = None,
    registry_secret_names: Optional[Iterable[Any]] = None,
    local: bool = False,
    execution: str = "container",
    run: str = "",
    volume_root: str = VOLUME_ROOT,
    volume_sharing: str = "auto",
    services: Sequence[Mapping[str, Any]] = (),
    service_ready_timeout: int = SERVICE_READY_TIMEOUT,
) -> Dict[str, Any]:
    """Render the job spec for ``job`` on ``nodes`` (rank order).

    ``nodes`` is a list of ``{"node": inventory_hostname, "address": ip}``,
    exactly ``job.nodes`` long; with ``local`` (local mode) exactly one node,
    which runs every rank, each in its own namespace. ``files`` is the
    workflow's top-level ``files`` (name -> contents), needed when the job has
    ``files``. ``secret_names``, when given, are the names defined in
    ``fuzz_multinode_secrets``: a ``secret://`` reference to any other name is
    refused (``check_secrets``); ``registry_secret_names``, those of them
    whose values are registry credentials: an ``image.secret`` naming any
    other is refused (``check_registry_secret``). Secret values never pass
    through here. ``services`` are the services of the run RUNNING when the
    job starts, ``[{name, address, endpoints}]`` (``running_services``);
    ``service_ready_timeout`` the seconds a service may take to become
    ready. Raises
    FuzzfileError on bad input, including a job the run policy refuses
    (``admit``: a ``gasnet`` job, rank host names too long) unless it was
    admitted already (``admit_once``).
    """
    return _render(
        admit_once(_load(job), _admission(job), secret_names, registry_secret_names),
        nodes,
        user=user,
        wrapper_path=wrapper_path,
        kill_grace=kill_grace,
        claim_lease=claim_lease,
        files=files,
        local=local,
        execution=execution,
        run=run,
        volume_root=volume_root,
        volume_sharing=volume_sharing,
        services=services,
        service_ready_timeout=service_ready_timeout,
    )


def _render(
    job: Job,
    nodes: Sequence[Mapping[str, Any]],
    *,
    user: str,
    wrapper_path: str,
    kill_grace: int,
    claim_lease: int = CLAIM_LEASE,
    files: Optional[Mapping[str, Any]] = None,
    local: bool = False,
    execution: str = "container",
    run: str = "",
    volume_root: str = VOLUME_ROOT,
    volume_sharing: str = "auto",
    services: Sequence[Mapping[str, Any]] = (),
    service_ready_timeout: int = SERVICE_READY_TIMEOUT,
) -> Dict[str, Any]:
    """``plan_job`` for a job already loaded and admitted: the options and
    nodes are checked here, the job is not checked again."""
    check_options(user=user, wrapper_path=wrapper_path, kill_grace=kill_grace, claim_lease=claim_lease,
                  execution=execution, volume_root=volume_root, volume_sharing=volume_sharing,
                  service_ready_timeout=service_ready_timeout)
    running = running_services(services, job.name)
    if local:
        nodes = _local_nodes(job, nodes, job.nodes)
    checked = _check_nodes(job, nodes, shared=local)
    planned_files = plan_files(job, files)
    # Every rank reaches the running services, and a service its own
    # endpoints, at their rank 0's address (service_endpoints.py).
    own = None
    if job.kind == "service":
        own = RunningService(job.name, checked[0]["address"], list(job.endpoints))
    endpoint_env, extra_hosts = access(running, own)
    secrets = {key: name for key, name in secret_references(job).items() if key not in endpoint_env}

    names = [rank_name(job.name, rank) for rank in range(job.nodes)]
    slots = job.slots_per_node
    total = slots * job.nodes
    head_vars: Dict[str, str] = {}
    reserved = reserved_env(job)
    if job.multinode:
        head_vars = {
            "MULTINODE_HOSTLIST": ",".join("%s:%d" % (name, slots) for name in names),
            "MULTINODE_HOSTLIST_NOSLOTS": ",".join(names),
            "MULTINODE_TOTAL_SLOTS": str(total),
            "MULTINODE_NODE_IP": checked[0]["address"],
            "MULTINODE_SSH_WRAPPER": wrapper_path,
            "MULTINODE_RSH_WRAPPER": wrapper_path,
        }

    notes = list(job.unsupported)
    if execution == "host":
        notes.append(
            "%s.image.uri: the %s runs on the bare host (fuzz_multinode_execution: host), "
            "not in image %s" % (job.field_path, job.kind, job.image_uri)
        )
    base: Dict[str, str] = {}
    for key, value in job.env:
        if key in reserved or key in endpoint_env:
            notes.append(
                "%s.env: %s is set by the runtime; the %s's value is ignored"
                % (job.field_path, key, job.kind)
            )
        else:
            base[key] = value

    ranks: List[Dict[str, Any]] = []
    for rank, (name, node) in enumerate(zip(names, checked)):
        env = dict(base)
        env["HOSTNAME"] = name
        if job.multinode:
            env["RANK"] = str(rank)
        env.update(endpoint_env)
        if rank == 0:
            env.update(head_vars)
        ranks.append(
            {
                "rank": rank,
                "name": name,
                "node": node["node"],
                "address": node["address"],
                "slots": slots,
                "env": env,
            }
        )

    head_env = ranks[0]["env"]
    if job.command is not None:
        mode = "command"
        words = job.command + job.args
    else:
        mode = "script"
        words = job.args
    expansion = expansion_env(head_env, run)
    argv = [expand(arg, expansion) for arg in words]
    # An argument expanding a secret: its parts, the node runtime puts the
    # value in (the run policy warned of it, or refused it).
    secret_args = secret_argument_parts(words, expansion, secrets)

    spec: Dict[str, Any] = {
        "job": job.name,
        "user": user,
        "mode": mode,
        "argv": argv,
        "script": job.script,
        "cwd": job.cwd or "/",
        # secret://NAME env values stay references here; the node runtime
        # resolves them from the values the play delivers separately.
        "secret_env": secrets,
        "secret_args": secret_args,
        "files": planned_files,
        "kill_grace": kill_grace,
        # Seconds a node keeps this run's claim with nothing of the run alive
        # (the node runtime's claims.py).
        "claim_lease": claim_lease,
        "timeout": job.timeout_seconds,  # policy.timeout.execute; None: none
        "resources": plan_resources(job),
        "implementation": job.implementation,
        # argv prefix of rank 0: the MPI launcher, or [] (generic, plain).
        "launcher": launcher(
            job.implementation, head_vars.get("MULTINODE_HOSTLIST", ""), total, wrapper_path
        ),
        "nodes": job.nodes,
        "slots_per_node": slots,
        "total_slots": total,
        "unsupported": notes,
        # Local mode: every rank on one node; wrapper calls reach a rank
        # through the head's local launch socket instead of ssh.
        "local": local,
        # Where the ranks run: "container", each in the job's image on its
        # node (Podman); "host", on the bare host.
        "execution": execution,
        # image.secret's NAME: the nodes pull the image with its registry
        # credentials, delivered as the secret:// env values are; none when
        # they pull nothing (the bare host).
        "image": {
            "uri": job.image_uri,
            "secret": image_secret_name(job) if execution == "container" else None,
        },
        "ranks": ranks,
        # The job's volumes at their mount locations (parents before what
        # they hold): each rank sees the volume's directory under
        # volume_root on its node, ephemeral/<run>/<volume> or
        # persistent/<name>.
        "mounts": [
            {"location": location, "volume": job.mounts[location], "store": job.volumes[job.mounts[location]]}
            for location in sorted(job.mounts)
        ],
        "volume_root": volume_root,
        # Whether volume_root is the same storage on every node ("auto":
        # the head's file system type says).
        "volume_sharing": volume_sharing,
        # A service: its readiness probe (null: ready once started), how
        # long it may take to be ready, and its endpoints as its ready line
        # shows them (URL, and the Fuzzfile's scope, not enforced); a job: null.
        "service": {
            "readiness_probe": job.readiness_probe,
            "ready_timeout": service_ready_timeout,
            "endpoints": [{"name": endpoint.name, "url": endpoint_url(endpoint, checked[0]["address"]),
                           "scope": endpoint.scope} for endpoint in job.endpoints],
        } if job.kind == "service" else None,
        # [host name, address] the runtime adds to the ranks' /etc/hosts
        # block: <service>.svc of every service the ranks reach.
        "extra_hosts": extra_hosts,
    }
    if run:
        # The run's id (FB_WORKFLOW_ID, set by the runtime in every process
        # of the run; the nodes' claims are keyed by it).
        spec["run"] = run
    return spec


def plan_task_array(
    job: Union[Job, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    *,
    user: str,
    wrapper_path: str,
    kill_grace: int,
    **options: Any,
) -> Dict[str, Any]:
    """Render the spec of a task-array job: the spec ``plan_job`` renders for
    one run of the job, whose ``ranks`` are the tasks instead.

    Task ``t`` (``start`` to ``end``) is rank entry ``t - start`` with host
    name ``<job>-t`` and ``FB_TASK_ID=t`` (the runtime names its log); tasks are
    placed round-robin on ``nodes`` (1 to ``job.max_hosts`` of them). In
    command mode each task's ``argv`` is expanded from its own environment,
    so ``$FB_TASK_ID`` and ``$HOSTNAME`` are the task's. ``task_array`` gives
    ``start``, ``end`` and the ``concurrency`` the head enforces (the
    Fuzzfile's, else one task per node at a time).
    """
    record = _admission(job)
    job = _load(job)
    if job.task_array is None:
        raise FuzzfileError("job: %s has no task-array" % job.name)
    options = dict(options)
    admit_once(job, record, options.pop("secret_names", None),
               options.pop("registry_secret_names", None))
    local = bool(options.get("local"))
    if local:
        # As many task slots on the one node as it would have hosts.
        nodes = _local_nodes(job, nodes, job.max_hosts)
    if not isinstance(nodes, (list, tuple)) or not 1 <= len(nodes) <= job.max_hosts:
        raise FuzzfileError(
            "nodes: task array %r runs on 1 to %d node(s) (its tasks, at most "
            "task-array.concurrency), got %s"
            % (job.name, job.max_hosts, len(nodes) if isinstance(nodes, (list, tuple)) else nodes)
        )
    # One run of the job on the first node: everything but the tasks.
    spec = _render(dataclasses.replace(job, task_array=None), [nodes[0]], user=user, wrapper_path=wrapper_path,
                   kill_grace=kill_grace, **options)
    checked = _check_nodes(dataclasses.replace(job, nodes=len(nodes)), nodes, shared=local)
    base = {k: v for k, v in spec["ranks"][0]["env"].items() if k != "HOSTNAME"}
    notes = spec["unsupported"]
    if "FB_TASK_ID" in base:
        notes.append("%s.env: FB_TASK_ID is set by the runtime; the job's value is ignored"
                     % job.field_path)
    words = (job.command or []) + job.args
    tasks: List[Dict[str, Any]] = []
    for index, task_id in enumerate(range(job.task_array.start, job.task_array.end + 1)):
        node = checked[index % len(checked)]
        name = task_name(job.name, task_id)
        env = dict(base, HOSTNAME=name, FB_TASK_ID=str(task_id))
        tasks.append(
            {
                "rank": index,
                "name": name,
                "task_id": task_id,
                "node": node["node"],
                "address": node["address"],
                "slots": spec["slots_per_node"],
                "env": env,
                "argv": [expand(arg, expansion_env(env, options.get("run", ""))) for arg in words],
                # the task's own: its text parts may expand FB_TASK_ID
                "secret_args": secret_argument_parts(words, expansion_env(env, options.get("run", "")),
                                                     spec["secret_env"]),
            }
        )
    spec.update(
        argv=[],  # each task has its own
        nodes=len(checked),
        ranks=tasks,
        task_array={
            "start": job.task_array.start,
            "end": job.task_array.end,
            "concurrency": job.task_array.concurrency or len(checked),
        },
    )
    return spec
