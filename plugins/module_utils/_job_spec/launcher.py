# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The launcher (the spec's ``launcher``): as Fuzzball does, an
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

Pure Python (standard library only); it does not import Ansible.
"""

from __future__ import annotations

from typing import Any, List

__all__ = ["launcher"]


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
