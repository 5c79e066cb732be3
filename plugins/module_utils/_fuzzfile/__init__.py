# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Fuzzfile model's modules (private: import what callers use from
``plugins/module_utils/fuzzfile.py``). One concept per module:

- ``errors``: ``FuzzfileError``;
- ``loader``: Fuzzfile bytes to text, text to YAML data (the YAML dialect);
- ``values``: validators of single values (types, names, env entries);
- ``quantities``: the size and Go duration syntaxes;
- ``keys``: the keys of every section, enumerated values, feature notes;
- ``model``: ``Job``, ``Workflow`` and their JSON forms (``to_dict``);
- ``graph``: the dependency graph (order, waves, cycles, dangling names);
- ``settings``: the mergeable settings (env, mounts, resource, policy) and
  ``defaults``;
- ``files_volumes``: top-level ``files``, ``file://`` references, ``volumes``;
- ``transfers``: a volume's ``ingress`` and ``egress`` (their ends, a run's
  transfers and their credentials);
- ``network``: ``network`` sections and readiness probes;
- ``parser``: ``parse_workflow``, a Fuzzfile's text to a ``Workflow``;
- ``job_form``: a job or workflow from its JSON form, checked (a task's
  argument);
- ``policy``: which jobs a run runs and whether a job may run (``admit``).
"""
