# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.fuzzfile: load the Fuzzfile in the
controller's own process instead of shipping the module to localhost."""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    FUZZFILE_ARGUMENT_SPEC,
    load_fuzzfile,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.controller_action import ControllerTaskAction


class ActionModule(ControllerTaskAction):
    ARGUMENT_SPEC = FUZZFILE_ARGUMENT_SPEC
    work = staticmethod(load_fuzzfile)
