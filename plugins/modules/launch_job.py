#!/usr/bin/python
# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Run rank 0 of a registered job on the head node and supervise the job."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: launch_job
short_description: Run rank 0 of a multinode job on the head node and supervise it
version_added: 0.1.0
description:
  - Runs the node runtime's head supervisor for a job that was registered on
    every node of the job (M(fuzz.multinode.node_job), done by the
    C(fuzz.multinode.job) role), and waits for the job to end. It asks the
    runtime (its C(start), C(status) and C(cancel) subcommands), never the
    job's files on the head.
  - Rank 0's command or script runs as the job user, with host name
    C(<job>-0), its stdout and stderr appended to the job log on the head.
  - The job fails when rank 0 exits non-zero or as soon as any worker command
    started through the SSH wrapper exits non-zero; every process of the job
    on every node is stopped when the job ends.
  - The supervisor runs detached from the module; the task polls it from the
    controller (an action plugin). When the play is interrupted (SIGINT,
    SIGTERM) or the C(ansible-playbook) process is killed, the task asks the
    supervisor to cancel the job before it ends. When the controller stops
    polling for O(controller_timeout) seconds (it froze, crashed or lost the
    connection), the supervisor cancels the job by itself. Either way every
    process of the job on every node is stopped.
  - The job log is streamed to the controller while the job runs (O(log_file));
    the result carries no log text.
  - The job's result is returned; the task fails when the job fails.
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  job:
    description: Name of the registered job.
    type: str
    required: true
  run:
    description:
      - The run of the playbook the job belongs to (its id, as given to the
        runtime's C(prepare)). A job another run holds on the head is left
        alone.
    type: str
  runtime:
    description:
      - Path of the node runtime on the head; by default where the
        C(fuzz.multinode.node) role installs it.
    type: path
  controller_timeout:
    description:
      - Seconds without a poll from the controller after which the job is
        canceled. V(0) never cancels.
    type: int
    default: 60
  poll:
    description: Seconds between two polls of the job from the controller.
    type: float
    default: 1
  log_file:
    description:
      - Controller path the job log is written to while the job runs (the
        action plugin appends what each poll brings). Every complete line is
        also shown as it arrives, prefixed with C([JOB]).
    type: path
  rank_logs:
    description:
      - Once the job has ended, stop and unregister it on the head as
        M(fuzz.multinode.node_job) O(fuzz.multinode.node_job#module:state=absent)
        does there, bringing the logs of its ranks home to this directory
        (and the whole job log to O(log_file) when the polls did not bring
        all of it). The head is then listed in RV(torn_down), so that the
        play has nothing left to do there either; when this cleanup fails
        it is not, and the play's cleanup of the head says why.
      - Unset, the job is left registered on the head for the play's
        M(fuzz.multinode.node_job) O(fuzz.multinode.node_job#module:state=absent).
    type: path
  progress_every:
    description:
      - While the job prints nothing, show C([JOB] still running, ELAPSED)
        every this many seconds. V(0) never.
    type: float
    default: 30
  refused:
    description:
      - The reasons the job's nodes refused it (the C(refused) results of
        M(fuzz.multinode.node_job)). When there is any, the job is not
        started and the task returns its result, V(FAILED) with these
        reasons as its RV(message); it does not fail.
    type: list
    elements: str
    default: []
  ready_file:
    description:
      - For a service (the job's spec has C(service)), a file on the
        controller that is created, holding what the readiness probe saw,
        once the head says the service is ready (its readiness probe
        passed). The workflow runner (M(fuzz.multinode.workflow_jobs))
        starts the service's dependants that need it V(RUNNING) then.
      - The file must not exist yet. Nothing is written for a job, or
        when unset.
    type: path
  stop_file:
    description:
      - A file on the controller whose appearance stops the job. The
        supervisor is asked to cancel it, with the file's contents as the
        reason, and the task goes on as for any job's end (its result
        V(CANCELED)), so the job is torn down and its logs kept as usual.
        The workflow runner stops a service this way when it is no longer
        needed.
    type: path
  interrupt_ends_run:
    description:
      - Whether an interrupted play (Ctrl-C, SIGTERM, a killed
        C(ansible-playbook)) ends the job's run with it. Then the job's
        teardown on its nodes also removes the run's ephemeral volumes,
        which no later task of the play will. The workflow runner sets it
        false for the jobs it runs, and removes them itself after an
        interrupt. With O(record), such an interrupt marks the run and this job
        CANCELED there, as a Ctrl-C of the workflow runner does.
    type: bool
    default: true
extends_documentation_fragment:
  - fuzz.multinode.run_records.record
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: The action plugin starts the supervisor and polls it until the job ends.
  check_mode:
    support: none
  diff_mode:
    support: none
notes:
  - Needs root on the head (rank host names use a UTS namespace; in a
    container, the C(SYS_ADMIN) capability).
"""

EXAMPLES = r"""
- name: Run rank 0 of job hello on the head
  fuzz.multinode.launch_job:
    job: hello
  register: result
"""

RETURN = r"""
finished:
  description: Whether the job has ended (always true once the task returns).
  returned: unless the job's nodes refused it (O(refused))
  type: bool
  sample: true
status:
  description: The job's status, V(FINISHED), V(FAILED) or V(CANCELED).
  returned: always
  type: str
  sample: FINISHED
rc:
  description: Exit status of the failed rank (rank 0's on success), if known.
  returned: unless the job's nodes refused it (O(refused))
  type: int
  sample: 0
failed_rank:
  description: The rank that failed the job, with C(rank), C(name), C(node), C(status).
  returned: when a rank failed
  type: dict
  sample: {"rank": 1, "name": "hello-1", "node": "node-2", "status": 3}
message:
  description: One line saying how the job ended.
  returned: always
  type: str
  sample: rank 1 (hello-1 on node-2) exited with status 3
log:
  description: Path of the job log on the head.
  returned: unless the job's nodes refused it (O(refused))
  type: str
  sample: /var/log/fuzz-multinode/hello/job.log
duration:
  description: Seconds from start to end of the job.
  returned: unless the job's nodes refused it (O(refused))
  type: float
ranks:
  description:
    - How each rank (each task of a task array) ran, in rank order - C(rank),
      C(name), C(node), C(state) (V(exited), V(killed) when it was still
      running at the job's teardown, V(not started) when nothing of it ran),
      C(status) (its exit status, null unless exited), C(start), C(end),
      C(duration) (seconds), C(calls) (wrapper calls that ran it), C(log)
      (its log's file name on its node, V(job.log) for rank 0), C(task_id).
  returned: when the job's supervisor ran
  type: list
  elements: dict
torn_down:
  description:
    - The nodes on which nothing of the job is left, so that
      M(fuzz.multinode.node_job)
      O(fuzz.multinode.node_job#module:state=absent) has nothing to do there
      (the C(fuzz.multinode.job) role skips them). The workers among them
      handed the logs of their ranks to the head, whose cleanup brings
      them home; the head is among them when this task did that cleanup
      (O(rank_logs)).
  returned: when the job's supervisor ran
  type: list
  elements: str
log_complete:
  description:
    - Whether O(log_file) holds the whole job log. False when too much was
      left to stream at the end and the file was not fetched whole either
      (with O(rank_logs) the head's cleanup fetches it; without, the
      C(fuzz.multinode.job) role's does).
  returned: when O(log_file) is set and the job started
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    LAUNCH_JOB_ARGUMENT_SPEC,
    RuntimeRefused,
    control_call,
    job_result,
    refusal,
    run_here,
)


def main():
    """Without the action plugin: start the job and wait on the head for
    its end (the runtime's `start`, then `status` until it has ended)."""
    module = AnsibleModule(argument_spec=LAUNCH_JOB_ARGUMENT_SPEC, supports_check_mode=False)
    params = module.params
    if params["refused"]:
        module.exit_json(**refusal(params["job"], params["refused"]))
    subcommand = "start"
    try:
        while True:
            answer = job_result(run_here(control_call(subcommand, params, params["poll"], 0),
                                         runtime=params["runtime"]))
            if answer.get("finished"):
                break
            subcommand = "status"
    except RuntimeRefused as exc:
        module.fail_json(msg=str(exc), finished=True, status="FAILED")
    if answer.get("failed"):
        module.fail_json(**answer)
    module.exit_json(**answer)


if __name__ == "__main__":
    main()
