"""The run's token: what a launch request over ssh must carry to be served
on a node, so that a node's forced command serves a run's requests only
(the cluster key alone would let any holder ask for a command in any run).

It is derived on every node of the run alike, at registration, from the
cluster key (which only root and the node's runtime read: every job
process is in a sandbox where the key reads empty) and the job's name and
run id, and kept in the job's directory for the job's own processes (the
Python wrapper's requests, a task's): another run cannot read it, as only
its own job directory is in its sandbox. Local mode has no ssh, and no
token: its launch socket is in the job's directory."""

import hashlib
import hmac

from . import registry
from .errors import RuntimeFailure

TOKEN_FILE = "token"


def make(spec, gid):
    """Derive the run's token here and keep it in the job's directory
    (root's, readable by the job's group); nothing in local mode."""
    if spec.local:
        return
    try:
        with open(registry.CLUSTER_KEY, "rb") as handle:
            key = handle.read()
    except OSError as exc:
        raise RuntimeFailure("cannot read the cluster key %s: %s (the node role installs it)"
                             % (registry.CLUSTER_KEY, exc.strerror)) from None
    token = hmac.new(key, ("fuzz-multinode run %s %s" % (spec.job, spec.run)).encode(), hashlib.sha256)
    registry.write_file(registry.job_path(spec.job, TOKEN_FILE), token.hexdigest(), 0o640, gid=gid)


def read(job):
    """The run's token here, or None (local mode)."""
    try:
        with open(registry.job_path(job, TOKEN_FILE)) as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


def check(spec, request, node):
    """Refuse a request over ssh that does not carry the token of the run
    registered here."""
    expected = read(spec.job)
    if expected is None:
        return
    given = request.get("token")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
        raise RuntimeFailure("job %s on node %s: the request does not come from its run %s" % (
            spec.job, node, spec.run or "(no id)"))


def with_token(job, request):
    """The request as sent over ssh: with the run's token."""
    token = read(job)
    return dict(request, token=token) if token else request
