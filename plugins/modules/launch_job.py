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
  - The job's result is returned; the task fails when the job fails.
author:
  - fuzz.multinode developers
options:
  job:
    description: Name of the registered job.
    type: str
    required: true
  runtime:
    description: Path of the node runtime on the head.
    type: path
    default: /opt/fuzz-multinode/multinode-runtime.py
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
"""

import json
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

JOBS_DIR = "/run/fuzz-multinode/jobs"


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
    module.exit_json(changed=True, finished=False, pid=process.pid)


def status(module, job_dir):
    """Report whether the job has ended; every call is a heartbeat."""
    os.utime(os.path.join(job_dir, "heartbeat"))
    try:
        with open(os.path.join(job_dir, "result.json")) as handle:
            result = json.load(handle)
    except FileNotFoundError:
        with open(os.path.join(job_dir, "supervisor.pid")) as handle:
            pid = int(handle.read())
        if os.path.exists("/proc/%d" % pid):
            module.exit_json(changed=False, finished=False)
        time.sleep(0.5)  # it may be writing the result right now
        if not os.path.exists(os.path.join(job_dir, "result.json")):
            with open(os.path.join(job_dir, "supervisor.out"), "rb") as handle:
                said = handle.read().decode(errors="replace").strip()
            module.fail_json(msg="the job's supervisor ended without a result: %s" % (said or "no output"),
                             finished=True, status="FAILED")
        return status(module, job_dir)
    result.update(changed=True, finished=True)
    if result["status"] != "FINISHED":
        result["msg"] = result["message"]
        module.fail_json(**result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            job=dict(type="str", required=True),
            runtime=dict(type="path", default="/opt/fuzz-multinode/multinode-runtime.py"),
            controller_timeout=dict(type="int", default=60),
            poll=dict(type="float", default=1),
            _mode=dict(type="str", choices=["start", "status"], default="start"),
        ),
        supports_check_mode=False,
    )
    job_dir = os.path.join(JOBS_DIR, module.params["job"])
    if not os.path.isfile(os.path.join(job_dir, "spec.json")):
        module.fail_json(msg="job %s is not registered on this node" % module.params["job"])
    if module.params["_mode"] == "start":
        start(module, job_dir)
    status(module, job_dir)


if __name__ == "__main__":
    main()
