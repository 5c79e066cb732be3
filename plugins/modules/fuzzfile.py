#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fuzzfile
short_description: Read, validate and normalize a Fuzzball Fuzzfile
version_added: 0.1.0
description:
  - >-
    Reads a Fuzzball workflow file (Fuzzfile, C(version) V(v1) or V(v4)) on the host where the
    module runs (normally the controller, with C(delegate_to: localhost)), validates it strictly
    and returns the whole workflow normalized, the jobs and services to run, and one job.
  - >-
    As in Fuzzball's own API, these are errors: unknown keys, wrong types, unknown enum values,
    relative C(cwd) or mount paths, bad durations (C(policy.timeout.execute) uses Go's syntax
    such as C(2h), C(10m0s), C(90s)), bad sizes, C(file://) references to missing top-level
    C(files), mounts of undeclared volumes, bad task arrays, dependency cycles and dependencies
    on unknown names. A message starts with the file path and the offending field's path (for
    example C(examples/x.yml: jobs.a.command: must be a list of strings)) or the YAML line and
    column; a cycle reads C(jobs: dependency cycle: a -> b -> a).
  - >-
    Normalization merges the defaults into every job per key (C(defaults.env), then
    C(defaults.job), then the job's own C(env), C(resource), C(policy) and C(mounts); services
    use C(defaults.service)), computes each job's slots, and orders the jobs and services by
    their C(depends-on) (or deprecated C(requires)) dependencies.
  - >-
    Keys Fuzzball knows but this collection does not execute yet (for example a job's
    C(network), a service's C(network.isolated), C(resource.exclusive), C(policy.restart)) are
    validated, listed in RV(workflow.unsupported) and RV(job.unsupported), and warned of, as are
    RV(workflow.warnings).
  - >-
    Services run like jobs (RV(run) holds them, RV(job.kind) V(service)); a workflow of services
    only is a workflow like any other. A service's C(readiness-probe) C(port) may name a
    C(network.ports) entry (returned as its number). C(network.endpoints) entries, as this
    collection reads the vendor's form, take C(name) (letters, digits and C(-); unique in the
    workflow, in any case), C(port-name) (a C(network.ports) name) or C(port) (with neither, the
    service's only port), C(protocol) (V(http) by default, V(https), V(tcp), V(udp) or V(grpc),
    any case), C(path) (an absolute URL path; V(/) by default), C(type) (Fuzzball's ingress kind:
    accepted, noted and ignored: there is no ingress here) and C(scope) (V(user), V(public),
    V(group) or any non-empty string, a templated one too: shown with the endpoint's URL in the
    service's ready line and noted as not enforced: anyone who can reach the service's rank 0
    node reaches the endpoint at its address and port).
  - >-
    Every job and service to run must be runnable under its rank host names: the module fails
    when C(<job>-<rank>) would be longer than 63 characters (one DNS label). A service needs a
    C(command) or a C(script) (its image's own entry point is not run) and cannot be a
    C(task-array).
  - >-
    A volume's C(ingress) and C(egress) are checked: sources C(https://), C(http://),
    C(s3://BUCKET/KEY) or C(file://<name of a top-level files entry>) into C(file://PATH) inside
    the volume; from C(file://PATH) to C(s3://BUCKET/KEY) or C(file://PATH) (under the
    controller's egress directory). A PATH with a leading C(/) is written from the root of the
    volume (or of the egress directory): C(file:///ref.fa) is C(ref.fa) there. A PATH that
    escapes with C(..), names no file (C(file:///), C(file://dir/)) or starts with C(//) is
    refused, naming the field. The run's transfers are returned as RV(transfers). A v1 volume's
    C(reference) is one of those RV(job.volumes) lists.
  - The result's RV(job) is the input of M(fuzz.multinode.rank_plan).
author:
  - fuzz.multinode developers (!UNKNOWN)
requirements:
  - PyYAML
extends_documentation_fragment:
  - fuzz.multinode.attributes
  - fuzz.multinode.controller_task
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
      - Name of the job or service to select (a key under C(jobs) or C(services)),
        returned as RV(job) and as the only entry of RV(run).
      - When omitted, RV(run) lists every job and service of the workflow in dependency
        order (the whole workflow runs), and RV(job) is returned only when the workflow
        has exactly one job (or no job and one service). The whole workflow is validated
        either way.
    type: str
  inventory_hosts:
    description:
      - >-
        How many hosts the jobs can run on (run-job.yml gives the size of the inventory group
        C(multinode)). When given, a job or service to run whose C(multinode.nodes) is larger
        fails the module, naming each such job and both numbers, before any host is touched.
      - Omitted (local mode, where every rank runs on one machine), there is no such limit.
    type: int
  s3_secret_names:
    description:
      - >-
        The names of the secrets whose values are S3 credentials: a mapping of
        C(access_key_id) and C(secret_access_key) (non-empty strings) and optionally
        C(session_token), C(region) and C(endpoint_url) (the filter
        C(fuzz.multinode.s3_secret_names) picks them out of C(fuzz_multinode_secrets)).
        When given, an C(s3://) transfer whose C(secret) names a secret not in this list
        fails the module, naming the field and the reference, before any host is touched.
      - >-
        With O(secret_names), a transfer's C(secret) must be defined; with
        O(registry_secret_names), an C(https://) or C(http://) transfer's C(secret) must be a
        user name and password (basic authentication).
      - Names only; secret values never pass through this module.
    type: list
    elements: str
  secret_arguments:
    description: >-
      What to do with a C(command) or C(args) entry that expands a C(secret://) env value (users
      logged in on the job's nodes can read the value in the rank's command line; other jobs
      cannot): V(allow) runs the job with a warning naming the field; V(refuse) fails the module
      naming it, before any host is touched (the role variable C(fuzz_multinode_secret_arguments)).
      The value itself never passes through this module: the job spec keeps the argument's parts
      and the node builds it.
    type: str
    choices: [allow, refuse]
    default: allow
notes:
  - >-
    The file is parsed with PyYAML's safe loader, adjusted to be closer to the YAML 1.2
    parser Fuzzball uses: only C(true) and C(false) are booleans (C(yes), C(no), C(on)
    and C(off) stay strings), dates stay strings, and a key repeated in one mapping is an
    error.
  - >-
    C(multinode.implementation) V(generic) runs the command as given; V(openmpi), V(ompi)
    and V(mpich) run it under the MPI launcher across all ranks, as Fuzzball does (see
    M(fuzz.multinode.rank_plan)). V(gasnet) jobs are refused here, before any host is
    touched: this collection has no GASNet launcher; the message says how to run such a
    program as a V(generic) job with GASNet's ssh spawner instead.
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

- name: Show how many nodes and slots the job needs
  ansible.builtin.debug:
    msg: >-
      {{ fuzzfile.job.name }} needs {{ fuzzfile.job.nodes }} node(s),
      {{ fuzzfile.job.total_slots }} slot(s) in all

- name: Show the jobs that can start together, wave by wave
  ansible.builtin.debug:
    msg: "wave {{ wave_index }}: {{ item | join(', ') }}"
  loop: "{{ fuzzfile.workflow.waves }}"
  loop_control:
    index_var: wave_index

- name: Show each job's timeout
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.value.timeout_seconds | default('no', true) }} timeout"
  loop: "{{ fuzzfile.workflow.job_defs | dict2items }}"
"""

RETURN = r"""
workflow:
  description: The whole workflow, validated and normalized.
  returned: success
  type: dict
  contains:
    version: {description: "The Fuzzfile version.", type: str, sample: v4}
    jobs:
      description: Names of the workflow's jobs, in file order.
      type: list
      elements: str
      sample: [prepare, solve, report]
    services: {description: "Names of the workflow's services, in file order.", type: list, elements: str, sample: []}
    unsupported:
      description: Workflow-level features that were accepted but are ignored (annotations, a
          volume's storage class, and features set in C(defaults)).
      type: list
      elements: str
      sample: ["annotations: workflow annotations are not supported yet; ignored"]
    warnings:
      description: Other warnings, such as a deprecated C(requires) or tabs read as indentation.
      type: list
      elements: str
      sample: ["jobs.report.requires: deprecated; read as depends-on with status FINISHED"]
    files:
      description: The top-level C(files), name to contents.
      type: dict
      sample: {"solver.conf": "tolerance = 1e-6\n"}
    volumes:
      description: Every declared volume by name - its C(store) (V(ephemeral), C(persistent/NAME),
          V(user/persistent) or V(account/persistent))
          and its C(ingress) and C(egress) items, each C(source), C(destination) (URIs as
          written), C(secret) (the C(secret://) reference of the end that is not the volume,
          or V(null)), C(timeout_seconds) (C(policy.timeout.execute), or V(null)) and
          C(attempts) (C(policy.retry.attempts), at least 1).
      type: dict
      sample: {"data": {"store": "ephemeral", "ingress": [{"source": "https://example.org/in.csv",
               "destination": "file://in.csv", "secret": null, "timeout_seconds": null, "attempts": 1}],
               "egress": []}}
    order:
      description: Every job and service in an order that respects the dependencies; among the
          ones ready at the same time, the earlier in the file (jobs before services)
          comes first.
      type: list
      elements: str
      sample: [prepare, solve, report]
    waves:
      description: The jobs and services grouped by dependency depth; everything in one wave can
          run concurrently once the earlier waves reached the statuses it depends on.
      type: list
      elements: list
      sample: [[prepare], [solve], [report]]
    job_defs: {description: "Every job by name, normalized, in the form of RV(job).", type: dict}
    service_defs:
      description: Every service by name, normalized, in the form of RV(job) with RV(job.kind) V(service).
      type: dict
run:
  description:
    - >-
      The jobs and services to run, in dependency order, each in the form of RV(job) (its
      RV(job.kind) says which); the one named by O(job), or every job and service of the
      workflow.
    - >-
      Each also has C(admitted), the record that this task admitted it (its rank host names
      fit, its implementation can run here and, with O(secret_names), every secret it
      references is defined; with O(registry_secret_names), its C(image.secret) holds
      registry credentials): M(fuzz.multinode.rank_plan) does not check such a job again
      unless it was changed since.
  returned: success
  type: list
  elements: dict
transfers:
  description:
    - >-
      The data movement of the run - for each volume that a job of RV(run) mounts and that
      has C(ingress) or C(egress), in the Fuzzfile's order - the input of
      M(fuzz.multinode.volume_transfers).
    - >-
      C(hosts) - how many of the play's first hosts run a job that mounts the volume (each job
      runs on the first hosts, so the first host has every volume); C(s3) - whether an item
      is C(s3://); each item with C(field) (its path in the Fuzzfile, for messages) and
      C(secret), the secret's name in C(fuzz_multinode_secrets) (not a value).
  returned: success
  type: list
  elements: dict
  sample: [{"volume": "data", "store": "ephemeral", "hosts": 2, "s3": true,
            "ingress": [{"field": "volumes.data.ingress[0]", "source": "s3://inputs/case.tar",
                         "destination": "file://case.tar", "secret": "user/s3",
                         "timeout_seconds": 600.0, "attempts": 1}],
            "egress": []}]
job:
  description: The selected job (or service), normalized (defaults merged). Pass it unchanged to
      M(fuzz.multinode.rank_plan).
  returned: when O(job) is given, or the workflow has exactly one job (or no job and one service)
  type: dict
  contains:
    name:
      description: The job's name (its key under C(jobs)); rank host names are C(<name>-<rank>).
      type: str
      sample: generic-multinode
    kind: {description: "V(job), or V(service) in RV(workflow.service_defs).", type: str, sample: job}
    image_uri: {description: "The job's C(image.uri).", type: str, sample: docker://mirror.gcr.io/library/alpine:3.16}
    command:
      description:
        - The job's C(command) (argv, not expanded yet), or V(null) for a script job.
        - >-
          A bare number in the Fuzzfile's list (C([blastp, -num_threads, 8])) is an argument,
          its text as written; a boolean or null is refused.
      type: list
      elements: str
      sample: [mpirun, -H, $MULTINODE_HOSTLIST]
    script: {description: "The job's C(script) text, or V(null) for a command job.", type: str, sample: null}
    args:
      description: The job's C(args) (bare numbers as in RV(job.command)).
      type: list
      elements: str
      sample: []
    env:
      description: The job's environment as C([key, value]) pairs, defaults merged (C(defaults.env),
          then C(defaults.job.env), then the job's C(env)). A key given twice keeps its
          first position and its last value.
      type: list
      elements: list
      sample: [[PATH, /usr/local/bin:/usr/bin:/bin]]
    secret_env:
      description:
        - Keys of RV(job.env) whose value is a C(secret://) reference.
        - >-
          run-job.yml resolves C(secret://NAME) from the variable C(fuzz_multinode_secrets)
          (NAME to value, normally a vault-encrypted vars file) on the job's nodes; the
          values never appear in a module result or the play's output.
      type: list
      elements: str
      sample: []
    cwd:
      description:
        - The job's C(cwd), or V(null) when not set (the job then runs in V(/)).
        - >-
          Every rank runs in it; it is not created, and a job whose user cannot enter it on
          one of its nodes fails before it starts.
      type: str
      sample: null
    cores: {description: "C(resource.cpu.cores) (defaults merged), or V(null) when not set.", type: int, sample: 2}
    affinity:
      description: C(resource.cpu.affinity) (V(NUMA), V(SOCKET) or V(CORE)), or V(null).
      type: str
      sample: NUMA
    memory_bytes:
      description: C(resource.memory.size) in bytes, or V(null) when not set.
      type: int
      sample: 1000000000
    memory_by_core: {description: "C(resource.memory.by-core) (the size is per core).", type: bool, sample: false}
    nodes:
      description: C(multinode.nodes), the number of ranks; V(1) for a job without C(multinode).
      type: int
      sample: 2
    implementation:
      description: C(multinode.implementation), or V(null) for a job without C(multinode).
      type: str
      sample: generic
    procs_per_node: {description: "C(multinode.procs-per-node), or V(null) when not set.", type: int, sample: null}
    slots_per_node: {description: "Slots per node, C(procs-per-node), else C(cores), else V(1).", type: int, sample: 2}
    total_slots:
      description: RV(job.nodes) x RV(job.slots_per_node) (C(MULTINODE_TOTAL_SLOTS)).
      type: int
      sample: 4
    depends_on:
      description: The jobs and services this one waits for, with the status each must reach
          (V(FINISHED), or V(RUNNING) for a service). From C(depends-on), else from the
          deprecated C(requires) (status V(FINISHED)).
      type: list
      elements: dict
      sample: [{name: prepare, status: FINISHED}]
    timeout_seconds:
      description: C(policy.timeout.execute) in seconds, or V(null) for no timeout.
      type: float
      sample: 5400.0
    task_array:
      description: C(task-array) as C({start, end, concurrency}), or V(null).
      type: dict
      sample: {start: 1, end: 8, concurrency: 4}
    tasks:
      description: Number of task-array tasks (C(end - start + 1)); V(1) without a task array.
      type: int
      sample: 1
    files:
      description:
        - C(files) given as C(file://) references, container path to the name of a top-level
          C(files) entry.
        - >-
          run-job.yml writes each one at its path on every node of the job, as the job user,
          before the job starts, and removes it at cleanup (see
          M(fuzz.multinode.rank_plan)'s RV(fuzz.multinode.rank_plan#module:spec.files)).
      type: dict
      sample: {/etc/solver.conf: solver.conf}
    inline_files:
      description: C(files) whose contents are given in place of a C(file://) reference, container path
          to contents; written as RV(job.files) are.
      type: dict
      sample: {/etc/app.conf: "threads = 4\n"}
    mounts:
      description: >-
        The mounts (defaults merged), mount location (an absolute container path) to volume
        name, whichever form the Fuzzfile used (v1 C(VOLUME: {location: /path}), v4
        C(/path: {volume: VOLUME}), or the short C(/path: VOLUME)).
      type: dict
      sample: {/scratch: scratch}
    volumes:
      description: >-
        Where each volume that RV(job.mounts) names is kept: V(ephemeral) (one per run of
        the workflow, C(volume://user/ephemeral) or C(volume://user/ephemeral/NAME), NAME
        checked and noted, or v4 C(use: ephemeral)), C(persistent/NAME)
        (C(volume://user/persistent/NAME), or a v4 volume of another storage class, named by
        its C(name) or else its key), V(user/persistent) (the job user's own,
        C(volume://user/persistent)) or V(account/persistent) (the account's,
        C(volume://account/persistent)).
      type: dict
      sample: {scratch: ephemeral, results: persistent/results}
    image_secret:
      description: >-
        C(image.secret), a C(secret://NAME) reference to the registry credentials the
        image is pulled with (run-job.yml takes them from C(fuzz_multinode_secrets)), or
        V(null).
      type: str
    cpu_threads: {description: "C(resource.cpu.threads), or V(null) (not supported yet).", type: bool}
    cpu_sockets: {description: "C(resource.cpu.sockets), or V(null) (not supported yet).", type: int}
    devices:
      description: >-
        C(resource.devices): CDI device kind (C(VENDOR/CLASS), such as V(nvidia.com/gpu))
        to how many devices of it each rank or task gets, distinct from every other rank's,
        task's and job's on its node, from the nodes' CDI specifications (C(/etc/cdi),
        C(/var/run/cdi)).
      type: dict
    exclusive:
      description: >-
        C(resource.exclusive) (noted, not enforced: a node's devices are never shared
        between jobs; its CPUs may be).
      type: bool
    resource_annotations: {description: "C(resource.annotations) (scheduler hints; ignored).", type: dict}
    retry_attempts: {description: "C(policy.retry.attempts), or V(null) (ignored, as by Fuzzball).", type: int}
    restart:
      description: C(policy.restart) (V(on-node-fault) or V(never)), or V(null) (not supported yet).
      type: str
    network_isolated:
      description: C(network.isolated) (not supported yet; jobs and services use their nodes' network).
      type: bool
    expose_tcp: {description: "C(network.expose-tcp) (not supported yet).", type: list, elements: int}
    expose_udp: {description: "C(network.expose-udp) (not supported yet).", type: list, elements: int}
    persist:
      description: >-
        A service's C(persist) (it keeps running until the workflow ends, not only until
        its last dependant has), else V(null).
      type: bool
    readiness_probe:
      description: >-
        A service's C(readiness-probe) as in the Fuzzfile, normalized (its one handler and
        the timings given; C(http-get.scheme) upper-case, V(HTTP) when not given; a
        C(port) given by name replaced by the number of that C(network.ports) entry),
        else V(null). It decides when the service is RUNNING.
      type: dict
      sample: {http-get: {port: 8080, path: /healthz, scheme: HTTP}, period-seconds: 5}
    ports:
      description: >-
        A service's C(network.ports), each C({name, port, protocol}) (C(name) V(null) when
        not given, C(protocol) V(TCP) or V(UDP)); V([]) for a job.
      type: list
      elements: dict
      sample: [{name: http, port: 8080, protocol: TCP}]
    endpoints:
      description: >-
        A service's C(network.endpoints), each C({name, port, protocol, path, scope}), the
        port resolved (from C(port-name), C(port) or the service's only port), C(protocol)
        lower-case, C(scope) as written or V(null) (not enforced); jobs get
        C(FB_ENDPOINT_URL_<NAME>) and C(FB_ENDPOINT_PATH_<NAME>) of each (see
        M(fuzz.multinode.rank_plan)). V([]) for a job.
      type: list
      elements: dict
      sample: [{name: vnc, port: 6080, protocol: http, path: /, scope: user}]
    unsupported:
      description: Job features that were accepted but are ignored.
      type: list
      elements: str
      sample: ["jobs.solve.policy.restart: restart policies are not supported yet; ignored"]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    FUZZFILE_ARGUMENT_SPEC,
    load_fuzzfile,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import HAS_YAML, FuzzfileError


def main() -> None:
    # The action plugin of the same name does this on the controller when
    # the task runs there (plugins/action/fuzzfile.py).
    module = AnsibleModule(argument_spec=FUZZFILE_ARGUMENT_SPEC, supports_check_mode=True)
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    try:
        result, warnings = load_fuzzfile(module.params)
    except FuzzfileError as exc:
        module.fail_json(msg=to_native(exc))
    for warning in warnings:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
