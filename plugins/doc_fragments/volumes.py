# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The volume_root option (rank_plan, run_volumes, volume_transfers,
workflow_jobs) and volume_sharing (SHARING: all of them but run_volumes),
the same in every module that touches the nodes' volumes."""

from __future__ import annotations


class ModuleDocFragment(object):
    # volume_root: every module that touches the nodes' volumes.
    DOCUMENTATION = r"""
options:
  volume_root:
    description: >-
      Where the nodes keep the run's volumes (the C(fuzz.multinode.job) role's
      C(fuzz_multinode_volume_root)): an ephemeral volume in C(ephemeral/<run>/<volume>), a
      persistent one in C(persistent/<name>) below it.
    type: str
    default: /var/lib/fuzz-multinode/volumes
"""

    # volume_sharing: those that place ranks or copies on several nodes.
    SHARING = r"""
options:
  volume_sharing:
    description: >-
      Whether O(volume_root) is storage every node shares (V(shared)), each node's own
      (V(node-local)), or what the head's file system type says (V(auto): network and
      cluster file systems are shared); C(fuzz_multinode_volume_sharing). A multinode job
      that mounts a volume on node-local storage says so in its log.
    type: str
    choices: [auto, shared, node-local]
    default: auto
"""
