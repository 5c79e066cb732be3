"""Registering a job on a node (`prepare`): claims the job for its run,
checks that the node can run its part and gives it its devices, then
writes the job's directory, secrets, host names and files, and pulls its
image."""

import json

from . import devices, registry, run_token
from .claims import check_free, claims_locked, write_claim
from .errors import RuntimeFailure
from .inputs import job_user, prepare_inputs, secret_values, store_secrets
from .resources import check_resources
from .sandbox import place_job
from .spec import load_spec
from .teardown import cleanup_job


def prepare_job(data, spec, node, secrets=None):
    """Register the job of `spec` (decoded from `data`) on this node, the
    inventory host `node`, for its run. Another run's live claim refuses it
    before anything is written; a stale registration is cleaned up first.
    `secrets` are the values of the job's secret references, when given
    with the registration: the env's are kept before the image is pulled,
    the image.secret's go to the pull only."""
    user = job_user(spec)
    kept = secret_values(spec, secrets) if secrets is not None else {}  # before anything is written
    with claims_locked():
        holder = _holder_user(spec, user)
        held = check_free(spec.job, spec.run, node, holder)
        check_resources(spec, node)  # before anything is written
        # Under the lock: two jobs registering at once never get one device.
        allocation = devices.allocate(spec, node)
        if held is not None:
            cleanup_job(spec.job, spec.kill_grace, holder)  # a stale run
        registry.create_job_dir(spec.job, node, json.dumps(data), user,
                                spec.script if spec.mode == "script" else None)
        if allocation is not None:
            devices.record_allocation(spec.job, allocation)
        run_token.make(spec, user.pw_gid)
        write_claim(spec.job, spec.run, spec.claim_lease)
    if kept:
        store_secrets(spec, kept)
    registry.write_hosts_block(spec.job, [(r.address, r.name) for r in spec.ranks]
                               + [(address, name) for name, address in spec.extra_hosts])
    sandbox = place_job(spec, node, secrets)  # after the hosts block: a container sees it
    prepare_inputs(spec, node, user, sandbox)
    answer = {"changed": True, "job": spec.job, "node": node, "run": spec.run}
    if kept:
        answer["secrets"] = len(kept)
    return answer


def _holder_user(spec, fallback):
    """The job user of the registration already here (its processes are
    looked for and stopped as that user)."""
    try:
        return job_user(load_spec(spec.job))
    except RuntimeFailure:
        return fallback
