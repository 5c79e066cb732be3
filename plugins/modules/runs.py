#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: runs
short_description: List, look at and cancel the runs recorded on this controller
version_added: 0.2.0
description:
  - >-
    Reads the run records that C(fuzz.multinode.run_record) writes (C(~/.fuzz-multinode/runs) unless
    O(runs_dir)): the work of the collection's playbooks C(runs), C(status), C(logs) and C(cancel).
  - >-
    O(command=list) shows every run of the user, newest first (run, workflow, state, started,
    duration); O(command=status) a run's per-job table (and per-rank tables); O(command=logs) a job's
    log as the foreground run showed it (C([job] line)), with O(follow) until the job has ended;
    O(command=cancel) stops a running run as Ctrl-C of its C(ansible-playbook) would (SIGINT: it
    cancels its jobs on every host and cleans up), waits up to O(wait) seconds for it to end, and
    records who canceled it; O(command=show) only answers the run's state.
  - >-
    A run whose C(ansible-playbook) is gone while its record says V(RUNNING) (killed, or the machine
    rebooted) is V(LOST) from then on (V(CANCELED) when a cancel asked for it).
  - >-
    An unknown run id, a run of another user, a cancel of a run that is not running and a corrupt
    record fail the task with a message saying so.
  - Runs on the controller only (an action plugin).
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  command:
    description: What to do.
    type: str
    required: true
    choices: [list, status, logs, cancel, show]
  run:
    description: The run's id (all but O(command=list)).
    type: str
  job:
    description: The job whose log O(command=logs) shows; by default the run's only job, or its running one.
    type: str
  follow:
    description: O(command=logs) shows what the job prints next too, until it has ended.
    type: bool
    default: false
  wait:
    description: Seconds O(command=cancel) waits for the run to end.
    type: int
    default: 180
extends_documentation_fragment:
  - fuzz.multinode.run_records
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
  - module: fuzz.multinode.run_record
"""

EXAMPLES = r"""
- name: Show a run's jobs
  fuzz.multinode.runs:
    command: status
    run: 20261204T080102Z-a1b2c3
"""

RETURN = r"""
runs:
  description: Every run, newest first (O(command=list)).
  returned: O(command=list)
  type: list
  elements: dict
state:
  description: The run's record (its C(state.json)).
  returned: all but O(command=list)
  type: dict
record:
  description: The record's directory.
  returned: all but O(command=list)
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import RUNS_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=RUNS_ARGUMENT_SPEC)
    module.fail_json(msg="fuzz.multinode.runs runs as an action plugin only")


if __name__ == "__main__":
    main()
