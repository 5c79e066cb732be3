"""Registering a job on a node (`prepare`): claims the job for its run,
checks that the node can run its part, then writes the job's directory,
host names and files."""

import json

from . import registry
from .claims import check_free, claims_locked, write_claim
from .containers import place_job
from .errors import RuntimeFailure
from .inputs import job_user, prepare_inputs
from .resources import check_resources
from .spec import load_spec
from .teardown import cleanup_job


def prepare_job(data, spec, node):
    """Register the job of `spec` (decoded from `data`) on this node, the
    inventory host `node`, for its run. Another run's live claim refuses it
    before anything is written; a stale registration is cleaned up first."""
    user = job_user(spec)
    with claims_locked():
        holder = _holder_user(spec, user)
        held = check_free(spec.job, spec.run, node, holder)
        check_resources(spec, node)  # before anything is written
        if held is not None:
            cleanup_job(spec.job, spec.kill_grace, holder)  # a stale run
        registry.create_job_dir(spec.job, node, json.dumps(data), user,
                                spec.script if spec.mode == "script" else None)
        write_claim(spec.job, spec.run, spec.claim_lease)
    registry.write_hosts_block(spec.job, [(r.address, r.name) for r in spec.ranks])
    container = place_job(spec, node)  # after the hosts block: the container sees it
    prepare_inputs(spec, node, user, container)
    return {"changed": True, "job": spec.job, "node": node, "run": spec.run}


def _holder_user(spec, fallback):
    """The job user of the registration already here (its processes are
    looked for and stopped as that user)."""
    try:
        return job_user(load_spec(spec.job))
    except RuntimeFailure:
        return fallback
