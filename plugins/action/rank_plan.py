# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.rank_plan: plan the job's ranks in the
controller's own process instead of shipping the module to localhost."""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    RANK_PLAN_ARGUMENT_SPEC,
    plan_ranks,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.controller_action import ControllerTaskAction


class ActionModule(ControllerTaskAction):
    ARGUMENT_SPEC = RANK_PLAN_ARGUMENT_SPEC
    work = staticmethod(plan_ranks)
