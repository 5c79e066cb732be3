#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: volume_transfers
short_description: Copy a run's volume ingress in, or its egress out, on a node
version_added: 0.2.0
description:
  - >-
    Carries out the C(ingress) or C(egress) items of a workflow run's volumes (the C(transfers)
    result of M(fuzz.multinode.fuzzfile)) that belong to the host, one item at a time, as the
    job user: C(https://), C(http://), C(s3://) and C(file://<files entry>) sources into
    C(file://PATH) in the volume; C(file://PATH) in the volume to C(s3://) or to a C(file://PATH)
    under O(egress_dir) on the controller.
  - >-
    Ingress runs on every host that runs a job mounting the volume (the first C(hosts) of
    O(hosts)), or only on the first when the volume root is shared storage; egress runs on the
    first host only, which runs rank 0 of every job.
  - >-
    Each item streams in chunks into a temporary name, renamed over the destination once whole:
    a failure leaves nothing half-written and keeps what the destination held. Progress is
    shown as C([ingress] ...) and C([egress] ...) lines. A failed ingress item stops the
    host's ingress; a failed egress item does not stop the others.
  - One runtime command per item over the host's connection (an action plugin).
author:
  - fuzz.multinode developers (!UNKNOWN)
options:
  direction:
    description: V(ingress) (before the run's first job) or V(egress) (after its last).
    type: str
    choices: [ingress, egress]
    required: true
  transfers:
    description: The C(transfers) result of M(fuzz.multinode.fuzzfile).
    type: list
    elements: dict
    required: true
  hosts:
    description: The play's hosts in rank order (the jobs run on the first of them).
    type: list
    elements: str
    required: true
  run:
    description: The run's id (C(FB_WORKFLOW_ID)); names its ephemeral volumes.
    type: str
    required: true
  user:
    description: The job user, who owns the volumes and does the copying.
    type: str
    default: fuzz
  files:
    description: The workflow's top-level files (name to contents), for C(file://<name>) sources.
    type: dict
    default: {}
  secrets:
    description:
      - The values of the secrets the transfers name (filter C(fuzz.multinode.transfer_secrets)).
        Each item's node gets only its own, on stdin; never logged.
      - C(s3://) - a mapping of C(access_key_id), C(secret_access_key) and optionally
        C(session_token), C(region), C(endpoint_url). C(https://) and C(http://) - a mapping of
        C(username) and C(password) (basic authentication).
    type: dict
    default: {}
  s3_endpoint_url:
    description:
      - The S3 endpoint of C(s3://) items whose secret names none (an S3-compatible server's
        URL); empty for AWS.
    type: str
    default: ""
  egress_dir:
    description: The controller directory under which C(file://PATH) egress destinations are written.
    type: path
  progress_every:
    description: Seconds between the controller's C(still copying) lines for a long item.
    type: float
    default: 30
extends_documentation_fragment:
  - fuzz.multinode.volumes
  - fuzz.multinode.volumes.sharing
  - fuzz.multinode.attributes
attributes:
  action:
    support: full
    details: Runs the node runtime's C(transfer) and C(volume-read) on the host.
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Copy the volumes' ingress in
  fuzz.multinode.volume_transfers:
    direction: ingress
    transfers: "{{ fuzzfile.transfers }}"
    hosts: "{{ groups['multinode'] }}"
    run: "{{ run_id }}"
    secrets: "{{ fuzz_multinode_secrets | fuzz.multinode.transfer_secrets(fuzzfile.transfers) }}"
  become: true
  no_log: true
"""

RETURN = r"""
copied:
  description: The items copied, each with its C(field), C(bytes) and C(seconds).
  returned: always
  type: list
  elements: dict
failures:
  description: >-
    One message per failed item, naming the item (its field), its ends, the reason and the host,
    e.g. C(volumes.data.ingress[0]: https://example.org/in.tgz -> file://in.tgz: HTTP 404 Not
    Found (on node1)).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import VOLUME_TRANSFERS_ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=VOLUME_TRANSFERS_ARGUMENT_SPEC)
    module.fail_json(msg="fuzz.multinode.volume_transfers runs as an action plugin only")


if __name__ == "__main__":
    main()
