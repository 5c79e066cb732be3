"""A node's address on its scenario's Docker network, shared by the
verifiers that compare it with what the jobs print (MULTINODE_NODE_IP, name
resolution): molecule/busybox, molecule/quoting and molecule/scale."""

import re
import subprocess


def network_address(network, node):
    """The IPv4 address Docker assigned to container `node` on `network`.
    Fails the test if docker fails or says anything but one address."""
    done = subprocess.run(
        ["docker", "inspect", "-f", '{{(index .NetworkSettings.Networks "%s").IPAddress}}' % network, node],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    address = done.stdout.strip()
    # Message spelled out: pytest does not rewrite asserts outside test modules.
    assert done.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", address), (
        node, network, done.returncode, done.stdout, done.stderr)
    return address
