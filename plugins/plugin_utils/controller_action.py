# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The shape of the collection's controller-side action plugins (fuzzfile,
rank_plan): check the task's arguments against the module's argument spec,
then do the module's work in the controller's own process. Shipping a module
to localhost costs about 0.8 s per task; this costs next to nothing."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError


class ControllerTaskAction(ActionBase):
    """Subclasses set ARGUMENT_SPEC and `work`, a function of the validated
    arguments that returns (result, warnings) or raises FuzzfileError with
    the message the task fails with (module_utils/controller_tasks.py)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC: dict = {}

    @staticmethod
    def work(params):
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # Bad arguments fail the task with the validator's message, naming
        # the option, as the module would.
        _unused, params = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            done, warnings = self.work(params)
        except FuzzfileError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(done)
        if warnings:
            result["warnings"] = warnings
        return result
