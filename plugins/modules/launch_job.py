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
    every node of the job (C(multinode-runtime.py prepare), done by the
    C(fuzz.multinode.job) role), and waits for the job to end.
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
  - fuzz.multinode developers
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
    description: Path of the node runtime on the head.
    type: path
    default: /opt/fuzz-multinode/multinode-runtime
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
  progress_every:
    description:
      - While the job prints nothing, show C([JOB] still running, ELAPSED)
        every this many seconds. V(0) never.
    type: float
    default: 30
  log_offset:
    description:
      - Internal, used by the action plugin with O(_mode=status) - return up
        to 256 KiB of the job log from this byte offset.
    type: int
  _mode:
    description: Internal, used by the action plugin (V(start) or V(status)).
    type: str
    choices: [start, status]
    default: start
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
  returned: always
  type: bool
  sample: true
status:
  description: The job's status, V(FINISHED), V(FAILED) or V(CANCELED).
  returned: always
  type: str
  sample: FINISHED
rc:
  description: Exit status of the failed rank (rank 0's on success), if known.
  returned: always
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
  returned: always
  type: str
  sample: /var/log/fuzz-multinode/hello/job.log
duration:
  description: Seconds from start to end of the job.
  returned: always
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
log_complete:
  description:
    - Whether O(log_file) holds the whole job log. False when too much was
      left to stream at the end (the C(fuzz.multinode.job) role then
      fetches the file).
  returned: when O(log_file) is set
  type: bool
"""

import base64
import json
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

JOBS_DIR = "/run/fuzz-multinode/jobs"
LOG_DIR = "/var/log/fuzz-multinode"
LOG_CHUNK = 256 << 10  # bytes of the job log one poll returns at most


def start(module, job_dir):
    """Start the supervisor in its own session, detached from this module."""
    heartbeat = os.path.join(job_dir, "heartbeat")
    with open(heartbeat, "w"):
        pass
    with open(os.path.join(job_dir, "supervisor.out"), "wb") as out:
        process = subprocess.Popen(
            ["/usr/bin/python3", "-I", module.params["runtime"], "head", module.params["job"],
             "--controller-timeout", str(module.params["controller_timeout"])],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)
    with open(os.path.join(job_dir, "supervisor.pid"), "w") as handle:
        handle.write("%d\n" % process.pid)
    with open(os.path.join(job_dir, "spec.json")) as handle:
        grace = json.load(handle).get("kill_grace", 10)
    module.exit_json(changed=True, finished=False, pid=process.pid, kill_grace=grace)


def job_log(module):
    """The part of the job log the controller asked for: up to LOG_CHUNK
    bytes from `log_offset` (base64: the log is bytes) and the log's size."""
    offset = module.params["log_offset"]
    if offset is None:
        return {}
    try:
        with open(os.path.join(LOG_DIR, module.params["job"], "job.log"), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(offset)
            data = handle.read(LOG_CHUNK)
    except FileNotFoundError:
        size, data = 0, b""
    return {"log_data": base64.b64encode(data).decode(), "log_size": size}


def status(module, job_dir):
    """Report whether the job has ended, and the job log from `log_offset`
    on (read after the result: once there is one, the log is complete);
    every call is a heartbeat."""
    os.utime(os.path.join(job_dir, "heartbeat"))
    try:
        with open(os.path.join(job_dir, "result.json")) as handle:
            result = json.load(handle)
    except FileNotFoundError:
        with open(os.path.join(job_dir, "supervisor.pid")) as handle:
            pid = int(handle.read())
        if os.path.exists("/proc/%d" % pid):
            module.exit_json(changed=False, finished=False, **job_log(module))
        time.sleep(0.5)  # it may be writing the result right now
        if not os.path.exists(os.path.join(job_dir, "result.json")):
            with open(os.path.join(job_dir, "supervisor.out"), "rb") as handle:
                said = handle.read().decode(errors="replace").strip()
            module.fail_json(msg="the job's supervisor ended without a result: %s" % (said or "no output"),
                             finished=True, status="FAILED", **job_log(module))
        return status(module, job_dir)
    result.update(changed=True, finished=True, **job_log(module))
    if result["status"] != "FINISHED":
        result["msg"] = result["message"]
        module.fail_json(**result)
    module.exit_json(**result)


def check_run(module, job_dir):
    """Fail unless the job on this node is the one of this run."""
    run = module.params["run"]
    if run is None:
        return
    try:
        with open(os.path.join(job_dir, "run")) as handle:
            held = handle.read().strip()
    except FileNotFoundError:
        held = ""
    if held != run:
        module.fail_json(msg="job %s on this node belongs to run %s, not to run %s"
                         % (module.params["job"], held or "(no id)", run), finished=True, status="FAILED")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            job=dict(type="str", required=True),
            run=dict(type="str"),
            runtime=dict(type="path", default="/opt/fuzz-multinode/multinode-runtime"),
            controller_timeout=dict(type="int", default=60),
            poll=dict(type="float", default=1),
            log_file=dict(type="path"),
            progress_every=dict(type="float", default=30),
            log_offset=dict(type="int"),
            _mode=dict(type="str", choices=["start", "status"], default="start"),
        ),
        supports_check_mode=False,
    )
    job_dir = os.path.join(JOBS_DIR, module.params["job"])
    if not os.path.isfile(os.path.join(job_dir, "spec.json")):
        module.fail_json(msg="job %s is not registered on this node" % module.params["job"])
    check_run(module, job_dir)
    if module.params["_mode"] == "start":
        start(module, job_dir)
    status(module, job_dir)


if __name__ == "__main__":
    main()
