#!/usr/bin/python
# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Register a job on a node, or unregister it and bring its logs home."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_job
short_description: Register a multinode job on a node, or stop and unregister it
version_added: 0.2.0
description:
  - With O(state=present), registers the job on the node for its run (the
    node runtime's C(prepare)) - its spec, its rank host names, its files -
    after the node checked that it can run its part; with O(secrets), the
    values of the job's secrets in the same step. A node that refuses the
    job (its files, cwd or resources; another run holding the job) fails the
    task with the node's reason, also returned as RV(refused).
  - With O(state=absent), stops every process of the job on the node and
    unregisters it (the runtime's C(cleanup)); the logs of the job's ranks on
    the node are written to O(logs) on the controller, and the job log to
    O(job_log) when given.
  - The node's job state is the runtime's alone; this module only calls its
    subcommands.
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  job:
    description: Name of the job.
    type: str
    required: true
  run:
    description: The run of the playbook the job belongs to; another run's job is left alone.
    type: str
  state:
    description: V(present) registers the job, V(absent) stops and unregisters it.
    type: str
    choices: [present, absent]
    default: present
  spec:
    description: The job spec (the C(spec) result of M(fuzz.multinode.rank_plan)), for O(state=present).
    type: dict
  secrets:
    description:
      - Values of the job's C(secret://) references by name, for
        O(state=present). Only on the node's stdin, never in a result; use
        C(no_log) on the task.
    type: dict
  logs:
    description: Controller directory the logs of the job's ranks on the node are written to (O(state=absent)).
    type: path
  job_log:
    description: Controller path the job log is fetched to from the head (O(state=absent)).
    type: path
  runtime:
    description: Path of the node runtime; by default where the C(fuzz.multinode.node) role installs it.
    type: path
  node:
    description: The node's name in the job spec; by default the task's inventory host.
    type: str
  interrupt_ends_run:
    description:
      - With O(state=present) - whether a play interrupted while the node
        registers the job ends the job's run with it. The registration is
        then undone with the run's ephemeral volumes on the node, which no
        later task of the play will remove (as M(fuzz.multinode.launch_job)'s
        option of that name).
    type: bool
    default: true
extends_documentation_fragment:
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: The action plugin runs the runtime subcommand over the host's connection and writes the logs.
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Register the job on its nodes
  fuzz.multinode.node_job:
    job: hello
    spec: "{{ plan.spec }}"

- name: Stop and unregister it, with its logs
  fuzz.multinode.node_job:
    job: hello
    state: absent
    logs: "{{ playbook_dir }}/fuzz-logs/hello"
"""

RETURN = r"""
refused:
  description: Why the node refused the job (O(state=present)).
  returned: when the node refused the job
  type: str
killed:
  description: Processes of the job stopped on the node (O(state=absent)).
  returned: with O(state=absent)
  type: int
logs:
  description: Controller paths of the rank logs written, by rank number (O(state=absent)).
  returned: with O(state=absent)
  type: dict
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    NODE_JOB_ARGUMENT_SPEC,
    RuntimeRefused,
    node_job_call,
    registered,
    run_here,
)


def main():
    """Without the action plugin, on the node itself: the same subcommand,
    whose answer's logs stay on the node (O(logs) and O(job_log) are the
    action plugin's)."""
    module = AnsibleModule(argument_spec=NODE_JOB_ARGUMENT_SPEC, supports_check_mode=False)
    params = module.params
    try:
        call, stdin = node_job_call(params, params["node"] or socket.gethostname(), logs=False)
        answer = run_here(call, stdin, runtime=params["runtime"])
    except RuntimeRefused as exc:
        module.fail_json(msg=str(exc), **({"refused": str(exc)} if params["state"] == "present" else {}))
    module.exit_json(**(registered(answer) if params["state"] == "present" else answer))


if __name__ == "__main__":
    main()
