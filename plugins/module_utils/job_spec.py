# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The job spec: what every node of a job receives (docs/design.md, "The job
spec"): rank names, slots, per-rank environment, argument expansion, files,
resources and the launcher.

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

Argument expansion: ``$NAME`` and ``${NAME}`` are replaced with the value from
rank 0's environment (the one described above, not the node's own), once, with
no other shell processing. In command mode ``argv`` is ``command + args``
expanded; in script mode the script text is left alone (its shell expands) and
``argv`` holds the expanded ``args``, passed to the script as ``$1 ...``.

Secrets (``secret://NAME`` env values, NAME being ``scope/name``): the spec
keeps the references, in every rank's ``env`` and in ``secret_env`` (``{key:
NAME}``); an argument that expands a secret key keeps the reference in
``argv`` and is listed in ``secret_args`` as ``{index, parts}``, its parts
``[kind, value]`` (``text`` and its expanded text, or ``secret`` and the
NAME), from which the node runtime builds the argument with the value
(``secret_argument_parts``; the run policy warns of it, or refuses it with
fuzz_multinode_secret_arguments: refuse). The
``image.secret`` reference (registry credentials for the image's pull) is
``image.secret``: its NAME, or None (none, or the job runs on the bare
host and pulls nothing). Values never pass through
the controller's modules: the node runtime resolves the references from the
values the play delivers to it separately. ``check_secrets`` (the run
policy, module_utils/fuzzfile.py) refuses a reference to a name that
``fuzz_multinode_secrets`` does not define, ``check_registry_secret`` an
``image.secret`` whose value is not registry credentials.

Files: ``files`` lists ``{path, name, contents}``, the job's ``files`` with
their contents from the workflow's top-level ``files``, or given in place
(``plan_files``).

Launcher (``launcher(...)``, the spec's ``launcher``): as Fuzzball does, an
``openmpi``/``ompi`` or ``mpich`` job's command (or script) is run under the
MPI launcher across all ranks, so the user writes only the per-rank program:

- ``openmpi``, ``ompi``: ``mpirun -H J-0:S,J-1:S,... --mca plm_rsh_agent
  WRAPPER -np TOTAL``;
- ``mpich``: ``mpiexec -hosts J-0:S,... -launcher ssh -launcher-exec WRAPPER
  -n TOTAL``;
- ``generic`` and plain jobs: none (``[]``).

The runtime puts it in front of ``argv`` (command mode) or of the script's
path on the nodes and ``argv`` (script mode); the launcher program is looked
up on rank 0's ``PATH`` like any command. ``gasnet`` jobs are refused
(``require_runnable``).

A plan checks its job once: ``load_job`` reads it (a task's argument, or a
``Job``), ``admit_once`` applies the run policy unless the job's form shows
that the fuzzfile task admitted this very job in this run; the rendering
after that trusts the job.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

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
    "expand",
    "launcher",
    "plan_files",
    "plan_job",
    "plan_resources",
    "plan_task_array",
]

CLAIM_LEASE = 120  # the role's fuzz_multinode_claim_lease; the runtime's spec.CLAIM_LEASE
# The role's fuzz_multinode_service_ready_timeout: seconds a service may take
# to become ready before it is given up.
SERVICE_READY_TIMEOUT = 300
_EXPAND_RE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")
_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")
_WRAPPER_RE = re.compile(r"/[A-Za-z0-9._+/-]*\Z")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Expand ``$NAME`` and ``${NAME}`` from ``env``, in a single pass.

    Unknown names expand to the empty string. A ``$`` not followed by a name
    or a braced name stays literal (``$(ls)``, ``$1``, ``${}``, a trailing
    ``$``). No word splitting, globbing or command substitution; expanded
    values are not expanded again.
    """
    return _EXPAND_RE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


def launcher(implementation: Any, hostlist: str, total: int, wrapper_path: str) -> List[str]:
    """The argv prefix that runs a job's command across all its ranks: the
    MPI launcher for ``openmpi``/``ompi`` and ``mpich``, ``[]`` otherwise.
    ``hostlist`` is ``MULTINODE_HOSTLIST`` (``J-0:S,...``), ``total`` the
    total slots; the wrapper starts the launcher's daemons on the workers."""
    if implementation in ("openmpi", "ompi"):
        return ["mpirun", "-H", hostlist, "--mca", "plm_rsh_agent", wrapper_path,
                "-np", str(total)]
    if implementation == "mpich":
        return ["mpiexec", "-hosts", hostlist, "-launcher", "ssh", "-launcher-exec",
                wrapper_path, "-n", str(total)]
    return []


def secret_argument_parts(
    words: Sequence[str], env: Mapping[str, str], secrets: Mapping[str, str]
) -> List[Dict[str, Any]]:
    """``[{index, parts}]`` of the words that expand a key of ``secrets``
    (``{env key: secret NAME}``): each word as ``[kind, value]`` parts,
    ``["text", expanded text]`` (from ``env``, as ``expand`` does) and
    ``["secret", NAME]``, adjacent text joined. No value is known here."""
    found: List[Dict[str, Any]] = []
    for index, word in enumerate(words):
        if not any((m.group(1) or m.group(2)) in secrets for m in _EXPAND_RE.finditer(word)):
            continue
        pieces: List[List[str]] = []
        at = 0
        for match in _EXPAND_RE.finditer(word):
            name = match.group(1) or match.group(2)
            pieces.append(["text", word[at:match.start()]])
            pieces.append(["secret", secrets[name]] if name in secrets else ["text", env.get(name, "")])
            at = match.end()
        pieces.append(["text", word[at:]])
        parts: List[List[str]] = []
        for kind, value in pieces:
            if kind == "text" and parts and parts[-1][0] == "text":
                parts[-1][1] += value
            elif kind == "secret" or value:
                parts.append([kind, value])
        found.append({"index": index, "parts": parts})
    return found


def _expansion_env(env: Mapping[str, str], run: str) -> Mapping[str, str]:
    """What ``command`` arguments expand from: the rank's env and, in a
    run, ``FB_WORKFLOW_ID`` (the runtime sets it in every process, over a
    value of the job's own)."""
    return dict(env, FB_WORKFLOW_ID=run) if run else env


def plan_files(job: Job, files: Optional[Mapping[str, Any]]) -> List[Dict[str, str]]:
    """The job's ``files`` as the runtime writes them on every node:
    ``[{"path", "name", "contents"}]``, first the ``file://`` references in
    the job's order, with ``contents`` from the workflow's top-level
    ``files`` (name -> contents), then the files whose contents the job gives
    in place (``inline_files``; ``name`` empty). A path must be a normalized
    absolute file path (no ``.``, ``..`` or empty component, no trailing
    ``/``): the runtime creates missing parent directories one by one and
    removes them again at cleanup."""
    planned: List[Dict[str, str]] = []
    sources: List[Tuple[str, str, Optional[str]]] = [
        (path, name, None) for path, name in job.files.items()]
    sources += [(path, "", contents) for path, contents in job.inline_files.items()]
    for path, name, contents in sources:
        where = "%s.files.%s" % (job.field_path, path)
        if any(part in ("", ".", "..") for part in path[1:].split("/")):
            raise FuzzfileError(
                "%s: must be a normalized absolute file path (no '.', '..' or empty "
                "components, no trailing '/')" % where
            )
        if contents is None:
            if files is None or name not in files:
                raise FuzzfileError(
                    "%s: no entry %r in the workflow's top-level files (%s)"
                    % (where, name, ", ".join(sorted(map(str, files or {}))) or "none given")
                )
            contents = files[name]
            if not isinstance(contents, str):
                raise FuzzfileError(
                    "files.%s: must be the file's contents as a string, got %s"
                    % (name, type(contents).__name__)
                )
        planned.append({"path": path, "name": name, "contents": contents})
    return planned


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


# Where a job's ranks run (fuzz_multinode_execution).
EXECUTIONS = ("container", "host")
# Where the nodes keep volumes (fuzz_multinode_volume_root), and whether it
# is storage the nodes share (fuzz_multinode_volume_sharing).
VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"
_VOLUME_ROOT_RE = re.compile(r"^/[A-Za-z0-9._+/-]*[A-Za-z0-9._+-]$")
VOLUME_SHARINGS = ("auto", "shared", "node-local")


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
    if not isinstance(user, str) or not _USER_RE.match(user):
        raise FuzzfileError("user: must be a user name (e.g. 'fuzz'), got %r" % (user,))
    if not isinstance(wrapper_path, str) or not _WRAPPER_RE.match(wrapper_path):
        raise FuzzfileError(
            "wrapper_path: must be an absolute path of letters, digits and ._+-/, got %r"
            % (wrapper_path,)
        )
    if isinstance(kill_grace, bool) or not isinstance(kill_grace, int) or kill_grace < 0:
        raise FuzzfileError("kill_grace: must be an integer >= 0, got %r" % (kill_grace,))
    if isinstance(claim_lease, bool) or not isinstance(claim_lease, int) or claim_lease < 1:
        raise FuzzfileError(
            "claim_lease (fuzz_multinode_claim_lease): must be a positive integer of seconds, "
            "got %r" % (claim_lease,)
        )
    if execution not in EXECUTIONS:
        raise FuzzfileError(
            "execution (fuzz_multinode_execution): must be one of %s, got %r"
            % (", ".join(EXECUTIONS), execution)
        )
    if (not isinstance(volume_root, str) or not _VOLUME_ROOT_RE.match(volume_root)
            or "/../" in volume_root + "/" or "/./" in volume_root + "/"):
        raise FuzzfileError(
            "volume_root (fuzz_multinode_volume_root): must be an absolute path of letters, "
            "digits and ._+-/ other than /, got %r" % (volume_root,)
        )
    if volume_sharing not in VOLUME_SHARINGS:
        raise FuzzfileError(
            "volume_sharing (fuzz_multinode_volume_sharing): must be one of %s, got %r"
            % (", ".join(VOLUME_SHARINGS), volume_sharing)
        )
    if (isinstance(service_ready_timeout, bool) or not isinstance(service_ready_timeout, int)
            or service_ready_timeout < 1):
        raise FuzzfileError(
            "service_ready_timeout (fuzz_multinode_service_ready_timeout): must be a positive "
            "integer of seconds, got %r" % (service_ready_timeout,)
        )
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
    expansion = _expansion_env(head_env, run)
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


def plan_resources(job: Job) -> Dict[str, Any]:
    """What each rank (or task) asks of its node: ``cores`` (``resource.cpu.cores``,
    the CPUs it is bound to; None: not bound), ``affinity`` (``CORE``, or
    ``SOCKET``/``NUMA``: the cores all from one socket or NUMA node) and ``memory_bytes``
    (``resource.memory.size``, times the cores when ``memory.by-core``;
    None: no request) and ``devices`` (``resource.devices``: CDI kind -> how
    many devices of it each rank or task gets, distinct from every other
    rank's, task's and job's on its node). A node that has less refuses the
    job before it starts."""
    memory = job.memory_bytes
    if memory is not None and job.memory_by_core:
        memory *= job.cores or 1
    return {"cores": job.cores, "affinity": job.affinity, "memory_bytes": memory,
            "devices": dict(job.devices)}


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
                "argv": [expand(arg, _expansion_env(env, options.get("run", ""))) for arg in words],
                # the task's own: its text parts may expand FB_TASK_ID
                "secret_args": secret_argument_parts(words, _expansion_env(env, options.get("run", "")),
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
