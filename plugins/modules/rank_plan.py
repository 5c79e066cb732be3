#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_plan
short_description: Plan the ranks of a Fuzzball job on inventory hosts
version_added: 0.1.0
description:
  - >-
    Turns a job returned by M(fuzz.multinode.fuzzfile) and the inventory hosts that will
    run it into the job spec that every node of the job receives: rank host names
    C(<job>-<rank>), slots per node, each rank's environment, and the head's argument
    vector with C($VAR) and C(${VAR}) expanded.
  - >-
    Every rank gets the job's C(env) plus C(HOSTNAME=<job>-<rank>); ranks of a multinode
    job also get C(RANK=<rank>) (rank 0 included). Rank 0 of a multinode job additionally
    gets C(MULTINODE_HOSTLIST), C(MULTINODE_HOSTLIST_NOSLOTS), C(MULTINODE_TOTAL_SLOTS),
    C(MULTINODE_NODE_IP), C(MULTINODE_SSH_WRAPPER) and C(MULTINODE_RSH_WRAPPER).
    These runtime values always win over the job's C(env); an overridden entry is
    dropped and reported as a warning.
  - >-
    Arguments are expanded once from rank 0's environment; unknown names expand to the
    empty string, and there is no other shell processing (no word splitting, globbing or
    command substitution). In script mode the script text is not touched and RV(spec.argv)
    holds the expanded C(args).
  - >-
    As in Fuzzball, C(multinode.implementation) V(openmpi) (or V(ompi)) and V(mpich) run the
    job's command or script under the MPI launcher across all ranks, so the job names only
    the per-rank program (for example C(command: [/bin/sh, -c, mpi_hello_world])):
    RV(spec.launcher) is C(mpirun -H <hostlist> --mca plm_rsh_agent <wrapper> -np <total>)
    or C(mpiexec -hosts <hostlist> -launcher ssh -launcher-exec <wrapper> -n <total>), with
    C(<hostlist>) the value of C(MULTINODE_HOSTLIST). The runtime looks C(mpirun) or
    C(mpiexec) up on rank 0's C(PATH), so the job's C(env) must put the MPI's C(bin)
    directory on C(PATH), as Fuzzball's examples do. V(generic) jobs and jobs without
    C(multinode) run their command as given.
  - >-
    C(secret://NAME) values of the job's C(env) stay references in the spec: every rank's
    RV(spec.ranks[].env) holds the reference, RV(spec.secret_env) maps each such key to its
    NAME; an argument that expands such a key (command mode, or C(args)) keeps the
    reference in RV(spec.argv) and is listed in RV(spec.secret_args) by its parts (the
    run policy warns of it, or refuses it under C(fuzz_multinode_secret_arguments: refuse)).
    The node runtime puts the values into the environment and those arguments when a rank
    starts, from values the play delivers to the nodes separately
    (the C(fuzz.multinode.job) role takes them from C(fuzz_multinode_secrets)), so no value
    ever appears in this module's result. With O(secret_names), a reference to a name not
    among them is refused, naming the job, the C(env) key and the reference.
  - >-
    The job's C(image.secret), C(secret://NAME), is RV(spec.image.secret), its NAME (V(null)
    when the job names none, or runs on the bare host): the nodes pull the image with those
    registry credentials, delivered as the C(env) values are. With O(registry_secret_names),
    an C(image.secret) naming a secret not among them (its value is not registry
    credentials) is refused.
  - >-
    The job's C(files) are returned in RV(spec.files) with their contents from O(files),
    for the node runtime to write, as the job user, on every node before the job starts.
  - >-
    A job with a C(task-array) is planned as its tasks: RV(spec.ranks) holds one entry per
    task (C(start) to C(end)) with its C(task_id), host name C(<job>-<task id>),
    C(FB_TASK_ID) in its C(env) and its own expanded C(argv) (the node runtime writes its
    log, C(task-<id>.log)), placed round-robin on O(nodes) (1 to C(max_hosts) of them), and
    RV(spec.task_array) gives the C(concurrency) the head enforces (the Fuzzfile's, else
    one task per node at a time). A task array of multinode jobs is refused.
  - >-
    A service (C(kind) V(service) in O(job)) has RV(spec.service): its readiness probe,
    its port given by name already its number (V(null): ready once started), and
    O(service_ready_timeout); a job has V(null) there.
  - >-
    Every rank gets, for each endpoint of the services in O(services) (those of the run
    RUNNING when the job starts) and, for a service, of its own endpoints (at its rank 0's
    address), C(FB_ENDPOINT_URL_<NAME>) (C(<protocol>://<address>:<port><path>), an IPv6
    address in brackets) and C(FB_ENDPOINT_PATH_<NAME>) (C(<path>)), NAME the endpoint's
    name upper-cased with every character outside C([A-Z0-9_]) as C(_), as Fuzzball gives
    them; like the C(MULTINODE_*) variables they win over the job's C(env) (a dropped entry
    is warned about) and C($VAR) in arguments expands them. RV(spec.extra_hosts) lists
    C(<service>.svc) and its address for each, the names jobs reach services by.
  - This module only computes; it changes nothing.
author:
  - fuzz.multinode developers (!UNKNOWN)
extends_documentation_fragment:
  - fuzz.multinode.volumes
  - fuzz.multinode.volumes.sharing
  - fuzz.multinode.attributes
  - fuzz.multinode.controller_task
options:
  job:
    description:
      - >-
        The job, exactly as returned in RV(fuzz.multinode.fuzzfile#module:job) or as an entry
        of RV(fuzz.multinode.fuzzfile#module:run): a job, or a service (its C(kind) V(service)).
      - >-
        Jobs of every C(multinode.implementation) can be planned except V(gasnet), which
        fails with a message that names the field and says what to do instead.
      - >-
        An entry of RV(fuzz.multinode.fuzzfile#module:run) is not checked against the run
        policy again (gasnet, rank host names, secrets), unless it was changed since or
        O(secret_names) or O(registry_secret_names) lacks a name it was checked with.
    type: dict
    required: true
  nodes:
    description:
      - The hosts that run the job, in rank order (the first one is rank 0, the head).
      - Must have exactly as many entries as the job's C(multinode.nodes) (1 without C(multinode)).
      - Each inventory host can run one rank only.
      - With O(local), exactly one entry, which runs every rank.
    type: list
    elements: dict
    required: true
    suboptions:
      node:
        description: The inventory host name.
        type: str
        required: true
      address:
        description: >-
          The host's IP address; rank 0's address becomes C(MULTINODE_NODE_IP), and rank host
          names resolve to these addresses.
        type: str
        required: true
  user:
    description: The unprivileged user that runs the job's processes on every node.
    type: str
    default: fuzz
  wrapper_path:
    description: Absolute path of the SSH wrapper on every node; the value of C(MULTINODE_SSH_WRAPPER)
        and C(MULTINODE_RSH_WRAPPER).
    type: str
    default: /multinode/ssh-wrapper
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL when a job's processes are stopped.
    type: int
    default: 10
  claim_lease:
    description: >-
      Seconds a node keeps this run's claim on the job while nothing of the run is alive
      there (between the job's registration and its start, and between its end and its
      cleanup); after that another run of the job may take it over. A positive integer.
      Put in the spec as RV(spec.claim_lease).
    type: int
    default: 120
  files:
    description:
      - The workflow's top-level C(files), name to contents, as returned in
        RV(fuzz.multinode.fuzzfile#module:workflow.files).
      - Required when the job has C(files) references; entries the job does not reference are
        ignored. Contents given in place (the job's C(inline_files)) come with the job.
    type: dict
  run:
    description: >-
      The run's id (C(FB_WORKFLOW_ID) of every process of the run), put in the spec as
      RV(spec.run); C($FB_WORKFLOW_ID) and C(${FB_WORKFLOW_ID}) in C(command) arguments
      expand to it. Empty - no run (the variable expands to nothing).
    type: str
    default: ""
  execution:
    description: >-
      Where the ranks run: V(container), each in the job's image (Podman), or V(host),
      on the bare host.
    type: str
    choices: [container, host]
    default: container
  services:
    description:
      - >-
        The services of the run that are RUNNING when the job starts (the workflow runner
        passes them; the C(fuzz.multinode.job) role takes C(fuzz_multinode_running_services)).
      - >-
        Their names must differ, and not be the service being planned (its own endpoints
        come from its plan); two endpoints giving the same variable are refused.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The service's name.
        type: str
        required: true
      address:
        description: The IP address of the node of the service's rank 0.
        type: str
        required: true
      endpoints:
        description: >-
          The service's endpoints, each C({name, port, protocol, path, scope}), as in the
          C(endpoints) of its entry in RV(fuzz.multinode.fuzzfile#module:run).
        type: list
        elements: dict
        default: []
  service_ready_timeout:
    description: >-
      For a service, the seconds it may take to become ready (its readiness probe
      passing; without one, started) before it is given up; put in the spec as
      RV(spec.service.ready_timeout). A positive integer (the C(fuzz.multinode.job)
      role's C(fuzz_multinode_service_ready_timeout)).
    type: int
    default: 300
  local:
    description: >-
      Local mode: run every rank (or every task of a task array) on the one host in
      O(nodes), each rank in its own UTS namespace with its own host name. Wrapper calls
      reach a rank through the head's local launch socket instead of ssh, so the host
      needs no sshd. RV(spec.local) is true.
    type: bool
    default: false
seealso:
  - module: fuzz.multinode.fuzzfile
"""

EXAMPLES = r"""
- name: Read the job
  fuzz.multinode.fuzzfile:
    path: "{{ playbook_dir }}/generic-multinode.yml"
  delegate_to: localhost
  run_once: true
  register: fuzzfile

- name: Collect the job's nodes in rank order (facts of the compute group gathered)
  ansible.builtin.set_fact:
    job_nodes: >-
      {{ job_nodes | default([])
         + [{'node': item, 'address': hostvars[item].ansible_default_ipv4.address}] }}
  loop: "{{ groups['compute'][:fuzzfile.job.nodes] }}"
  run_once: true

- name: Plan its ranks on those nodes
  fuzz.multinode.rank_plan:
    job: "{{ fuzzfile.job }}"
    nodes: "{{ job_nodes }}"
  delegate_to: localhost
  run_once: true
  register: plan

- name: Plan with an explicit node list
  fuzz.multinode.rank_plan:
    job: "{{ fuzzfile.job }}"
    nodes:
      - node: node-1
        address: 172.18.0.2
      - node: node-2
        address: 172.18.0.3
    user: fuzz
  delegate_to: localhost
  run_once: true
  register: plan

- name: Show the head's command line
  ansible.builtin.debug:
    msg: "{{ plan.spec.argv | join(' ') }}"
"""

RETURN = r"""
spec:
  description: The job spec (see C(docs/design.md), "The job spec"), written as JSON to every node
      of the job.
  returned: success
  type: dict
  contains:
    job: {description: "The job's name.", type: str, sample: generic-multinode}
    run: {description: "The run's id (O(run)).", type: str, sample: 20261201T120000Z-a1b2c3}
    user: {description: "The user that runs the job's processes.", type: str, sample: fuzz}
    mode:
      description: V(command) (run RV(spec.argv)) or V(script) (run RV(spec.script) with RV(spec.argv) as arguments).
      type: str
      sample: command
    argv:
      description: Command mode, C(command + args) expanded; script mode, C(args) expanded.
      type: list
      elements: str
      sample: [mpirun, -H, "generic-multinode-0:2,generic-multinode-1:2", -np, "4", mpi_hello_world]
    launcher:
      description: >-
        The argv prefix rank 0 runs the job with, in front of RV(spec.argv) (command mode)
        or of the script's path and RV(spec.argv) (script mode): the MPI launcher for
        V(openmpi), V(ompi) and V(mpich); V([]) for V(generic) and jobs without C(multinode).
      type: list
      elements: str
      sample: [mpirun, -H, "hello-0:1,hello-1:1", --mca, plm_rsh_agent, /multinode/ssh-wrapper, -np, "2"]
    script: {description: "The script text in script mode, else V(null).", type: str, sample: null}
    cwd:
      description: Working directory of every rank (the job's C(cwd), default V(/)). The node runtime
          does not create it; the job fails before it starts on a node where the job user
          cannot enter it.
      type: str
      sample: /
    secret_env:
      description: The job's C(env) keys whose value is a C(secret://NAME) reference, key to NAME.
      type: dict
      sample: {API_TOKEN: user/api-token}
    secret_args:
      description: >-
        Each argument of RV(spec.argv) that expands a secret C(env) key, C({index, parts}):
        its parts C([kind, value]), V(text) and the expanded text or V(secret) and the
        secret's NAME, from which the node runtime builds the argument with the value. A
        task's own are in its RV(spec.ranks) entry.
      type: list
      elements: dict
      sample: [{index: 2, parts: [[text, "Authorization: Bearer "], [secret, user/api-token]]}]
    files:
      description: >-
        The job's C(files), each C({path, name, contents}) (C(name) empty for contents given
        in place), references first, in the job's order: written at
        C(path) on every node of the job as the job user (mode 0644, missing parent
        directories created as the job user) before the job starts, and removed again at
        cleanup with the directories created for them. An existing regular file of the job
        user is overwritten and kept; any other existing path fails the job.
      type: list
      elements: dict
      sample: [{path: /tmp/solver/solver.conf, name: solver.conf, contents: "tolerance = 1e-6\n"}]
    kill_grace: {description: "Seconds between SIGTERM and SIGKILL at cleanup.", type: int, sample: 10}
    claim_lease:
      description: Seconds the nodes keep this run's claim with nothing of the run alive.
      type: int
      sample: 120
    implementation:
      description: >-
        The job's C(multinode.implementation) (V(generic), V(openmpi), V(ompi) or V(mpich)),
        or V(null) for a job without C(multinode).
      type: str
      sample: generic
    nodes: {description: "Number of nodes (ranks).", type: int, sample: 2}
    slots_per_node: {description: "Slots per node, C(procs-per-node), else C(cores), else V(1).", type: int, sample: 2}
    total_slots: {description: "Nodes times slots per node (C(MULTINODE_TOTAL_SLOTS)).", type: int, sample: 4}
    unsupported:
      description: Job features that are ignored, including job C(env) entries overridden by the runtime.
      type: list
      elements: str
      sample: []
    local: {description: "Whether every rank runs on the one node (O(local)).", type: bool, sample: false}
    image:
      description: The job's image.
      type: dict
      contains:
        uri: {description: "C(image.uri).", type: str, sample: docker://mirror.gcr.io/library/alpine:3.16}
        secret:
          description: >-
            The NAME of C(image.secret) (C(secret://NAME)): the key in
            C(fuzz_multinode_secrets) of the registry credentials the nodes pull the image
            with; V(null) when the job names none or runs on the bare host.
          type: str
          sample: user/registry
    service:
      description: >-
        For a service, C(readiness_probe) (its C(readiness-probe), normalized: one handler,
        C(http-get.scheme) upper-case, a port a number; V(null) without one: ready once
        started) and C(ready_timeout) (O(service_ready_timeout)); V(null) for a job.
      type: dict
      sample: {readiness_probe: {http-get: {port: 8080, path: /healthz, scheme: HTTP},
                                 period-seconds: 5}, ready_timeout: 300}
      contains:
        readiness_probe: {description: "The service's C(readiness-probe), normalized; V(null) without one.", type: dict}
        ready_timeout:
          description: Seconds the service may take to become ready (O(service_ready_timeout)).
          type: int
    mounts:
      description: >-
        The job's volumes at their mount locations, parents before what they hold: the
        location, the volume's name and its store (V(ephemeral) or V(persistent/NAME)), the
        directory under RV(spec.volume_root) that each rank sees there.
      type: list
      elements: dict
      sample: [{location: /data, volume: data, store: ephemeral}]
    volume_root:
      description: The directory on every node under which the volumes are (O(volume_root)).
      type: str
      sample: /var/lib/fuzz-multinode/volumes
    volume_sharing:
      description: >-
        Whether RV(spec.volume_root) is storage every node shares: V(shared), V(node-local)
        or V(auto) (the head's file system type says).
      type: str
      sample: auto
    task_array:
      description: >-
        A task array's C(start), C(end) and the C(concurrency) the head enforces (the
        Fuzzfile's, else one task per node at a time); absent for other jobs.
      type: dict
      returned: when the job has a C(task-array)
      sample: {start: 1, end: 8, concurrency: 2}
    extra_hosts:
      description: >-
        C([host name, address]) for the ranks' C(/etc/hosts): C(<service>.svc) of every
        service in O(services) and, for a service, its own, at its rank 0's address.
      type: list
      elements: list
      sample: [[api.svc, 172.18.0.2]]
    ranks:
      description: One entry per rank, in rank order.
      type: list
      elements: dict
      contains:
        rank: {description: "The rank number.", type: int}
        name: {description: "The rank's host name, C(<job>-<rank>).", type: str}
        node: {description: "The inventory host that runs the rank.", type: str}
        address: {description: "The node's IP address.", type: str}
        slots: {description: "Slots of this rank.", type: int}
        env:
          description: >-
            The rank's environment (job C(env) plus runtime variables, C(FB_ENDPOINT_*)
            included); C(secret://) values stay references (see RV(spec.secret_env)).
          type: dict
      sample:
        - {rank: 0, name: generic-multinode-0, node: node-1, address: 172.18.0.2, slots: 2,
           env: {HOSTNAME: generic-multinode-0, RANK: "0",
                 MULTINODE_HOSTLIST: "generic-multinode-0:2,generic-multinode-1:2"}}
        - {rank: 1, name: generic-multinode-1, node: node-2, address: 172.18.0.3, slots: 2,
           env: {HOSTNAME: generic-multinode-1, RANK: "1"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    RANK_PLAN_ARGUMENT_SPEC,
    plan_ranks,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError


def main() -> None:
    # The action plugin of the same name does this on the controller when
    # the task runs there (plugins/action/rank_plan.py).
    module = AnsibleModule(argument_spec=RANK_PLAN_ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result, warnings = plan_ranks(module.params)
    except FuzzfileError as exc:
        module.fail_json(msg=to_native(exc))
    for warning in warnings:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
