#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_volumes
short_description: Remove a run's ephemeral volumes from a node
version_added: 0.2.0
description:
  - >-
    Removes the ephemeral volumes (C(volume://user/ephemeral)) of one run of a workflow
    from the node: the directory C(<volume_root>/ephemeral/<run>) and everything in it,
    without following links. The C(fuzz.multinode.workflow) role runs it on every node of
    the play once the run's last job has ended; persistent volumes are left alone.
  - One runtime command over the host's connection (an action plugin).
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  run:
    description: The run's id (C(FB_WORKFLOW_ID)).
    type: str
    required: true
  state:
    description: Only V(absent) (the run's ephemeral volumes are gone).
    type: str
    choices: [absent]
    default: absent
extends_documentation_fragment:
  - fuzz.multinode.volumes
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: Runs the node runtime's C(remove-volumes) on the host.
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Remove the run's ephemeral volumes
  fuzz.multinode.run_volumes:
    run: "{{ run_id }}"
  become: true
"""

RETURN = r"""
changed:
  description: Whether the run had ephemeral volumes on the node.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUN_VOLUMES_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=RUN_VOLUMES_ARGUMENT_SPEC)
    module.fail_json(msg="fuzz.multinode.run_volumes runs as an action plugin only")


if __name__ == "__main__":
    main()
