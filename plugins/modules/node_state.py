#!/usr/bin/python
# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Whether a node is prepared for multinode jobs, and its address."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_state
short_description: Whether a node is prepared for multinode jobs, and its address
version_added: 0.2.0
description:
  - Says whether the node was prepared by the C(fuzz.multinode.node) role
    with the same O(fingerprint) for all of O(nodes) and, unless O(local),
    its sshd runs; and
    the node's default IPv4 address (the source address of its route to a
    public address, as Ansible's C(ansible_default_ipv4) fact has it), so
    that no facts need to be gathered.
  - One command over the host's connection (an action plugin).
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  fingerprint:
    description: The fingerprint of what node preparation would install.
    type: str
    required: true
  nodes:
    description:
      - The nodes of the play. The node counts as prepared only when the
        host keys pinned there include every one of them (a node prepared
        for more nodes serves a job on fewer).
    type: list
    elements: str
    default: []
  local:
    description: Local mode, where no sshd runs.
    type: bool
    default: false
extends_documentation_fragment:
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: Runs one shell command on the host.
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check whether the node is prepared already
  fuzz.multinode.node_state:
    fingerprint: "{{ fingerprint }}"
  register: state
"""

RETURN = r"""
prepared:
  description: Whether the node is prepared with this fingerprint (and its sshd runs).
  returned: always
  type: bool
address:
  description: The node's default IPv4 address, empty when it has no default route.
  returned: always
  type: str
missing:
  description: Which of the OpenSSH programs the node role needs the node lacks.
  returned: success
  type: list
  elements: str
systemd:
  description: Whether systemd runs on the node (the node role then starts sshd through it).
  returned: success
  type: bool
boto3:
  description: >-
    Whether the node runtime's Python (C(/usr/bin/python3)) has boto3, which C(s3://)
    transfers need (the node role installs Debian's python3-boto3 when a workflow has them).
  returned: success
  type: bool
devices:
  description: >-
    How many CDI devices of each kind the node has (C(resource.devices)), from its CDI
    specifications in C(/etc/cdi) and C(/var/run/cdi), read by the node runtime's C(cdi.py)
    run as it is; null when the node could not tell (no C(/usr/bin/python3)), which counts
    as enough.
  returned: success
  type: dict
  sample: {"nvidia.com/gpu": 4}
device_problems:
  description: The CDI specifications passed over in counting, and why.
  returned: success
  type: list
  elements: str
fingerprint:
  description: The fingerprint checked.
  returned: always
  type: str
runtime:
  description: Where the node role installs the node runtime.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(fingerprint=dict(type="str", required=True),
                                              nodes=dict(type="list", elements="str", default=[]),
                                              local=dict(type="bool", default=False)),
                           supports_check_mode=True)
    module.fail_json(msg="fuzz.multinode.node_state runs as an action plugin only")


if __name__ == "__main__":
    main()
