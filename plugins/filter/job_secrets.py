# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.job_secrets, transfer_secrets, registry_secret_names and
s3_secret_names: what of fuzz_multinode_secrets a job's nodes and a run's
transfers get, and which of its values are registry or S3 credentials (see
the .yml file of each)."""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    registry_secret_names,
    s3_secret_names,
    transfer_secrets,
)


def job_secrets(secrets, spec):
    """The values of the secrets the job spec references, by name: its
    env's (secret_env) and its image's (image.secret); only names secrets
    defines (the run policy refused the job if one was missing)."""
    names = set((spec.get("secret_env") or {}).values())
    image_secret = (spec.get("image") or {}).get("secret")
    if image_secret:
        names.add(image_secret)
    return {name: value for name, value in (secrets or {}).items() if name in names}


class FilterModule:
    def filters(self):
        return {"job_secrets": job_secrets, "registry_secret_names": registry_secret_names,
                "s3_secret_names": s3_secret_names, "transfer_secrets": transfer_secrets}
