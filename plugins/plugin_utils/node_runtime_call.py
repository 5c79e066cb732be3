# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""One runtime subcommand on a task's host, from an action plugin: a single
command over the task's connection (as root when the task becomes root),
with no module shipped, and its JSON answer. About a module's cost less per
call: the runtime starts from compiled bytecode."""

from __future__ import annotations

import json

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import runtime_command

PREFIX = "multinode-runtime: "


class RuntimeRefused(Exception):
    """The runtime answered with an error (its message, without prefix)."""


def call_runtime(action, subcommand, *args, in_data=None, runtime=None):
    """The JSON answer of `multinode-runtime SUBCOMMAND ARGS` on the host of
    `action` (an ActionBase). Raises RuntimeRefused with the runtime's
    message when it fails; AnsibleConnectionFailure when the host cannot be
    reached."""
    options = {"runtime": runtime} if runtime else {}
    done = action._low_level_execute_command(runtime_command(subcommand, *args, **options),
                                             sudoable=True, in_data=in_data)
    stdout = done.get("stdout", "")
    if done.get("rc") != 0:
        said = (done.get("stderr") or stdout or "").strip()
        lines = [line for line in said.splitlines() if line.startswith(PREFIX)]
        message = lines[-1][len(PREFIX):] if lines else said
        raise RuntimeRefused(message or "multinode-runtime %s exited with status %s" % (subcommand, done.get("rc")))
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    raise RuntimeRefused("multinode-runtime %s gave no answer: %s" % (subcommand, stdout.strip()[-500:]))
