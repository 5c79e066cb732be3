# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The options that say where the run records are (runs_dir: run_record,
runs) and which record a task writes to (RECORD: run_record,
workflow_jobs, launch_job; each module's description says what it
writes there)."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  runs_dir:
    description: Where run records are (C(fuzz_multinode_runs_dir)); empty, C(~/.fuzz-multinode/runs).
    type: str
    default: ""
"""

    RECORD = r"""
options:
  record:
    description: >-
      The run's record directory on the controller (RV(fuzz.multinode.run_record#module:record) of
      C(fuzz.multinode.run_record) O(fuzz.multinode.run_record#module:event=open)); empty, no record.
    type: str
    default: ""
"""
