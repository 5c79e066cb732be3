# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""What the collection's controller-side tasks do: load a Fuzzfile for a run
(``fuzz.multinode.fuzzfile``) and plan a job's ranks
(``fuzz.multinode.rank_plan``).

Each task has a module (documented, usable on any host) and an action
plugin of the same name, which does the same work in the controller's own
process instead of shipping a module to localhost: about 0.8 s less per task,
paid on every job of every run. Both are thin: their argument spec and their
work are defined here, once. The functions return ``(result, warnings)`` and
raise ``FuzzfileError`` with the message the task fails with.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    ADMISSION_KEY,
    SECRET_ARGUMENTS,
    FuzzfileError,
    Job,
    admission,
    admit,
    check_secret_arguments,
    check_transfer_secrets,
    not_executed_yet,
    parse_workflow,
    read_fuzzfile_text,
    select_job,
    select_run,
    transfer_plan,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import (
    CLAIM_LEASE,
    SERVICE_READY_TIMEOUT,
    VOLUME_ROOT,
    VOLUME_SHARINGS,
    plan_job,
    plan_task_array,
)

__all__ = [
    "FUZZFILE_ARGUMENT_SPEC",
    "RANK_PLAN_ARGUMENT_SPEC",
    "WORKFLOW_JOBS_ARGUMENT_SPEC",
    "RUN_RECORD_ARGUMENT_SPEC",
    "RUNS_ARGUMENT_SPEC",
    "load_fuzzfile",
    "plan_ranks",
]

# Documented once for both tasks: plugins/doc_fragments/controller_task.py.
# The names of secrets (keys of fuzz_multinode_secrets), never their values:
# nothing to hide (no_log=False says so to the checkers that ask).
SECRET_NAMES_OPTION: Dict[str, Any] = dict(type="list", elements="str", no_log=False)

FUZZFILE_ARGUMENT_SPEC: Dict[str, Any] = dict(
    path=dict(type="path", required=True),
    job=dict(type="str"),
    secret_names=dict(SECRET_NAMES_OPTION),
    registry_secret_names=dict(SECRET_NAMES_OPTION),
    s3_secret_names=dict(SECRET_NAMES_OPTION),
    # fuzz_multinode_secret_arguments: an argument expanding a secret://
    # env value is run with a warning (allow) or refused (refuse).
    secret_arguments=dict(type="str", default="allow", choices=list(SECRET_ARGUMENTS)),
    inventory_hosts=dict(type="int"),
)


def _nodes_option(address_required: bool) -> Dict[str, Any]:
    """The `nodes` option: the job's hosts in rank order, each with its
    address (the runner's may leave it empty: the job's play finds it)."""
    address = dict(type="str", required=True) if address_required else dict(type="str", default="")
    return dict(type="list", elements="dict", required=True,
                options=dict(node=dict(type="str", required=True), address=address))


RANK_PLAN_ARGUMENT_SPEC: Dict[str, Any] = dict(
    job=dict(type="dict", required=True),
    nodes=_nodes_option(address_required=True),
    user=dict(type="str", default="fuzz"),
    wrapper_path=dict(type="str", default="/multinode/ssh-wrapper"),
    kill_grace=dict(type="int", default=10),
    claim_lease=dict(type="int", default=CLAIM_LEASE),
    files=dict(type="dict"),
    secret_names=dict(SECRET_NAMES_OPTION),
    registry_secret_names=dict(SECRET_NAMES_OPTION),
    local=dict(type="bool", default=False),
    execution=dict(type="str", default="container", choices=["container", "host"]),
    run=dict(type="str", default=""),
    volume_root=dict(type="str", default=VOLUME_ROOT),
    volume_sharing=dict(type="str", default="auto", choices=list(VOLUME_SHARINGS)),
    # The run's services RUNNING when the job starts (the workflow runner's).
    services=dict(type="list", elements="dict", default=[],
                  options=dict(name=dict(type="str", required=True),
                               address=dict(type="str", required=True),
                               endpoints=dict(type="list", elements="dict", default=[]))),
    service_ready_timeout=dict(type="int", default=SERVICE_READY_TIMEOUT),
)

# The options of fuzz.multinode.workflow_jobs (the workflow runner), for its
# module's documentation and its action plugin alike.
WORKFLOW_JOBS_ARGUMENT_SPEC: Dict[str, Any] = dict(
    jobs=dict(type="list", elements="dict", required=True),
    nodes=_nodes_option(address_required=False),
    # Host: its CDI devices by kind (fuzz.multinode.node_devices; absent or
    # null: unknown, enough).
    node_devices=dict(type="dict", default={}),
    run=dict(type="str", required=True),
    at_once=dict(type="int", default=0),
    share_hosts=dict(type="bool", default=False),
    local=dict(type="bool", default=False),
    volume_root=dict(type="str", default=VOLUME_ROOT),
    volume_sharing=dict(type="str", default="auto", choices=list(VOLUME_SHARINGS)),
    settings=dict(type="dict", default={}),
    files=dict(type="dict", default={}),
    row_format=dict(type="str", default="%s  %s  %s  %s  %s  %s  %s"),
    record=dict(type="str", default=""),
)

# The run record's writer (fuzz.multinode.run_record) and reader
# (fuzz.multinode.runs): module_utils/run_record.py, run_views.py.
RUN_RECORD_ARGUMENT_SPEC: Dict[str, Any] = dict(
    event=dict(type="str", required=True, choices=["open", "job_started", "job_ended", "ended"]),
    run=dict(type="str", required=True),
    runs_dir=dict(type="str", default=""),
    record=dict(type="str", default=""),
    fuzzfile=dict(type="path"),
    jobs=dict(type="list", elements="dict", default=[]),
    log_dir=dict(type="str", default=""),
    detach=dict(type="bool", default=False),
    resume=dict(type="bool", default=False),
    job=dict(type="str"),
    hosts=dict(type="list", elements="str", default=[]),
    status=dict(type="str"),
    why=dict(type="str", default=""),
    duration=dict(type="raw"),
    ranks=dict(type="list", elements="dict", default=[]),
    outcomes=dict(type="dict", default={}),
    transfer_failures=dict(type="int", default=0),
)

RUNS_ARGUMENT_SPEC: Dict[str, Any] = dict(
    command=dict(type="str", required=True, choices=["list", "status", "logs", "cancel", "show"]),
    run=dict(type="str"),
    job=dict(type="str"),
    follow=dict(type="bool", default=False),
    runs_dir=dict(type="str", default=""),
    wait=dict(type="int", default=180),
)


def load_fuzzfile(params: Mapping[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """The fuzzfile task: parse and validate the Fuzzfile at ``path``,
    choose the jobs and services to run (``job``, else the whole workflow)
    and the transfers of the volumes they mount (``transfers``)."""
    path = params["path"]
    text = read_fuzzfile_text(path)
    name: Optional[str] = params.get("job")
    secret_names = params.get("secret_names")
    registry_secret_names = params.get("registry_secret_names")
    try:
        workflow = parse_workflow(text)
        run = select_run(workflow, name)
        for job in run:
            # Refused here, before any host is touched, rather than by
            # rank_plan after the nodes were prepared; rank_plan takes the
            # job's admission from its form and does not check it again.
            admit(job, secret_names, registry_secret_names, params.get("secret_arguments") or "allow")
        transfers = transfer_plan(workflow, run)
        check_transfer_secrets(transfers, secret_names, registry_secret_names, params.get("s3_secret_names"))
    except FuzzfileError as exc:
        raise FuzzfileError("%s: %s" % (path, exc)) from None

    check_fits(run, params.get("inventory_hosts"))

    def admitted(job: Job) -> Dict[str, Any]:
        return dict(job.to_dict(), **{ADMISSION_KEY: admission(job, secret_names, registry_secret_names)})

    notes = workflow.warnings + workflow.unsupported
    for job in run:
        notes += job.unsupported + not_executed_yet(job, whole_workflow=name is None) + check_secret_arguments(job)
    result: Dict[str, Any] = dict(
        changed=False, workflow=workflow.to_dict(), run=[admitted(job) for job in run], transfers=transfers
    )
    if name is not None or len(list(workflow.jobs) or workflow.services) == 1:
        # The one named, or the only job (the only service of a workflow
        # of services): its plain form, for any use.
        result["job"] = select_job(workflow, name).to_dict()
    return result, ["%s: %s" % (path, note) for note in notes]


def check_fits(run: Sequence[Job], hosts: Optional[int]) -> None:
    """Every job and service to run fits on `hosts` hosts (None: no limit):
    else one message naming each that does not."""
    if hosts is None:
        return
    too_big = ["%s %s needs %d nodes but the inventory group multinode has %d hosts"
               % (job.kind, job.name, job.nodes, hosts) for job in run if job.nodes > hosts]
    if too_big:
        raise FuzzfileError("; ".join(too_big))


def plan_ranks(params: Mapping[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """The rank_plan task: the job's spec on ``nodes`` (rank order)."""
    job: Mapping[str, Any] = params["job"]
    nodes: Sequence[Mapping[str, Any]] = params["nodes"]
    # A task array's "ranks" are its tasks, placed round-robin on the nodes.
    plan = plan_task_array if job.get("task_array") else plan_job
    spec = plan(
        job,
        nodes,
        user=params["user"],
        wrapper_path=params["wrapper_path"],
        kill_grace=params["kill_grace"],
        claim_lease=params.get("claim_lease", CLAIM_LEASE),
        files=params["files"],
        secret_names=params["secret_names"],
        registry_secret_names=params.get("registry_secret_names"),
        local=params["local"],
        execution=params.get("execution") or "container",
        run=params.get("run") or "",
        volume_root=params.get("volume_root") or VOLUME_ROOT,
        volume_sharing=params.get("volume_sharing") or "auto",
        services=params.get("services") or [],
        service_ready_timeout=params.get("service_ready_timeout", SERVICE_READY_TIMEOUT),
    )
    # The Fuzzfile task warned about the job's own notes already.
    known = set(job.get("unsupported") or [])
    warnings = [note for note in spec["unsupported"] if note not in known]
    return dict(changed=False, spec=spec), warnings
