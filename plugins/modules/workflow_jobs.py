#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: workflow_jobs
short_description: Run a workflow's jobs, several at once, each in a playbook of its own
version_added: 0.2.0
description:
  - >-
    The workflow runner of the C(fuzz.multinode.workflow) role. Starts each job of O(jobs) as
    soon as every job it depends on has finished and enough of O(nodes) are free for it: the free
    hosts in their order (rank 0 on the first), each host for one job at a time unless
    O(share_hosts) (or O(local)); at most O(at_once) jobs at once (V(0): as many as the hosts
    allow). A job that mounts a volume keeps to the first hosts when the volume root is each
    node's own storage. A job whose dependencies did not all finish is not run (V(NOT_RUN)),
    naming them.
  - >-
    Each job runs in an C(ansible-playbook) of its own, started with the running playbook's
    inventory and options (without its playbooks, tags and listing options) and the job role's
    O(settings): it runs the job with the C(fuzz.multinode.job) role, which owns the job's life
    as in a run of one job. Its lines are shown as they come, each as C([job] ...); a line
    C([job] started on hosts ...) when it starts. With O(record), each job's state, hosts, ranks
    and times are written there as they change, and a service's C(ready) and C(stopping) times.
  - >-
    Ctrl-C, SIGTERM, or the end of the running playbook's process: every running job is
    canceled on every host (each job's playbook gets SIGINT, as from a terminal), then whatever
    of the run's jobs is left registered, and the run's ephemeral volumes, are removed from its
    hosts; the outcome table is written to the playbook's output.
  - >-
    Runs nothing and answers RV(fallback) when no two jobs could ever run at once (running them
    one at a time is the same run), or when the running playbook asked the terminal for a
    password (C(-k), C(-K), C(--ask-vault-pass), C(--vault-id ...@prompt)), which another
    C(ansible-playbook) cannot ask again.
  - Runs on the controller only (an action plugin); its connection only asks whether the volume
    root is shared storage.
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  jobs:
    description: The jobs to run, in dependency order (the C(run) result of C(fuzz.multinode.fuzzfile)).
    type: list
    elements: dict
    required: true
  nodes:
    description: The hosts jobs may run on, in inventory order, each with its address.
    type: list
    elements: dict
    required: true
    suboptions:
      node:
        description: The inventory host.
        type: str
        required: true
      address:
        description: The address the other nodes reach it by.
        type: str
        default: ""
  node_devices:
    description:
      - How many CDI devices of each kind each host has (the C(fuzz.multinode.node_devices)
        filter), host name to a dict of kind to count; a host absent or null could not
        tell and counts as having enough.
      - A job asking for devices (C(resource.devices)) runs only on hosts with enough for
        its ranks or tasks there; a job on too few such hosts is NOT_RUN, naming them.
    type: dict
    default: {}
  run:
    description: The run's id (C(FB_WORKFLOW_ID)), the same in every job.
    type: str
    required: true
  at_once:
    description: How many jobs may run at once; V(0) as many as the hosts allow.
    type: int
    default: 0
  share_hosts:
    description: Whether jobs of the run may run on the same host at the same time.
    type: bool
    default: false
  local:
    description: Local mode (every job on this one machine, which its jobs share).
    type: bool
    default: false
  settings:
    description: Variables of the C(fuzz.multinode.job) role that each job's playbook gets, by name.
    type: dict
    default: {}
  files:
    description: The workflow's top-level files (name to contents); each job gets those its C(files) use.
    type: dict
    default: {}
  row_format:
    description: >-
      printf-style format of a row of the outcome table (job, status, start, end, seconds, after,
      details); after is what the job waited for (the C(fuzz.multinode.job_after) filter).
    type: str
    default: "%s  %s  %s  %s  %s  %s  %s"
extends_documentation_fragment:
  - fuzz.multinode.volumes
  - fuzz.multinode.volumes.sharing
  - fuzz.multinode.run_records.record
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: The whole work is the action plugin's, on the controller.
  check_mode:
    support: none
  diff_mode:
    support: none
seealso:
  - module: fuzz.multinode.launch_job
"""

EXAMPLES = r"""
- name: Run the workflow's jobs, at once where they can
  fuzz.multinode.workflow_jobs:
    jobs: "{{ fuzzfile.run }}"
    nodes: "{{ groups['multinode'] | fuzz.multinode.rank_nodes(hostvars) }}"
    run: "{{ run_id }}"
  run_once: true
  register: runner
"""

RETURN = r"""
outcomes:
  description: >-
    Each job's outcome, by name: C(status) (FINISHED, FAILED, CANCELED, TIMEOUT, NOT_RUN),
    C(message), C(start) and C(end) (UTC, HH:MM:SS, C(-) for a job not run), C(seconds) (the job's
    own run), C(summary) and C(row) (its row of the outcome table).
  returned: when the jobs ran
  type: dict
fallback:
  description: >-
    Why the jobs must run one at a time in the play instead (empty when that is the same run);
    nothing was run.
  returned: when the runner ran nothing
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import WORKFLOW_JOBS_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=WORKFLOW_JOBS_ARGUMENT_SPEC)
    module.fail_json(msg="fuzz.multinode.workflow_jobs runs as an action plugin only")


if __name__ == "__main__":
    main()
