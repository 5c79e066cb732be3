# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The job spec's parts (private: import what callers use from
``plugins/module_utils/job_spec.py``, which renders the spec). One concept
per module:

- ``options``: the plan's settings (the ``rank_plan`` task's options, the
  role's variables), their defaults, checked;
- ``expansion``: ``$NAME`` expansion of arguments, and the arguments that
  expand a secret;
- ``launcher``: the MPI launcher's argv prefix;
- ``files``: the job's ``files`` as the nodes write them;
- ``resources``: what each rank or task asks of its node.
"""
