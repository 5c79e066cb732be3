# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.run_volumes: the node runtime's
`remove-volumes RUN VOLUME_ROOT`, one command over the host's connection."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    RUN_VOLUMES_ARGUMENT_SPEC,
    RuntimeRefused,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.node_runtime_call import call_runtime


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=RUN_VOLUMES_ARGUMENT_SPEC)
        try:
            answer = call_runtime(self, ["remove-volumes", params["run"], params["volume_root"]])
        except RuntimeRefused as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(changed=bool(answer.get("changed")))
        return result
