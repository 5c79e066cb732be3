# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Resources: what each rank or task of a job asks of its node (the spec's
``resources``), which the node checks before the job starts.

Pure Python (standard library only); it does not import Ansible.
"""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import Job

__all__ = ["plan_resources"]


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
