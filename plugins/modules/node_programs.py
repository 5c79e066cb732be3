#!/usr/bin/python
# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The node runtime, the SSH wrapper and the generic helper, installed."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_programs
short_description: Install the node runtime, the SSH wrapper and the generic helper
version_added: 0.2.0
description:
  - Installs the node runtime package (the files under O(runtime_source),
    without bytecode) at the collection's runtime path, and each of
    O(programs) as an executable, all owned by root; removes files an older
    install left in the runtime directory, and compiles the runtime there,
    so that every call loads cached bytecode the job user cannot write.
  - Only files whose content, mode or owner differ are replaced, each by a
    rename, so that two preparations of one node at once are harmless.
  - One command over the host's connection (an action plugin), with the
    files as one archive on its stdin; the node needs python3.
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  runtime_source:
    description: Controller directory of the node runtime package.
    type: path
    required: true
  programs:
    description: Executables to install (mode 0755).
    type: list
    elements: dict
    default: []
    suboptions:
      src:
        description: Controller path of the program.
        type: path
        required: true
      dest:
        description: Absolute path on the node.
        type: path
        required: true
extends_documentation_fragment:
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: Runs one python3 command on the host.
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Install the node runtime, the SSH wrapper and the generic helper
  fuzz.multinode.node_programs:
    runtime_source: "{{ role_path }}/../../files/multinode-runtime"
    programs:
      - {src: "{{ role_path }}/../../files/ssh-wrapper", dest: /multinode/ssh-wrapper}
"""

RETURN = r"""
installed:
  description: The node paths written (in check mode, that would be).
  returned: success
  type: list
  elements: str
removed:
  description: Files of an older install removed from the runtime directory.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(runtime_source=dict(type="path", required=True),
                                              programs=dict(type="list", elements="dict", default=[])),
                           supports_check_mode=True)
    module.fail_json(msg="fuzz.multinode.node_programs runs as an action plugin only")


if __name__ == "__main__":
    main()
