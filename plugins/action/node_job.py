# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_job: a job's registration on one
node, through the node runtime's `prepare` and `cleanup` subcommands, one
command over the host's connection each (no module is shipped); what it
asks is module_utils/node_runtime.py's node_job_call, as for the module.

state=present registers the job with its spec and, in the same command,
the values of its secrets (stdin only: never in a result). A node that
refuses the job answers `refused` with the node's reason. A Ctrl-C or
SIGTERM meanwhile (registering pulls the job's image, which may take
minutes) does not end this process before the node has answered: the node
finishes the registration whatever happens here, its container running,
and no play comes to undo it; this process then unregisters the job there
(`cleanup` of this run) and ends as Ansible would have ended it. So it does
when the ansible-playbook process was killed meanwhile (this worker, in a
session of its own, outlives it).

state=absent stops the job's processes there and unregisters it, to the
end whatever happens here (a Ctrl-C or SIGTERM meanwhile is acted on once
the node has answered); the answer carries the logs of the job's ranks on the node (up to the runtime's
inline budget; larger ones are fetched from the paths it reports), which
are written to `logs` on the controller under the runtime's names, and the
job log is fetched to `job_log` when given (the head: launch_job did not
stream all of it)."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    NODE_JOB_ARGUMENT_SPEC,
    RuntimeRefused,
    node_job_call,
    registered,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.interrupts import Signals, best_effort
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_logs import bring_home
from ansible_collections.fuzz.multinode.plugins.plugin_utils.node_runtime_call import call_runtime


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=NODE_JOB_ARGUMENT_SPEC)
        node = params["node"] or task_vars.get("inventory_hostname", "")
        playbook_pid = os.getppid()
        # Registering pulls the image (minutes, maybe); a teardown once begun
        # must finish, killed halfway it would leave the job registered. A
        # signal meanwhile is acted on once the node has answered.
        signals = Signals().install()
        try:
            self._request(result, params, node)
        finally:
            signals.restore()
        if params["state"] == "present":
            if signals.received is not None:
                self._unregister(params, node)
            elif os.getppid() != playbook_pid:
                self._unregister(params, node)
                result.update(failed=True, msg="job %s unregistered on %s: the playbook process ended"
                              % (params["job"], node))
        if signals.received is not None:
            signals.end_as_ansible_would()
        return result

    def _request(self, result, params, node):
        """The runtime's prepare or cleanup on the node; its answer (or
        refusal) into `result`."""
        try:
            call, stdin = node_job_call(params, node, logs=True)
            answer = call_runtime(self, call, in_data=stdin, runtime=params["runtime"])
        except RuntimeRefused as exc:
            result.update(failed=True, msg=str(exc))
            if params["state"] == "present":
                result["refused"] = str(exc)
            return
        result.update(registered(answer) if params["state"] == "present"
                      else bring_home(self._connection, answer, params["logs"], params["job_log"]))

    def _unregister(self, params, node):
        """The play was interrupted while the node registered the job: undo
        the registration there (a job another run holds is left alone),
        best effort and bounded; when the run ends with it, its ephemeral
        volumes there too."""
        spec = params.get("spec") or {}
        call, _unused = node_job_call(dict(params, state="absent", run=params.get("run") or spec.get("run")), node,
                                      logs=False)
        call += ["--run-volumes"] if params["interrupt_ends_run"] else []
        grace = spec.get("kill_grace", 10)
        best_effort(int(grace) + 30, lambda: call_runtime(self, call, runtime=params["runtime"]))
