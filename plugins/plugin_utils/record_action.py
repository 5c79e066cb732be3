# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The shape of the action plugins around the run records (run_record,
runs): on the controller only, the task's arguments checked against the
module's argument spec, then `work`; a record that cannot be used as
asked fails the task with a message that says why, never a traceback."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.run_record import RecordError


class RecordAction(ActionBase):
    """Subclasses set ARGUMENT_SPEC and `work`, a method of the validated
    arguments that returns what to add to the task's result. RecordError
    (and the other REFUSALS) fail the task with their message, OSError
    with `os_error`'s."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = False
    ARGUMENT_SPEC: dict = {}
    REFUSALS: tuple = (RecordError,)

    def work(self, args):
        raise NotImplementedError

    @staticmethod
    def os_error(args, exc):
        return "run %s: %s" % (args["run"], exc)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            result.update(self.work(args))
        except self.REFUSALS as exc:
            result.update(failed=True, msg=str(exc))
        except OSError as exc:
            result.update(failed=True, msg=self.os_error(args, exc))
        return result
