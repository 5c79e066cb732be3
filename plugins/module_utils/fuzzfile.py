# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Fuzzfile model: parse, validate and normalize a Fuzzball workflow.

Pure Python (standard library and PyYAML); it does not import Ansible, so unit
tests use it directly and modules import it as module_utils. This module is
the model's public face; the code lives in the private package ``_fuzzfile``,
one concept per module (see its ``__init__``).

Entry points:

- ``read_fuzzfile_text(path)`` and ``parse_workflow(text)`` -> ``Workflow``:
  one YAML document, validated strictly (unknown keys are errors, as in the
  vendor's API) and normalized: defaults merged into every job and service,
  dependencies checked (no dangling names, no cycles);
- ``Workflow.order`` / ``Workflow.waves``: the dependency DAG in execution
  order (see ``dependency_order``);
- ``select_run(workflow, name)``, ``select_job(workflow, name)`` -> the jobs
  and services to run (``Job``, its ``kind`` saying which);
- ``admit(job, secret_names, registry_secret_names)``: the run policy's
  gate, once per job and run (``require_runnable``: every implementation but
  ``gasnet`` runs; ``check_rank_names``; ``check_secrets``;
  ``check_registry_secret``); ``admission`` records it in the
  job's JSON form, and ``admit_once`` does not check an admitted job again;
- ``Job.to_dict()`` and ``Workflow.to_dict()``: the JSON forms passed between
  tasks; ``load_job`` and ``load_workflow`` read them back, checked, and
  ``load_endpoints`` a service's endpoints;
- ``transfer_plan(workflow, run)``: the ingress and egress of a run's
  volumes; ``check_transfer_secrets``: their credentials are defined and
  of the form their end takes;
- ``parse_go_duration`` and ``parse_memory_size``: the value syntaxes.

Every bad input raises ``FuzzfileError`` whose message starts with the path of
the offending field (``jobs.solve.multinode.nodes: must be an integer >= 1,
got 0``) or, for YAML errors, with the position (``line 4, column 3: ...``).
A dependency cycle is reported as ``jobs: dependency cycle: a -> b -> a``.
"""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.graph import dependency_order
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.job_form import load_job, load_workflow
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    AFFINITIES,
    DEPENDENCY_STATUSES,
    IMPLEMENTATIONS,
    RESTART_POLICIES,
    SECRET_PREFIX,
    TASK_ARRAY_MAX_CONCURRENCY,
    VERSIONS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.loader import HAS_YAML, read_fuzzfile_text
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import (
    Dependency,
    Endpoint,
    Job,
    Port,
    TaskArray,
    Transfer,
    Volume,
    Workflow,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.network import load_endpoints
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.parser import parse_workflow
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.policy import (
    ADMISSION_KEY,
    MULTINODE_VARS,
    SECRET_ARGUMENTS,
    admission,
    admit,
    admit_once,
    check_rank_names,
    check_registry_secret,
    check_secret_arguments,
    check_secrets,
    image_secret_name,
    missing_secrets,
    not_executed_yet,
    rank_name,
    registry_credentials,
    registry_secret_names,
    require_runnable,
    reserved_env,
    secret_arguments,
    secret_references,
    select_job,
    select_run,
    task_name,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.quantities import (
    parse_go_duration,
    parse_memory_size,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.transfers import (
    check_transfer_secrets,
    s3_credentials,
    s3_secret_names,
    transfer_plan,
    transfer_secrets,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.transfers import (
    relative_path as volume_relative_path,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import validate_job_name

__all__ = [
    "ADMISSION_KEY",
    "AFFINITIES",
    "DEPENDENCY_STATUSES",
    "Dependency",
    "Endpoint",
    "FuzzfileError",
    "HAS_YAML",
    "IMPLEMENTATIONS",
    "Job",
    "MULTINODE_VARS",
    "Port",
    "RESTART_POLICIES",
    "SECRET_ARGUMENTS",
    "SECRET_PREFIX",
    "TASK_ARRAY_MAX_CONCURRENCY",
    "TaskArray",
    "Transfer",
    "VERSIONS",
    "Volume",
    "Workflow",
    "admission",
    "admit",
    "admit_once",
    "check_rank_names",
    "check_registry_secret",
    "check_secret_arguments",
    "check_secrets",
    "check_transfer_secrets",
    "dependency_order",
    "image_secret_name",
    "load_endpoints",
    "load_job",
    "load_workflow",
    "missing_secrets",
    "not_executed_yet",
    "parse_go_duration",
    "parse_memory_size",
    "parse_workflow",
    "rank_name",
    "read_fuzzfile_text",
    "registry_credentials",
    "registry_secret_names",
    "require_runnable",
    "reserved_env",
    "s3_credentials",
    "s3_secret_names",
    "secret_arguments",
    "secret_references",
    "select_job",
    "select_run",
    "task_name",
    "transfer_plan",
    "transfer_secrets",
    "validate_job_name",
    "volume_relative_path",
]
