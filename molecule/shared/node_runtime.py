"""What a node's runtime says it holds of a job, for the scenarios' checks:
`multinode-runtime show [JOB]` on the node (JSON: the run holding the job,
whether it is registered, keeps secret values or host names there, and its
logs; without a job, the jobs registered there). The checks ask the runtime
and never name its files; the runtime's path is the collection's one."""

import json
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT))  # ansible_collections/fuzz/multinode is the checkout
from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (  # noqa: E402
    runtime_argv,
    runtime_command,
)

sys.path.insert(0, str(PROJECT / "files" / "multinode-runtime"))
# The node-side paths, for the scenarios' whole-tree scans (node_runtime.registry).
from multinode_runtime import registry  # noqa: E402,F401  # pylint: disable=unused-import


def show_command(job=None):
    """The shell command that prints what the node holds (of `job`)."""
    return runtime_command("show", *([job] if job else []))


def show(node, job=None):
    """`show` on the container `node`, decoded."""
    done = subprocess.run(["docker", "exec", node] + runtime_argv("show", *([job] if job else [])),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError("multinode-runtime show on %s failed: %s" % (node, done.stderr.strip()))
    return json.loads(done.stdout)


def show_on(host, job=None):
    """`show` through a testinfra host."""
    return json.loads(host.check_output(show_command(job)))


def in_sandbox(node, job):
    """The argv prefix that runs a command (as root) inside the job's
    sandbox on `node`, its PID, mount and IPC namespaces, where every
    process of the job runs: its /proc shows the job's processes by the
    pids they know themselves by."""
    pid = show(node, job)["sandbox"]
    if not pid:
        raise AssertionError("job %s has no sandbox on %s" % (job, node))
    return ["nsenter", "--target", str(pid), "--mount", "--pid", "--ipc", "--"]
