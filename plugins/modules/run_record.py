#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_record
short_description: Write a run's record on the controller, or start the run in the background
version_added: 0.2.0
description:
  - >-
    The writer of the run record, the directory C(<runs_dir>/<run>/) on the controller that the
    C(fuzz.multinode.runs), C(status), C(logs), C(cancel) and C(resume) playbooks read: the Fuzzfile
    as submitted, the command line (an extra variable whose name says it is a secret, such as
    C(fuzz_multinode_secrets), without its value), and C(state.json), the run's state (V(RUNNING),
    V(FINISHED), V(FAILED), V(CANCELED), V(LOST)) with each job's state, hosts, start and end, exit
    status and ranks, and where its logs are. Private to the user (directories 0700, files 0600),
    each file written whole through a temporary name.
  - >-
    O(event=open) (run-job.yml's first play) makes the record. With O(detach), it makes the record
    and starts the same playbook, with the same options, in the background with C(ansible-runner)
    (its private data directory C(<record>/runner)) in a session of its own, then returns; the run
    survives the end of the terminal and of the submitting playbook. With O(resume), it checks that
    the run can be resumed with the Fuzzfile's jobs as they are now (each job's normalized form
    unchanged) and answers which jobs FINISHED in it (RV(skip)).
  - >-
    O(event=job_started), O(event=job_ended) (the C(fuzz.multinode.workflow) role, for a job it runs
    in the play) and O(event=ended) (how the run ended, from the workflow's outcomes) write to the
    record O(record) names (RV(record) of O(event=open)).
  - Runs on the controller only (an action plugin).
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  event:
    description: What happened.
    type: str
    required: true
    choices: [open, job_started, job_ended, ended]
  run:
    description: The run's id (C(FB_WORKFLOW_ID)).
    type: str
    required: true
  fuzzfile:
    description: The Fuzzfile's path (O(event=open)).
    type: path
  jobs:
    description: The jobs of the run (the C(run) result of C(fuzz.multinode.fuzzfile)), for O(event=open).
    type: list
    elements: dict
    default: []
  log_dir:
    description: Where the run's job logs are written on the controller.
    type: str
    default: ""
  detach:
    description: Start the run in the background and return (O(event=open)).
    type: bool
    default: false
  resume:
    description: Resume the run O(run) (O(event=open)).
    type: bool
    default: false
  job:
    description: The job (O(event=job_started), O(event=job_ended)).
    type: str
  hosts:
    description: The job's hosts, rank 0's first (O(event=job_started)).
    type: list
    elements: str
    default: []
  status:
    description: How the job ended (O(event=job_ended)).
    type: str
  why:
    description: Why it ended so (O(event=job_ended)).
    type: str
    default: ""
  duration:
    description: Seconds the job ran (O(event=job_ended)).
    type: raw
  ranks:
    description: How each rank ran (the C(ranks) result of C(fuzz.multinode.launch_job)).
    type: list
    elements: dict
    default: []
  outcomes:
    description: Every job's outcome (O(event=ended)).
    type: dict
    default: {}
  transfer_failures:
    description: How many of the run's transfers failed (O(event=ended)).
    type: int
    default: 0
extends_documentation_fragment:
  - fuzz.multinode.run_records
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
  - module: fuzz.multinode.runs
"""

EXAMPLES = r"""
- name: Record the run
  fuzz.multinode.run_record:
    event: open
    run: "{{ run_id }}"
    fuzzfile: /home/me/workflow.yml
    jobs: "{{ fuzzfile.run }}"
    log_dir: /home/me/fuzz-logs
  register: record
"""

RETURN = r"""
record:
  description: The record's directory.
  returned: O(event=open)
  type: str
  sample: /home/me/.fuzz-multinode/runs/20261204T080102Z-a1b2c3
skip:
  description: The jobs a resume skips (FINISHED in the run).
  returned: O(event=open)
  type: list
  elements: str
detached:
  description: Whether the run was started in the background.
  returned: O(event=open) with O(detach)
  type: bool
runner_pid:
  description: The pid of the background run's C(ansible-runner).
  returned: O(event=open) with O(detach)
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import RUN_RECORD_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=RUN_RECORD_ARGUMENT_SPEC)
    module.fail_json(msg="fuzz.multinode.run_record runs as an action plugin only")


if __name__ == "__main__":
    main()
