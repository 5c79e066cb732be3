# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The plan's settings: the ``rank_plan`` task's options that come from the
role's variables (the job user, the wrapper's path, the kill grace, the
claim lease, where the ranks run, where the volumes are and whether the
nodes share them, a service's ready timeout), their defaults, and
``check_options``, which refuses a bad one naming it (and its role
variable) before anything is rendered.

Pure Python (standard library only); it does not import Ansible.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError

__all__ = [
    "CLAIM_LEASE",
    "EXECUTIONS",
    "SERVICE_READY_TIMEOUT",
    "VOLUME_ROOT",
    "VOLUME_SHARINGS",
    "check_options",
]

CLAIM_LEASE = 120  # the role's fuzz_multinode_claim_lease; the runtime's spec.CLAIM_LEASE
# The role's fuzz_multinode_service_ready_timeout: seconds a service may take
# to become ready before it is given up.
SERVICE_READY_TIMEOUT = 300
# Where a job's ranks run (fuzz_multinode_execution).
EXECUTIONS = ("container", "host")
# Where the nodes keep volumes (fuzz_multinode_volume_root), and whether it
# is storage the nodes share (fuzz_multinode_volume_sharing).
VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"
VOLUME_SHARINGS = ("auto", "shared", "node-local")
_VOLUME_ROOT_RE = re.compile(r"^/[A-Za-z0-9._+/-]*[A-Za-z0-9._+-]$")
_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")
_WRAPPER_RE = re.compile(r"/[A-Za-z0-9._+/-]*\Z")


def check_options(
    *,
    user: Any,
    wrapper_path: Any,
    kill_grace: Any,
    claim_lease: Any,
    execution: Any,
    volume_root: Any,
    volume_sharing: Any,
    service_ready_timeout: Any,
) -> None:
    """Raise FuzzfileError naming the first option that is not of its form."""
    if not isinstance(user, str) or not _USER_RE.match(user):
        raise FuzzfileError("user: must be a user name (e.g. 'fuzz'), got %r" % (user,))
    if not isinstance(wrapper_path, str) or not _WRAPPER_RE.match(wrapper_path):
        raise FuzzfileError(
            "wrapper_path: must be an absolute path of letters, digits and ._+-/, got %r"
            % (wrapper_path,)
        )
    if isinstance(kill_grace, bool) or not isinstance(kill_grace, int) or kill_grace < 0:
        raise FuzzfileError("kill_grace: must be an integer >= 0, got %r" % (kill_grace,))
    if isinstance(claim_lease, bool) or not isinstance(claim_lease, int) or claim_lease < 1:
        raise FuzzfileError(
            "claim_lease (fuzz_multinode_claim_lease): must be a positive integer of seconds, "
            "got %r" % (claim_lease,)
        )
    if execution not in EXECUTIONS:
        raise FuzzfileError(
            "execution (fuzz_multinode_execution): must be one of %s, got %r"
            % (", ".join(EXECUTIONS), execution)
        )
    if (not isinstance(volume_root, str) or not _VOLUME_ROOT_RE.match(volume_root)
            or "/../" in volume_root + "/" or "/./" in volume_root + "/"):
        raise FuzzfileError(
            "volume_root (fuzz_multinode_volume_root): must be an absolute path of letters, "
            "digits and ._+-/ other than /, got %r" % (volume_root,)
        )
    if volume_sharing not in VOLUME_SHARINGS:
        raise FuzzfileError(
            "volume_sharing (fuzz_multinode_volume_sharing): must be one of %s, got %r"
            % (", ".join(VOLUME_SHARINGS), volume_sharing)
        )
    if (isinstance(service_ready_timeout, bool) or not isinstance(service_ready_timeout, int)
            or service_ready_timeout < 1):
        raise FuzzfileError(
            "service_ready_timeout (fuzz_multinode_service_ready_timeout): must be a positive "
            "integer of seconds, got %r" % (service_ready_timeout,)
        )
