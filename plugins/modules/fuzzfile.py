#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fuzzfile
short_description: Read and validate a Fuzzball Fuzzfile
version_added: 0.1.0
description:
  - >-
    Reads a Fuzzball workflow file (Fuzzfile, C(version) V(v1) or V(v4)) on the host
    where the module runs (normally the controller, with C(delegate_to: localhost)),
    validates it strictly and returns the workflow summary and one job in normalized form.
  - >-
    Unknown keys are errors, as in Fuzzball's own API. Error messages start with the file
    path and the path of the offending field, for example
    C(examples/x.yml: jobs.a.command: must be a list of strings).
  - Keys that Fuzzball knows but this collection does not execute yet (for example
    C(mounts), C(depends-on), C(policy), C(task-array), C(defaults), C(services)) are
    accepted, listed in RV(workflow.unsupported) and RV(job.unsupported), and reported
    as warnings.
  - The result's RV(job) is the input of M(fuzz.multinode.rank_plan).
author:
  - fuzz.multinode developers (!UNKNOWN)
requirements:
  - PyYAML
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  path:
    description:
      - Path of the Fuzzfile on the host where the module runs.
      - A relative path is relative to the module's working directory; prefer an absolute
        path such as C({{ playbook_dir }}/workflow.yml).
    type: path
    required: true
  job:
    description:
      - Name of the job to select (a key under C(jobs)).
      - May be omitted when the workflow has exactly one job; with several jobs the module
        fails and lists their names.
    type: str
notes:
  - >-
    The file is parsed with PyYAML's safe loader, adjusted to be closer to the YAML 1.2
    parser Fuzzball uses: only C(true) and C(false) are booleans (C(yes), C(no), C(on)
    and C(off) stay strings), dates stay strings, and a key repeated in one mapping is an
    error.
  - Only C(generic) multinode jobs and jobs without a C(multinode) section can run; other
    implementations are accepted here and rejected by M(fuzz.multinode.rank_plan).
seealso:
  - module: fuzz.multinode.rank_plan
"""

EXAMPLES = r"""
- name: Read the only job of a workflow
  fuzz.multinode.fuzzfile:
    path: "{{ playbook_dir }}/generic-multinode.yml"
  delegate_to: localhost
  run_once: true
  register: fuzzfile

- name: Select one job of a workflow with several jobs
  fuzz.multinode.fuzzfile:
    path: /srv/workflows/pipeline.yml
    job: solve
  delegate_to: localhost
  run_once: true
  register: fuzzfile

- name: Show how many nodes the job needs
  ansible.builtin.debug:
    msg: "{{ fuzzfile.job.name }} needs {{ fuzzfile.job.nodes }} node(s)"
"""

RETURN = r"""
workflow:
  description: Summary of the workflow.
  returned: success
  type: dict
  contains:
    version:
      description: The Fuzzfile version.
      type: str
      returned: success
      sample: v4
    jobs:
      description: Names of the workflow's jobs, in file order.
      type: list
      elements: str
      returned: success
      sample: [generic-multinode]
    services:
      description: Names of the workflow's services (not run by this collection yet).
      type: list
      elements: str
      returned: success
      sample: []
    unsupported:
      description: Workflow-level features that were accepted but are ignored.
      type: list
      elements: str
      returned: success
      sample: ["volumes: volumes are not supported yet; ignored"]
job:
  description:
    - The selected job, normalized. Pass it unchanged to M(fuzz.multinode.rank_plan).
  returned: success
  type: dict
  contains:
    name:
      description: The job's name (its key under C(jobs)); rank host names are C(<name>-<rank>).
      type: str
      returned: success
      sample: generic-multinode
    image_uri:
      description: The job's C(image.uri).
      type: str
      returned: success
      sample: docker://mirror.gcr.io/library/alpine:3.16
    command:
      description: The job's C(command) (argv, not expanded yet), or V(null) for a script job.
      type: list
      elements: str
      returned: success
      sample: [mpirun, -H, $MULTINODE_HOSTLIST]
    script:
      description: The job's C(script) text, or V(null) for a command job.
      type: str
      returned: success
      sample: null
    args:
      description: The job's C(args).
      type: list
      elements: str
      returned: success
      sample: []
    env:
      description:
        - The job's C(env) as C([key, value]) pairs in file order. A key given twice keeps
          its first position and its last value.
      type: list
      elements: list
      returned: success
      sample: [[PATH, /usr/local/bin:/usr/bin:/bin]]
    cwd:
      description: The job's C(cwd), or V(null) when not set.
      type: str
      returned: success
      sample: null
    cores:
      description: C(resource.cpu.cores), or V(null) when not set.
      type: int
      returned: success
      sample: 2
    affinity:
      description: C(resource.cpu.affinity) (V(NUMA), V(SOCKET) or V(CORE)), or V(null).
      type: str
      returned: success
      sample: NUMA
    memory_bytes:
      description: C(resource.memory.size) in bytes, or V(null) when not set.
      type: int
      returned: success
      sample: 1000000000
    nodes:
      description: C(multinode.nodes); V(1) for a job without C(multinode).
      type: int
      returned: success
      sample: 2
    implementation:
      description: C(multinode.implementation), or V(null) for a job without C(multinode).
      type: str
      returned: success
      sample: generic
    procs_per_node:
      description: C(multinode.procs-per-node), or V(null) when not set.
      type: int
      returned: success
      sample: null
    slots_per_node:
      description: Slots per node, C(procs-per-node), else C(cores), else V(1).
      type: int
      returned: success
      sample: 2
    unsupported:
      description: Job features that were accepted but are ignored.
      type: list
      elements: str
      returned: success
      sample: ["jobs.solve.mounts: volume mounts are not supported yet; ignored"]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    HAS_YAML,
    FuzzfileError,
    parse_workflow,
    select_job,
)


def read_text(path: str) -> str:
    """Read a UTF-8 text file; raise OSError/UnicodeDecodeError on failure."""
    with open(path, "rb") as handle:
        data = handle.read()
    return data.decode("utf-8")


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            job=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))

    path = module.params["path"]
    try:
        text = read_text(path)
    except FileNotFoundError:
        module.fail_json(msg="%s: no such file" % path)
    except IsADirectoryError:
        module.fail_json(msg="%s: is a directory, not a Fuzzfile" % path)
    except OSError as exc:
        module.fail_json(msg="%s: cannot read: %s" % (path, exc.strerror or to_native(exc)))
    except UnicodeDecodeError as exc:
        module.fail_json(
            msg="%s: not UTF-8 text (byte 0x%02x at offset %d)"
            % (path, exc.object[exc.start], exc.start)
        )

    try:
        workflow = parse_workflow(text)
        job = select_job(workflow, module.params["job"])
    except FuzzfileError as exc:
        module.fail_json(msg="%s: %s" % (path, to_native(exc)))

    for note in workflow.warnings + workflow.unsupported + job.unsupported:
        module.warn("%s: %s" % (path, note))

    module.exit_json(changed=False, workflow=workflow.to_dict(), job=job.to_dict())


if __name__ == "__main__":
    main()
