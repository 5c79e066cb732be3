#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_plan
short_description: Plan the ranks of a Fuzzball job on inventory hosts
version_added: 0.1.0
description:
  - >-
    Turns a job returned by M(fuzz.multinode.fuzzfile) and the inventory hosts that will
    run it into the job spec that every node of the job receives: rank host names
    C(<job>-<rank>), slots per node, each rank's environment, and the head's argument
    vector with C($VAR) and C(${VAR}) expanded.
  - >-
    Every rank gets the job's C(env) plus C(HOSTNAME=<job>-<rank>); ranks of a multinode
    job also get C(RANK=<rank>) (rank 0 included). Rank 0 of a multinode job additionally
    gets C(MULTINODE_HOSTLIST), C(MULTINODE_HOSTLIST_NOSLOTS), C(MULTINODE_TOTAL_SLOTS),
    C(MULTINODE_NODE_IP), C(MULTINODE_SSH_WRAPPER) and C(MULTINODE_RSH_WRAPPER).
    These runtime values always win over the job's C(env); an overridden entry is
    dropped and reported as a warning.
  - >-
    Arguments are expanded once from rank 0's environment; unknown names expand to the
    empty string, and there is no other shell processing (no word splitting, globbing or
    command substitution). In script mode the script text is not touched and RV(spec.argv)
    holds the expanded C(args).
  - This module only computes; it changes nothing.
author:
  - fuzz.multinode developers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  job:
    description:
      - The job, exactly as returned in RV(fuzz.multinode.fuzzfile#module:job).
      - >-
        Only jobs without a C(multinode) section and C(generic) multinode jobs can be
        planned; other implementations fail with a clear message.
    type: dict
    required: true
  nodes:
    description:
      - The hosts that run the job, in rank order (the first one is rank 0, the head).
      - Must have exactly as many entries as the job's C(multinode.nodes) (1 without C(multinode)).
      - Each inventory host can run one rank only.
    type: list
    elements: dict
    required: true
    suboptions:
      node:
        description: The inventory host name.
        type: str
        required: true
      address:
        description: >-
          The host's IP address; rank 0's address becomes C(MULTINODE_NODE_IP), and rank host
          names resolve to these addresses.
        type: str
        required: true
  user:
    description: The unprivileged user that runs the job's processes on every node.
    type: str
    default: fuzz
  wrapper_path:
    description:
      - Absolute path of the SSH wrapper on every node; the value of C(MULTINODE_SSH_WRAPPER)
        and C(MULTINODE_RSH_WRAPPER).
    type: str
    default: /multinode/ssh-wrapper
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL when a job's processes are stopped.
    type: int
    default: 10
seealso:
  - module: fuzz.multinode.fuzzfile
"""

EXAMPLES = r"""
- name: Read the job
  fuzz.multinode.fuzzfile:
    path: "{{ playbook_dir }}/generic-multinode.yml"
  delegate_to: localhost
  run_once: true
  register: fuzzfile

- name: Collect the job's nodes in rank order (facts of the compute group gathered)
  ansible.builtin.set_fact:
    job_nodes: >-
      {{ job_nodes | default([])
         + [{'node': item, 'address': hostvars[item].ansible_default_ipv4.address}] }}
  loop: "{{ groups['compute'][:fuzzfile.job.nodes] }}"
  run_once: true

- name: Plan its ranks on those nodes
  fuzz.multinode.rank_plan:
    job: "{{ fuzzfile.job }}"
    nodes: "{{ job_nodes }}"
  delegate_to: localhost
  run_once: true
  register: plan

- name: Plan with an explicit node list
  fuzz.multinode.rank_plan:
    job: "{{ fuzzfile.job }}"
    nodes:
      - node: node-1
        address: 172.18.0.2
      - node: node-2
        address: 172.18.0.3
    user: fuzz
  delegate_to: localhost
  run_once: true
  register: plan

- name: Show the head's command line
  ansible.builtin.debug:
    msg: "{{ plan.spec.argv | join(' ') }}"
"""

RETURN = r"""
spec:
  description:
    - The job spec (see C(docs/design.md), "The job spec"), written as JSON to every node
      of the job.
  returned: success
  type: dict
  contains:
    job:
      description: The job's name.
      type: str
      returned: success
      sample: generic-multinode
    user:
      description: The user that runs the job's processes.
      type: str
      returned: success
      sample: fuzz
    mode:
      description: V(command) (run RV(spec.argv)) or V(script) (run RV(spec.script) with RV(spec.argv) as arguments).
      type: str
      returned: success
      sample: command
    argv:
      description:
        - Command mode, C(command + args) expanded; script mode, C(args) expanded.
      type: list
      elements: str
      returned: success
      sample: [mpirun, -H, "generic-multinode-0:2,generic-multinode-1:2", -np, "4", mpi_hello_world]
    script:
      description: The script text in script mode, else V(null).
      type: str
      returned: success
      sample: null
    cwd:
      description: Working directory of the head command (the job's C(cwd), default V(/)).
      type: str
      returned: success
      sample: /
    kill_grace:
      description: Seconds between SIGTERM and SIGKILL at cleanup.
      type: int
      returned: success
      sample: 10
    implementation:
      description: V(generic), or V(null) for a job without C(multinode).
      type: str
      returned: success
      sample: generic
    nodes:
      description: Number of nodes (ranks).
      type: int
      returned: success
      sample: 2
    slots_per_node:
      description: Slots per node, C(procs-per-node), else C(cores), else V(1).
      type: int
      returned: success
      sample: 2
    total_slots:
      description: Nodes times slots per node (C(MULTINODE_TOTAL_SLOTS)).
      type: int
      returned: success
      sample: 4
    unsupported:
      description: Job features that are ignored, including job C(env) entries overridden by the runtime.
      type: list
      elements: str
      returned: success
      sample: []
    ranks:
      description: One entry per rank, in rank order.
      type: list
      elements: dict
      returned: success
      contains:
        rank:
          description: The rank number.
          type: int
        name:
          description: The rank's host name, C(<job>-<rank>).
          type: str
        node:
          description: The inventory host that runs the rank.
          type: str
        address:
          description: The node's IP address.
          type: str
        slots:
          description: Slots of this rank.
          type: int
        env:
          description: The rank's environment (job C(env) plus runtime variables).
          type: dict
      sample:
        - rank: 0
          name: generic-multinode-0
          node: node-1
          address: 172.18.0.2
          slots: 2
          env:
            HOSTNAME: generic-multinode-0
            RANK: "0"
            MULTINODE_HOSTLIST: "generic-multinode-0:2,generic-multinode-1:2"
        - rank: 1
          name: generic-multinode-1
          node: node-2
          address: 172.18.0.3
          slots: 2
          env:
            HOSTNAME: generic-multinode-1
            RANK: "1"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils.rank_env import plan_job


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            job=dict(type="dict", required=True),
            nodes=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    node=dict(type="str", required=True),
                    address=dict(type="str", required=True),
                ),
            ),
            user=dict(type="str", default="fuzz"),
            wrapper_path=dict(type="str", default="/multinode/ssh-wrapper"),
            kill_grace=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    job = module.params["job"]
    try:
        spec = plan_job(
            job,
            module.params["nodes"],
            user=module.params["user"],
            wrapper_path=module.params["wrapper_path"],
            kill_grace=module.params["kill_grace"],
        )
    except FuzzfileError as exc:
        module.fail_json(msg=to_native(exc))

    known = set(job.get("unsupported") or [])
    for note in spec["unsupported"]:
        if note not in known:
            module.warn(note)

    module.exit_json(changed=False, spec=spec)


if __name__ == "__main__":
    main()
