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
    description:
      - The fingerprint of the settings node preparation would install with. The fingerprint
        checked, and returned as RV(fingerprint), is this one and O(installed)'s contents
        hashed together.
    type: str
    required: true
  installed:
    description:
      - The files and directories on the controller that node preparation installs, read and
        hashed by the action plugin into the fingerprint (a directory's files each with its path
        relative to it; C(__pycache__) and C(.pyc) files left out). Where they lie on the
        controller does not count, only their contents and order.
    type: list
    elements: path
    default: []
  facts:
    description:
      - What the node's C(/usr/bin/python3) is asked, which starts a Python on the node (the
        check's largest cost on a busy node). V(devices) counts its CDI devices
        (RV(devices)); V(boto3) says whether that Python has boto3 (RV(boto3)).
      - With neither, no Python starts for the address (RV(address) then comes from
        C(ip route), else from any C(python3)), RV(devices) is null and RV(boto3) false.
    type: list
    elements: str
    choices: [devices, boto3]
    default: [devices, boto3]
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
    fingerprint: "{{ settings | string | hash('sha256') }}"
    installed:
      - "{{ playbook_dir }}/files/multinode-runtime"
    facts: []
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
    transfers need (the node role installs Debian's python3-boto3 when a workflow has them);
    false when not asked (O(facts)).
  returned: success
  type: bool
devices:
  description: >-
    How many CDI devices of each kind the node has (C(resource.devices)), from its CDI
    specifications in C(/etc/cdi) and C(/var/run/cdi), read by the node runtime's C(cdi.py)
    run as it is; null when the node could not tell (no C(/usr/bin/python3)) or was not
    asked (O(facts)), which counts as enough.
  returned: success
  type: dict
  sample: {"nvidia.com/gpu": 4}
device_problems:
  description: The CDI specifications passed over in counting, and why.
  returned: success
  type: list
  elements: str
fingerprint:
  description: >-
    The fingerprint checked: O(fingerprint) and O(installed)'s contents hashed together (what
    the node role records on a node it prepared).
  returned: always
  type: str
runtime:
  description: Where the node role installs the node runtime.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import NODE_STATE_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=NODE_STATE_ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="fuzz.multinode.node_state runs as an action plugin only")


if __name__ == "__main__":
    main()
