"""Registering a job on a node (`prepare`): checks that the node can run
its part, then writes the job's directory, host names, files."""

import json
import os

from . import registry
from .inputs import job_user, prepare_inputs
from .resources import check_resources
from .teardown import cleanup_job


def prepare_job(data, spec, node):
    """Register the job of `spec` (decoded from `data`) on this node, the
    inventory host `node`; a run left over from before is cleaned up first."""
    check_resources(spec, node)  # before anything is written
    if os.path.isdir(registry.job_dir(spec.job)):
        cleanup_job(spec.job, spec.kill_grace, job_user(spec))  # a stale run
    user = job_user(spec)
    registry.create_job_dir(spec.job, node, json.dumps(data), user,
                            spec.script if spec.mode == "script" else None)
    registry.write_hosts_block(spec.job, [(r.address, r.name) for r in spec.ranks])
    prepare_inputs(spec, node, user)
    return {"changed": True, "job": spec.job, "node": node}
