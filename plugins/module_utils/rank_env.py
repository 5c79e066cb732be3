# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rank names, slots, per-rank environment and argument expansion.

Pure Python (standard library only); it does not import Ansible.

``plan_job(job, nodes, user=..., wrapper_path=..., kill_grace=...)`` renders
the job spec of docs/design.md ("The job spec"): one document that every node
of the job receives.

Environment of rank ``r`` of job ``J`` (a ``generic`` multinode job):

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
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List, Mapping, Sequence, Union

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    Job,
    require_generic,
)

__all__ = [
    "MULTINODE_VARS",
    "check_rank_names",
    "expand",
    "plan_job",
    "rank_name",
]

MULTINODE_VARS = (
    "MULTINODE_HOSTLIST",
    "MULTINODE_HOSTLIST_NOSLOTS",
    "MULTINODE_TOTAL_SLOTS",
    "MULTINODE_NODE_IP",
    "MULTINODE_SSH_WRAPPER",
    "MULTINODE_RSH_WRAPPER",
)
HOST_NAME_MAX = 63  # one DNS label

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


def rank_name(job: str, rank: int) -> str:
    """Host name of rank ``rank`` of job ``job``."""
    return "%s-%d" % (job, rank)


def check_rank_names(job: Job) -> None:
    """Raise FuzzfileError unless every rank host name ``<job>-<rank>`` of
    ``job`` fits one DNS label. The job name alone may be 63 characters (a
    valid Fuzzfile); whether its ranks can be named depends on ``nodes``."""
    last = rank_name(job.name, job.nodes - 1)
    if len(last) > HOST_NAME_MAX:
        raise FuzzfileError(
            "jobs.%s: rank host name %r is longer than %d characters; use a shorter job name"
            % (job.name, last, HOST_NAME_MAX)
        )


def _check_nodes(job: Job, nodes: Any) -> List[Dict[str, str]]:
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
        if node in seen:
            raise FuzzfileError(
                "%s.node: %r already runs rank %d; every rank needs its own node"
                % (path, node, seen[node])
            )
        seen[node] = rank
        address = item.get("address")
        try:
            ip = ipaddress.ip_address(address if isinstance(address, str) else "")
        except ValueError:
            raise FuzzfileError(
                "%s.address: must be an IP address, got %r" % (path, address)
            ) from None
        checked.append({"node": node, "address": str(ip)})
    return checked


def plan_job(
    job: Union[Job, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    *,
    user: str,
    wrapper_path: str,
    kill_grace: int,
) -> Dict[str, Any]:
    """Render the job spec for ``job`` on ``nodes`` (rank order).

    ``nodes`` is a list of ``{"node": inventory_hostname, "address": ip}``,
    exactly ``job.nodes`` long. Raises FuzzfileError on bad input, including
    a multinode implementation other than ``generic``.
    """
    if isinstance(job, Job):
        job = job.to_dict()  # validated again below, like a dict from a module
    if not isinstance(job, Mapping):
        raise FuzzfileError("job: must be a job mapping, got %s" % type(job).__name__)
    job = Job.from_dict(job)
    require_generic(job)
    if not isinstance(user, str) or not _USER_RE.match(user):
        raise FuzzfileError("user: must be a user name (e.g. 'fuzz'), got %r" % (user,))
    if not isinstance(wrapper_path, str) or not _WRAPPER_RE.match(wrapper_path):
        raise FuzzfileError(
            "wrapper_path: must be an absolute path of letters, digits and ._+-/, got %r"
            % (wrapper_path,)
        )
    if isinstance(kill_grace, bool) or not isinstance(kill_grace, int) or kill_grace < 0:
        raise FuzzfileError("kill_grace: must be an integer >= 0, got %r" % (kill_grace,))
    checked = _check_nodes(job, nodes)

    check_rank_names(job)
    names = [rank_name(job.name, rank) for rank in range(job.nodes)]
    slots = job.slots_per_node
    total = slots * job.nodes
    head_vars: Dict[str, str] = {}
    reserved = ["HOSTNAME"]
    if job.multinode:
        head_vars = {
            "MULTINODE_HOSTLIST": ",".join("%s:%d" % (name, slots) for name in names),
            "MULTINODE_HOSTLIST_NOSLOTS": ",".join(names),
            "MULTINODE_TOTAL_SLOTS": str(total),
            "MULTINODE_NODE_IP": checked[0]["address"],
            "MULTINODE_SSH_WRAPPER": wrapper_path,
            "MULTINODE_RSH_WRAPPER": wrapper_path,
        }
        reserved += ["RANK"] + list(MULTINODE_VARS)

    notes = list(job.unsupported)
    base: Dict[str, str] = {}
    for key, value in job.env:
        if key in reserved:
            notes.append(
                "jobs.%s.env: %s is set by the runtime; the job's value is ignored"
                % (job.name, key)
            )
        else:
            base[key] = value

    ranks: List[Dict[str, Any]] = []
    for rank, (name, node) in enumerate(zip(names, checked)):
        env = dict(base)
        env["HOSTNAME"] = name
        if job.multinode:
            env["RANK"] = str(rank)
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
        argv = [expand(arg, head_env) for arg in job.command + job.args]
    else:
        mode = "script"
        argv = [expand(arg, head_env) for arg in job.args]

    return {
        "job": job.name,
        "user": user,
        "mode": mode,
        "argv": argv,
        "script": job.script,
        "cwd": job.cwd or "/",
        "kill_grace": kill_grace,
        "timeout": job.timeout_seconds,  # policy.timeout.execute; None: none
        "implementation": job.implementation,
        "nodes": job.nodes,
        "slots_per_node": slots,
        "total_slots": total,
        "unsupported": notes,
        "ranks": ranks,
    }
