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
    every node of the job (C(multinode-runtime prepare), done by the
    M(fuzz.multinode.node) and C(fuzz.multinode.job) roles).
  - Rank 0's command or script runs as the job user, with host name
    C(<job>-0), its stdout and stderr appended to the job log on the head.
  - The job fails when rank 0 exits non-zero or as soon as any worker command
    started through the SSH wrapper exits non-zero; every process of the job
    on the head is stopped when the job ends.
  - The job's result is returned; the module fails when the job fails.
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
attributes:
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

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            job=dict(type="str", required=True),
            runtime=dict(type="path", default="/opt/fuzz-multinode/multinode-runtime.py"),
        ),
        supports_check_mode=False,
    )
    rc, out, err = module.run_command(
        ["/usr/bin/python3", "-I", module.params["runtime"], "head", module.params["job"]])
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        module.fail_json(msg="the node runtime failed: %s" % (err.strip() or out.strip() or "rc %d" % rc), rc=rc)
    result["changed"] = True
    if result["status"] != "FINISHED":
        result["msg"] = result["message"]
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
