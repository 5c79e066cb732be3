# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Documentation shared by the controller-side task modules (fuzzfile,
rank_plan): how far they support each attribute (the attributes
fragment says what each means) and the secret_names and
registry_secret_names options
(module_utils/controller_tasks.py holds their shared argument spec)."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  secret_names:
    description:
      - >-
        The names of the secrets that can be given to the jobs (the keys of
        C(fuzz_multinode_secrets)). When given, a job whose C(env) has a
        C(secret://NAME) value with a NAME not in this list fails the module, naming the
        job, the C(env) key and the reference, before any host is touched.
      - >-
        So does a job whose C(image.secret) is C(secret://NAME) with a NAME not in this list.
      - Names only; secret values never pass through this module.
    type: list
    elements: str
  registry_secret_names:
    description:
      - >-
        The names of the secrets whose values are registry credentials: a mapping of
        C(username) and C(password), both non-empty strings, the user name without C(:)
        (the filter C(fuzz.multinode.registry_secret_names) picks them out of
        C(fuzz_multinode_secrets)). When given, a job whose C(image.secret) names a
        secret not in this list fails the module, naming the job, the field and the
        reference, before any host is touched.
      - Names only; secret values never pass through this module.
    type: list
    elements: str
attributes:
  action:
    details: The action plugin does all the work in the controller's own process.
    support: full
  check_mode:
    support: full
  diff_mode:
    support: none
"""
