# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Where the node runtime is installed on every node, and the command line
that runs one of its subcommands there. The controller's plugins and roles
reach a node's job state only through these subcommands (the runtime's
files/multinode-runtime/multinode_runtime/cli.py lists them)."""

from __future__ import annotations

import shlex
from typing import Any, Dict, List

# The fuzz.multinode.node role installs the runtime here (the node_state
# module reports it to the role).
RUNTIME_PATH = "/opt/fuzz-multinode/multinode-runtime"
PYTHON = "/usr/bin/python3"

# The options of fuzz.multinode.node_job, for its module and its action
# plugin alike.
NODE_JOB_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    job=dict(type="str", required=True),
    run=dict(type="str"),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    spec=dict(type="dict"),
    secrets=dict(type="dict", no_log=True),
    logs=dict(type="path"),
    job_log=dict(type="path"),
    runtime=dict(type="path"),
    node=dict(type="str"),
)


def runtime_argv(subcommand: str, *args: object, runtime: str = RUNTIME_PATH) -> List[str]:
    """The argv of `multinode-runtime SUBCOMMAND ARGS...` on a node."""
    return [PYTHON, "-I", runtime, subcommand] + [str(arg) for arg in args]


def runtime_command(subcommand: str, *args: object, runtime: str = RUNTIME_PATH) -> str:
    """The same as one shell command line."""
    return " ".join(shlex.quote(word) for word in runtime_argv(subcommand, *args, runtime=runtime))
