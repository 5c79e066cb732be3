# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_job: a job's registration on one
node, through the node runtime's `prepare` and `cleanup` subcommands, one
command over the host's connection each (no module is shipped); what it
asks is module_utils/node_runtime.py's node_job_call, as for the module.

state=present registers the job with its spec and, in the same command,
the values of its secrets (stdin only: never in a result). A node that
refuses the job answers `refused` with the node's reason.

state=absent stops the job's processes there and unregisters it; the
answer carries the logs of the job's ranks on the node (up to the runtime's
inline budget; larger ones are fetched from the paths it reports), which
are written to `logs` on the controller under the runtime's names, and the
job log is fetched to `job_log` when given (the head: launch_job did not
stream all of it)."""

from __future__ import annotations

import base64
import os

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    NODE_JOB_ARGUMENT_SPEC,
    RuntimeRefused,
    node_job_call,
    registered,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.node_runtime_call import call_runtime


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _, params = self.validate_argument_spec(argument_spec=NODE_JOB_ARGUMENT_SPEC)
        try:
            call, stdin = node_job_call(params, params["node"] or task_vars.get("inventory_hostname", ""),
                                        logs=True)
            answer = call_runtime(self, call, in_data=stdin, runtime=params["runtime"])
        except RuntimeRefused as exc:
            result.update(failed=True, msg=str(exc))
            if params["state"] == "present":
                result["refused"] = str(exc)
            return result
        result.update(registered(answer) if params["state"] == "present" else self._bring_home(params, answer))
        return result

    def _bring_home(self, params, answer):
        """The cleanup answer, with the logs it names written to the
        controller: the playbook user's only (directories 0700, files 0600),
        as the job may have printed anything."""
        written = {}
        for entry in answer.pop("logs", []):
            if not params["logs"]:
                break
            dest = os.path.join(params["logs"], entry["name"])
            os.makedirs(params["logs"], 0o700, exist_ok=True)
            with _private(dest) as handle:
                if "data" in entry:
                    handle.write(base64.b64decode(entry["data"]))
            if "data" not in entry:
                self._connection.fetch_file(entry["path"], dest)  # into the 0600 file made
            written[str(entry["rank"])] = dest
        job_log = answer.pop("job_log", None)
        if job_log and params["job_log"]:
            os.makedirs(os.path.dirname(params["job_log"]) or ".", 0o700, exist_ok=True)
            _private(params["job_log"], truncate=False).close()
            self._connection.fetch_file(job_log["path"], params["job_log"])
        answer["logs"] = written
        return answer


def _private(path, truncate=True):
    """`path` opened for writing, made the playbook user's only (0600, also
    when it was there from an earlier run)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0), 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")
