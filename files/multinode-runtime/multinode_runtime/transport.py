"""How a launch request reaches a rank's node: ssh with the cluster key
(sshd runs the runtime's `launch` as the key's forced command), or in local
mode a connection to the head's launch socket (local_socket.py)."""

from . import registry
from .inputs import DEFAULT_PATH
from .processes import which
from .wire import encode_request


def ssh_command(node, address):
    # Host keys are pinned per node under its inventory name (HostKeyAlias),
    # whatever name or address the rank is reached by. ssh is looked up on
    # the system PATH: the job's PATH may not have it.
    return [which("ssh", DEFAULT_PATH) or "ssh", "-F", registry.SSH_CONFIG,
            "-o", "HostKeyAlias=" + node, "root@" + address]


def transport_command(spec, target, request):
    """The command that carries a launch request to the target rank's node:
    ssh with the cluster key, or in local mode (every rank on this node) a
    connection to the head's local launch socket. Both relay the launcher's
    framed output on stdout, and both end the launch when their stdin
    closes."""
    if spec.local:
        return registry.runtime_command("connect", spec.job, encode_request(request))
    return ssh_command(target.node, target.address) + ["-T", encode_request(request)]
