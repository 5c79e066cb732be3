# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""One runtime subcommand on a task's host, from an action plugin: a single
command over the task's connection (as root when the task becomes root),
with no module shipped, and its JSON answer. About a module's cost less per
call: the runtime starts from compiled bytecode. (A module asks the same
from the node itself: node_runtime.run_here.)"""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import runtime_answer, runtime_command


def call_runtime(action, call, in_data=None, runtime=None):
    """The JSON answer of `multinode-runtime SUBCOMMAND ARGS` (`call`: the
    subcommand and its arguments) on the host of `action` (an ActionBase).
    Raises RuntimeRefused with the runtime's message when it fails;
    AnsibleConnectionFailure when the host cannot be reached."""
    options = {"runtime": runtime} if runtime else {}
    done = action._low_level_execute_command(runtime_command(*call, **options), sudoable=True, in_data=in_data)
    return runtime_answer(done.get("rc"), done.get("stdout", ""), done.get("stderr", ""), call[0])
