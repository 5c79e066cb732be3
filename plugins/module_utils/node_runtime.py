# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The controller's side of the node runtime's subcommands: where the
runtime is installed on every node, the command line of a subcommand, what
each task of the collection asks it (node_job, launch_job), and how its
answer reads. The controller's plugins and roles reach a node's job state
only through these subcommands (the runtime's
files/multinode-runtime/multinode_runtime/cli.py lists them).

Each task's action plugin (on the controller, over the host's connection)
and its module (on the node itself) both call the functions here: what a
task asks and how an answer is read are written once."""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import VOLUME_ROOT

# The fuzz.multinode.node role installs the runtime here (the node_state
# module reports it to the role).
RUNTIME_PATH = "/opt/fuzz-multinode/multinode-runtime"
PYTHON = "/usr/bin/python3"
# What the runtime puts before its error messages on stderr.
PREFIX = "multinode-runtime: "

# What fuzz.multinode.node_state can ask a node's Python (a Python's start
# is the check's largest cost on a busy node: only when asked).
NODE_FACTS = ("devices", "boto3")

# The options of fuzz.multinode.node_state, for its module and its action
# plugin alike.
NODE_STATE_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    fingerprint=dict(type="str", required=True),
    installed=dict(type="list", elements="path", default=[]),
    nodes=dict(type="list", elements="str", default=[]),
    local=dict(type="bool", default=False),
    facts=dict(type="list", elements="str", choices=list(NODE_FACTS), default=list(NODE_FACTS)),
)

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
    interrupt_ends_run=dict(type="bool", default=True),
)

# The options of fuzz.multinode.launch_job, likewise.
LAUNCH_JOB_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    job=dict(type="str", required=True),
    run=dict(type="str"),
    runtime=dict(type="path"),
    controller_timeout=dict(type="int", default=60),
    poll=dict(type="float", default=1),
    log_file=dict(type="path"),
    rank_logs=dict(type="path"),
    progress_every=dict(type="float", default=30),
    refused=dict(type="list", elements="str", default=[]),
    ready_file=dict(type="path"),
    stop_file=dict(type="path"),
    interrupt_ends_run=dict(type="bool", default=True),
    # The run record (run_record.py) an interrupt that ends the run marks
    # CANCELED ("": none).
    record=dict(type="str", default=""),
)

# The options of fuzz.multinode.run_volumes, likewise.
RUN_VOLUMES_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    run=dict(type="str", required=True),
    volume_root=dict(type="str", default=VOLUME_ROOT),
    state=dict(type="str", choices=["absent"], default="absent"),
)

# The options of fuzz.multinode.volume_transfers, likewise.
VOLUME_TRANSFERS_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    direction=dict(type="str", required=True, choices=["ingress", "egress"]),
    transfers=dict(type="list", elements="dict", required=True),
    hosts=dict(type="list", elements="str", required=True),
    run=dict(type="str", required=True),
    volume_root=dict(type="str", default=VOLUME_ROOT),
    volume_sharing=dict(type="str", default="auto", choices=["auto", "shared", "node-local"]),
    user=dict(type="str", default="fuzz"),
    files=dict(type="dict", default={}),
    secrets=dict(type="dict", default={}, no_log=True),
    s3_endpoint_url=dict(type="str", default=""),
    egress_dir=dict(type="path"),
    progress_every=dict(type="float", default=30),
)

# Details of the runtime's start answer that are not part of the job's result.
START_DETAILS = ("started", "pid", "kill_grace")


class RuntimeRefused(Exception):
    """The runtime answered with an error (its message, without prefix)."""


def runtime_argv(subcommand: str, *args: object, runtime: str = RUNTIME_PATH) -> List[str]:
    """The argv of `multinode-runtime SUBCOMMAND ARGS...` on a node."""
    return [PYTHON, "-I", runtime, subcommand] + [str(arg) for arg in args]


def runtime_command(subcommand: str, *args: object, runtime: str = RUNTIME_PATH) -> str:
    """The same as one shell command line."""
    return " ".join(shlex.quote(word) for word in runtime_argv(subcommand, *args, runtime=runtime))


def runtime_answer(rc: Optional[int], stdout: str, stderr: str, subcommand: str = "") -> Dict[str, Any]:
    """The JSON answer of a runtime subcommand that exited with `rc` and
    printed `stdout` and `stderr` (through ssh, sudo or a shell, which may
    add lines of their own). Raises RuntimeRefused with the runtime's own
    message (its last one) when it failed, or when it gave no answer."""
    if rc != 0:
        said = (stderr or stdout or "").strip()
        lines = [line for line in said.splitlines() if line.startswith(PREFIX)]
        message = lines[-1][len(PREFIX):] if lines else said
        raise RuntimeRefused(message or "multinode-runtime %s exited with status %s" % (subcommand, rc))
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                answer = json.loads(line)
            except ValueError:
                break
            if isinstance(answer, dict):
                return answer
            break
    raise RuntimeRefused("multinode-runtime %s gave no answer: %s" % (subcommand, stdout.strip()[-500:]))


def run_here(call: Sequence[object], stdin: Optional[bytes] = None, runtime: Optional[str] = None) -> Dict[str, Any]:
    """A module's way to ask: run the subcommand `call` (its name and
    arguments) on this host and read its answer (runtime_answer)."""
    done = subprocess.run(runtime_argv(str(call[0]), *call[1:], runtime=runtime or RUNTIME_PATH),
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, check=False)
    return runtime_answer(done.returncode, done.stdout.decode(errors="replace"),
                          done.stderr.decode(errors="replace"), str(call[0]))


def _run_options(params: Mapping[str, Any]) -> List[str]:
    return ["--run", params["run"]] if params.get("run") else []


def node_job_call(params: Mapping[str, Any], node: str, logs: bool) -> Tuple[List[str], Optional[bytes]]:
    """What fuzz.multinode.node_job asks the runtime on `node` (its name in
    the job spec): the subcommand with its arguments, and its stdin.
    state=present registers the job (`prepare`; the secrets' values only
    on stdin), state=absent unregisters it (`cleanup`; with `logs`, its
    answer carries the logs of the job's ranks there, and the job log's
    path when `job_log` is set). Raises RuntimeRefused for a spec that is
    not the job's, or not its run's."""
    job = params["job"]
    if params["state"] == "absent":
        flags = (["--logs"] + (["--job-log"] if params.get("job_log") else [])) if logs else []
        return ["cleanup", job] + _run_options(params) + flags, None
    spec = params.get("spec")
    if not spec or spec.get("job") != job:
        raise RuntimeRefused("spec: the job spec of job %s is required with state=present" % job)
    if params.get("run") is not None and spec.get("run") != params["run"]:
        raise RuntimeRefused("spec: the spec is of run %s, not of run %s" % (spec.get("run"), params["run"]))
    if params.get("secrets") is not None:
        return (["prepare", "--node", node, "--secrets"],
                json.dumps({"spec": spec, "secrets": params["secrets"]}).encode())
    return ["prepare", "--node", node], json.dumps(spec).encode()


def registered(answer: Mapping[str, Any]) -> Dict[str, Any]:
    """node_job's result for the runtime's answer to `prepare`."""
    return dict(changed=True, job=answer.get("job"), node=answer.get("node"), run=answer.get("run"))


def control_call(subcommand: str, params: Mapping[str, Any], wait: float, log_offset: int) -> List[str]:
    """What fuzz.multinode.launch_job asks the head: `start` (the job's
    supervisor, with the controller timeout) or `status`, waiting up to
    `wait` seconds for the job's end, with the job log from `log_offset`."""
    options: List[str] = []
    if subcommand == "start":
        options = ["--controller-timeout", str(int(params.get("controller_timeout") or 0))]
    return ([subcommand, params["job"]] + _run_options(params) + options
            + ["--wait", str(wait), "--log-offset", str(log_offset)])


def head_call(subcommand: str, params: Mapping[str, Any], *arguments: str) -> List[str]:
    """launch_job's `cancel` (with the reason) or `cleanup --everywhere`, on the head."""
    return [subcommand, params["job"]] + _run_options(params) + list(arguments)


def refusal(job: str, refused: Sequence[str]) -> Dict[str, Any]:
    """launch_job's result for a job that its nodes refused (their reasons):
    it never starts."""
    return dict(job=job, status="FAILED", message="; ".join(refused), changed=False)


def job_result(answer: Mapping[str, Any]) -> Dict[str, Any]:
    """launch_job's result (or its next poll's) for the runtime's `start`
    or `status` answer, without the job log's piece it carries."""
    return {key: value for key, value in answer.items()
            if key not in START_DETAILS and key not in ("log_data", "log_size")}
