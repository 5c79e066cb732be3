# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What each attribute of this collection's modules means; a module that
extends this fragment says only how far it supports each one (Ansible
merges the module's entries into these)."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
attributes:
  action:
    description: >-
      Indicates this has a corresponding action plugin so some parts of the
      options can be executed on the controller.
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""
