"""Tests for the workflow part of plugins/module_utils/fuzzfile.py: every
field of the reference (v1 and v4), defaults merging, dependencies and their
order, Go durations, task arrays, files, volumes, services; plus the workflow
example through the fuzz.multinode.fuzzfile module.

The single-job rules and the YAML dialect are in test_fuzzfile.py, the JSON
forms in test_job_form.py."""

import json
import os
import re
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    Dependency,
    Endpoint,
    FuzzfileError,
    Port,
    TaskArray,
    Transfer,
    Volume,
    dependency_order,
    load_workflow,
    not_executed_yet,
    parse_go_duration,
    parse_workflow,
    select_job,
)

from test_fuzzfile import adhoc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPELINE = os.path.join(ROOT, "examples", "pipeline.yml")
DELETE = object()


def job(**changes):
    """A valid job mapping; keyword values replace keys (DELETE removes)."""
    data = {"image": {"uri": "docker://alpine:3.16"}, "command": ["true"]}
    for key, value in changes.items():
        key = key.replace("_", "-")
        if value is DELETE:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def workflow(jobs=None, version="v4", **top):
    data = {"version": version, "jobs": {"solve": job()} if jobs is None else jobs}
    data.update(top)
    return data


def parse(data):
    return parse_workflow(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def error(data):
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    with pytest.raises(FuzzfileError) as info:
        parse_workflow(text)
    return str(info.value)


def after(*names):
    return [{"name": name, "status": "FINISHED"} for name in names]


# ---------------------------------------------------------------------------
# every field of the reference


V4_EVERYTHING = """\
version: v4
files:
  conf: |
    a = 1
  data.csv: "x,y\\n1,2\\n"
annotations:
  team: hpc
volumes:
  scratch:
    use: ephemeral
    size: 10GiB
  data:
    use: shared-nfs
    name: project-data
    annotations:
      tier: fast
    ingress:
      - source: {uri: "s3://bucket/input.csv", secret: "secret://user/s3"}
        destination: {uri: "file://input.csv"}
        policy:
          timeout: {execute: 5m}
          retry: {attempts: 2}
      - source: {uri: "file://data.csv"}
        destination: {uri: "file://data.csv"}
    egress:
      - source: {uri: "file://result.csv"}
        destination: {uri: "s3://bucket/result.csv", secret: "secret://user/s3"}
  legacy:
    reference: volume://user/persistent/legacy
defaults:
  env: [LC_ALL=C, LEVEL=workflow]
  mounts:
    /scratch: {volume: scratch}
  resource:
    cpu: {cores: 2}
  job:
    env: [LEVEL=job]
    mounts:
      /data: {volume: data}
    policy:
      timeout: {execute: 10m0s}
    resource:
      memory: {size: 1GB}
  service:
    env: [LEVEL=service]
    mounts:
      /srv: {volume: data}
    resource:
      memory: {size: 2GB}
jobs:
  prepare:
    name: ignored
    image: {uri: "docker://alpine:3.16", secret: "secret://user/registry"}
    script: |
      #!/bin/sh
      echo "$1"
    args: [hello]
    env: [TOKEN=secret://user/token]
    cwd: /work
    files:
      /etc/app.conf: file://conf
    requires: [db]
  solve:
    image: {uri: "oras://example.org/solver.sif"}
    command: [/bin/sh, -c, mpi_hello_world]
    env: [PATH=/usr/lib64/openmpi/bin:/usr/bin:/bin]
    mounts:
      /data: {volume: scratch}
    resource:
      cpu: {cores: 4, affinity: SOCKET, threads: true, sockets: 1}
      memory: {size: 512MiB, by-core: true}
      devices: {nvidia.com/gpu: 1}
      exclusive: true
      annotations: {rack: a1}
    multinode: {nodes: 2, implementation: openmpi, procs-per-node: 3}
    policy:
      timeout: {execute: 1h30m}
      retry: {attempts: 3}
      restart: on-node-fault
    network:
      isolated: true
      expose-tcp: [8080]
      expose-udp: [9000, 9001]
    depends-on:
      - {name: prepare, status: finished, description: the input}
      - {name: db, status: Running}
  sweep:
    image: {uri: "docker://alpine:3.16"}
    command: [/bin/sh, -c, 'echo $FB_TASK_ID']
    task-array: {start: 1, end: 10, concurrency: 4}
    depends-on:
      - {name: solve}
services:
  db:
    image: {uri: "docker://postgres:16"}
    persist: true
    env: [POSTGRES_PASSWORD=secret://user/db]
    resource:
      cpu: {cores: 1}
    readiness-probe:
      tcp-socket: {port: 5432}
      initial-delay-seconds: 0
      period-seconds: 5
      timeout-seconds: 1
      success-threshold: 1
      failure-threshold: 3
    network:
      ports:
        - {name: pg, port: 5432, protocol: tcp}
      endpoints:
        - {name: pg}
      host: false
    multinode: {nodes: 1, implementation: generic}
  web:
    image: {uri: "docker://nginx"}
    command: [nginx, -g, daemon off;]
    network:
      ports:
        - {name: http, port: 8443}
        - {port: 9000, protocol: udp}
      endpoints:
        - {name: site, port-name: http, protocol: HTTPS, path: /app/, type: subdomain}
        - {name: metrics, port: 9100, protocol: tcp}
    readiness-probe:
      http-get:
        path: /healthz
        port: http
        scheme: HTTPS
        http-headers: [{name: X-Probe, value: "1"}]
  grpc:
    image: {uri: "docker://example/grpc"}
    command: [server]
    readiness-probe:
      grpc: {port: 50051, service: health}
  probe-exec:
    image: {uri: "docker://example/tool"}
    readiness-probe:
      exec: {command: [cat, /tmp/ready]}
"""


def test_v4_everything():
    wf = parse_workflow(V4_EVERYTHING)
    assert wf.version == "v4"
    assert list(wf.jobs) == ["prepare", "solve", "sweep"]
    assert wf.services == ["db", "web", "grpc", "probe-exec"]
    assert wf.files == {"conf": "a = 1\n", "data.csv": "x,y\n1,2\n"}
    assert wf.unsupported == [
        "annotations: workflow annotations are not supported yet; ignored",
        "volumes.data.use: storage classes are not supported yet: the volume is kept under "
        "fuzz_multinode_volume_root like every other",
    ]
    # The transfers are run: each with its secret, timeout and attempts.
    assert wf.volumes["data"] == Volume(
        "persistent/project-data",
        ingress=[Transfer("s3://bucket/input.csv", "file://input.csv", "secret://user/s3", 300.0, 2),
                 Transfer("file://data.csv", "file://data.csv")],
        egress=[Transfer("file://result.csv", "s3://bucket/result.csv", "secret://user/s3")])
    assert wf.volumes["scratch"] == Volume("ephemeral")
    assert wf.volumes["legacy"] == Volume("persistent/legacy")
    # use: ephemeral is the run's; a volume of another storage class, with a
    # name, is that persistent volume
    both = {"scratch": "ephemeral", "data": "persistent/project-data"}
    assert {name: unit.volumes for name, unit in wf.units.items()} == {
        "prepare": both, "solve": {"scratch": "ephemeral"}, "sweep": both,
        "db": both, "web": both, "grpc": both, "probe-exec": both}
    assert wf.warnings == ["jobs.prepare.requires: deprecated; read as depends-on with status "
                           "FINISHED"]

    prepare = wf.jobs["prepare"]
    assert prepare.script == '#!/bin/sh\necho "$1"\n' and prepare.args == ["hello"]
    assert prepare.env == [("LC_ALL", "C"), ("LEVEL", "job"), ("TOKEN", "secret://user/token")]
    assert prepare.secret_env == ["TOKEN"]
    assert prepare.cwd == "/work"
    assert prepare.files == {"/etc/app.conf": "conf"}
    assert prepare.mounts == {"/scratch": "scratch", "/data": "data"}
    assert (prepare.cores, prepare.memory_bytes, prepare.timeout_seconds) == (2, 10**9, 600.0)
    assert prepare.depends_on == [Dependency("db", "FINISHED")]
    assert prepare.image_secret == "secret://user/registry"
    assert prepare.unsupported == []

    solve = wf.jobs["solve"]
    assert solve.command == ["/bin/sh", "-c", "mpi_hello_world"]
    assert solve.env == [
        ("LC_ALL", "C"),
        ("LEVEL", "job"),
        ("PATH", "/usr/lib64/openmpi/bin:/usr/bin:/bin"),
    ]
    assert solve.mounts == {"/scratch": "scratch", "/data": "scratch"}
    assert (solve.cores, solve.affinity, solve.cpu_threads, solve.cpu_sockets) == (
        4, "SOCKET", True, 1)
    assert (solve.memory_bytes, solve.memory_by_core) == (512 * 2**20, True)
    assert (solve.devices, solve.exclusive, solve.resource_annotations) == (
        {"nvidia.com/gpu": 1}, True, {"rack": "a1"})
    assert (solve.nodes, solve.implementation, solve.procs_per_node) == (2, "openmpi", 3)
    assert (solve.slots_per_node, solve.total_slots, solve.tasks) == (3, 6, 1)
    assert (solve.timeout_seconds, solve.retry_attempts, solve.restart) == (
        5400.0, 3, "on-node-fault")
    assert (solve.network_isolated, solve.expose_tcp, solve.expose_udp) == (
        True, [8080], [9000, 9001])
    assert solve.depends_on == [Dependency("prepare", "FINISHED"), Dependency("db", "RUNNING")]
    assert solve.unsupported == [
        "jobs.solve.resource.cpu.threads: hardware threads selection is not supported yet; "
        "ignored",
        "jobs.solve.resource.cpu.sockets: socket counts are not supported yet; ignored",
        "jobs.solve.resource.exclusive: exclusive node use is not enforced (a node's "
        "devices are never shared between jobs; its CPUs may be); noted",
        "jobs.solve.resource.annotations: resource annotations are scheduler hints, not used here; ignored",
        "jobs.solve.policy.retry.attempts: retries are not supported yet (Fuzzball ignores "
        "them too); ignored",
        "jobs.solve.policy.restart: restart policies are not supported yet; ignored",
        "jobs.solve.network: network settings are not supported yet; ignored",
    ]

    sweep = wf.jobs["sweep"]
    assert sweep.task_array == TaskArray(1, 10, 4)
    assert (sweep.tasks, sweep.nodes, sweep.total_slots) == (10, 1, 2)

    db = wf.service_defs["db"]
    assert db.kind == "service" and db.persist is True
    assert db.command is None and db.script is None
    # defaults.service, not defaults.job
    assert db.env == [("LC_ALL", "C"), ("LEVEL", "service"),
                      ("POSTGRES_PASSWORD", "secret://user/db")]
    assert db.mounts == {"/scratch": "scratch", "/srv": "data"}
    assert (db.cores, db.memory_bytes, db.timeout_seconds) == (1, 2 * 10**9, None)
    assert (db.nodes, db.implementation) == (1, "generic")
    # services run on their nodes' network (host networking): host: false is noted
    assert db.unsupported == ["services.db.network.host: false is not supported: a service runs "
                              "on its nodes' own network, as with host: true; ignored"]
    # the only port of the service is its endpoint's
    assert db.ports == [Port("pg", 5432, "TCP")]
    assert db.endpoints == [Endpoint("pg", 5432, "http", "/")]
    assert db.readiness_probe["tcp-socket"] == {"port": 5432}

    web = wf.service_defs["web"]
    assert web.ports == [Port("http", 8443, "TCP"), Port(None, 9000, "UDP")]
    assert web.endpoints == [Endpoint("site", 8443, "https", "/app/"),
                             Endpoint("metrics", 9100, "tcp", "/")]
    # the probe's port named as a network.ports entry is its number
    assert web.readiness_probe == {"http-get": {"port": 8443, "path": "/healthz", "scheme": "HTTPS",
                                                "http-headers": [{"name": "X-Probe", "value": "1"}]}}
    assert web.unsupported == [
        "services.web.network.endpoints[0].type: ingress kinds are not supported (there is no "
        "ingress: an endpoint is reached at its service's rank 0 address); ignored"]

    assert wf.order == ["db", "prepare", "solve", "sweep", "web", "grpc", "probe-exec"]
    assert wf.waves == [["db", "web", "grpc", "probe-exec"], ["prepare"], ["solve"], ["sweep"]]


V1_EVERYTHING = """\
version: v1
files:
  conf: "a = 1\\n"
annotations:
  team: hpc
volumes:
  data:
    reference: volume://user/persistent/data
    ingress:
      - source: {uri: "https://example.org/in.tgz"}
        destination: {uri: "file://in.tgz"}
    egress:
      - source: {uri: "file://out.tgz"}
        destination: {uri: "s3://bucket/out.tgz", secret: "secret://user/s3"}
  scratch:
    reference: volume://user/ephemeral
defaults:
  job:
    env: [A=default, B=default]
    mounts:
      scratch: {location: /scratch}
    policy:
      timeout: {execute: 2h}
      retry: {attempts: 0}
    resource:
      cpu: {cores: 2, affinity: NUMA}
      memory: {size: 1GiB}
jobs:
  first:
    image: {uri: "docker://alpine"}
    command: ["true"]
    env: [B=job]
    mounts:
      data: {location: /data}
    files:
      /etc/conf: file://conf
    resource:
      memory: {size: 2GiB}
    policy:
      restart: never
  second:
    image: {uri: "docker://alpine"}
    command: ["true"]
    requires: [first]
"""


def test_v1_everything():
    wf = parse_workflow(V1_EVERYTHING)
    first, second = wf.jobs["first"], wf.jobs["second"]
    assert first.env == [("A", "default"), ("B", "job")]
    assert first.mounts == {"/scratch": "scratch", "/data": "data"}
    assert (first.cores, first.affinity, first.memory_bytes) == (2, "NUMA", 2 * 2**30)
    assert (first.timeout_seconds, first.retry_attempts, first.restart) == (7200.0, 0, "never")
    assert first.files == {"/etc/conf": "conf"}
    assert second.depends_on == [Dependency("first", "FINISHED")]
    assert second.mounts == {"/scratch": "scratch"}
    assert (first.volumes, second.volumes) == ({"scratch": "ephemeral", "data": "persistent/data"},
                                               {"scratch": "ephemeral"})
    assert wf.order == ["first", "second"] and wf.waves == [["first"], ["second"]]
    assert wf.warnings == [
        "jobs.second.requires: deprecated; read as depends-on with status FINISHED"
    ]
    assert wf.unsupported == [
        "annotations: workflow annotations are not supported yet; ignored",
        "defaults.job.policy.retry.attempts: retries are not supported yet (Fuzzball ignores "
        "them too); ignored",
    ]
    assert first.unsupported == [
        "jobs.first.policy.restart: restart policies are not supported yet; ignored",
    ]


def test_the_workflow_example():
    with open(PIPELINE, encoding="utf-8") as handle:
        wf = parse_workflow(handle.read())
    assert wf.order == ["prepare", "solve", "energy", "residual", "report"]
    assert wf.waves == [["prepare"], ["solve"], ["energy", "residual"], ["report"]]
    assert wf.unsupported == [] and wf.warnings == []
    assert "tolerance = 1e-6\n" in wf.files["solver.conf"]
    solve = wf.jobs["solve"]
    assert solve.command == ["/bin/sh", "-c", "mpi_hello_world"]
    assert (solve.implementation, solve.nodes, solve.slots_per_node, solve.total_slots) == (
        "openmpi", 2, 2, 4)
    assert solve.env == [
        ("LC_ALL", "C"),
        ("OMPI_MCA_pml", "^ucx"),
        ("PATH", "/usr/lib64/openmpi/bin:/usr/local/bin:/usr/bin:/bin"),
    ]
    assert (solve.memory_bytes, solve.timeout_seconds) == (2**30, 5400.0)
    assert solve.depends_on == [Dependency("prepare", "FINISHED")]
    assert wf.jobs["prepare"].files == {"/tmp/solver.conf": "solver.conf"}
    assert (wf.jobs["prepare"].cores, wf.jobs["prepare"].memory_bytes) == (1, 256 * 2**20)
    assert wf.jobs["energy"].timeout_seconds == 90.0
    assert wf.jobs["residual"].timeout_seconds == 600.0
    assert wf.jobs["residual"].depends_on == [Dependency("solve", "FINISHED")]
    assert wf.jobs["report"].cwd == "/tmp"
    assert wf.jobs["report"].depends_on == [
        Dependency("energy", "FINISHED"), Dependency("residual", "FINISHED")]
    assert all(j.unsupported == [] for j in wf.jobs.values())
    assert load_workflow(json.loads(json.dumps(wf.to_dict()))) == wf


# ---------------------------------------------------------------------------
# defaults: merged per key, deeply


def test_env_precedence_per_key():
    wf = parse(workflow(
        {"a": job(env=["C=job", "D=job"]), "b": job()},
        defaults={"env": ["A=wf", "B=wf", "C=wf"], "job": {"env": ["B=dj", "C=dj"]}},
    ))
    assert wf.jobs["a"].env == [("A", "wf"), ("B", "dj"), ("C", "job"), ("D", "job")]
    assert wf.jobs["b"].env == [("A", "wf"), ("B", "dj"), ("C", "dj")]


def test_resource_merges_deeply():
    wf = parse(workflow(
        {
            "a": job(resource={"memory": {"size": "2GB"}, "devices": {"nvidia.com/gpu": 2, "xilinx.com/fpga": 1},
                               "annotations": {"b": "job"}}),
            "b": job(resource={"cpu": {"cores": 8}}),
        },
        defaults={
            "resource": {"cpu": {"cores": 2, "affinity": "NUMA"}, "devices": {"nvidia.com/gpu": 1},
                         "annotations": {"a": "wf", "b": "wf"}},
            "job": {"resource": {"memory": {"size": "1GB", "by-core": True}}},
        },
    ))
    a, b = wf.jobs["a"], wf.jobs["b"]
    assert (a.cores, a.affinity, a.memory_bytes, a.memory_by_core) == (2, "NUMA", 2 * 10**9, True)
    assert a.devices == {"nvidia.com/gpu": 2, "xilinx.com/fpga": 1}
    assert a.resource_annotations == {"a": "wf", "b": "job"}
    assert (b.cores, b.affinity, b.memory_bytes) == (8, "NUMA", 10**9)
    assert b.devices == {"nvidia.com/gpu": 1}
    assert b.slots_per_node == 8


def test_policy_merges_per_key():
    wf = parse(workflow(
        {
            "a": job(),
            "b": job(policy={"restart": "never"}),
            "c": job(policy={"timeout": {"execute": "90s"}}),
            "d": job(policy={"timeout": {"execute": "0"}}),
            "e": job(policy={"timeout": {}}),
        },
        defaults={"job": {"policy": {"timeout": {"execute": "2h"}, "retry": {"attempts": 1}}}},
    ))
    timeouts = {name: j.timeout_seconds for name, j in wf.jobs.items()}
    assert timeouts == {"a": 7200.0, "b": 7200.0, "c": 90.0, "d": None, "e": 7200.0}
    assert wf.jobs["b"].restart == "never" and wf.jobs["a"].restart is None
    assert {j.retry_attempts for j in wf.jobs.values()} == {1}


def test_mounts_merge_per_key_v4():
    wf = parse(workflow(
        {"a": job(mounts={"/data": {"volume": "other"}, "/x": {"volume": "other"}})},
        volumes={"data": {}, "other": {}},
        defaults={"mounts": {"/data": {"volume": "data"}},
                  "job": {"mounts": {"/y": {"volume": "data"}}}},
    ))
    assert wf.jobs["a"].mounts == {"/data": "other", "/y": "data", "/x": "other"}


def test_mounts_merge_per_volume_v1():
    wf = parse(workflow(
        {"a": job(mounts={"data": {"location": "/elsewhere"}})},
        version="v1",
        volumes={"data": {"reference": "volume://user/ephemeral"},
                 "tmp": {"reference": "volume://user/ephemeral"}},
        defaults={"job": {"mounts": {"data": {"location": "/data"}, "tmp": {"location": "/t"}}}},
    ))
    assert wf.jobs["a"].mounts == {"/elsewhere": "data", "/t": "tmp"}


def test_services_use_service_defaults_and_jobs_job_defaults():
    wf = parse(workflow(
        {"a": job()},
        services={"s": job(command=DELETE)},
        defaults={"env": ["ALL=1"], "job": {"env": ["JOB=1"], "policy": {"timeout": {
            "execute": "1m"}}}, "service": {"env": ["SERVICE=1"]}},
    ))
    assert wf.jobs["a"].env == [("ALL", "1"), ("JOB", "1")]
    assert wf.service_defs["s"].env == [("ALL", "1"), ("SERVICE", "1")]
    assert wf.jobs["a"].timeout_seconds == 60.0
    assert wf.service_defs["s"].timeout_seconds is None


def test_defaults_notes_are_workflow_notes():
    wf = parse(workflow(
        {"a": job()},
        defaults={"job": {"resource": {"exclusive": True, "cpu": {"threads": False}},
                          "policy": {"restart": "never"}}},
    ))
    assert wf.unsupported == [
        "defaults.job.resource.cpu.threads: hardware threads selection is not supported yet; "
        "ignored",
        "defaults.job.resource.exclusive: exclusive node use is not enforced (a node's "
        "devices are never shared between jobs; its CPUs may be); noted",
        "defaults.job.policy.restart: restart policies are not supported yet; ignored",
    ]
    a = wf.jobs["a"]
    assert (a.exclusive, a.cpu_threads, a.restart, a.unsupported) == (True, False, "never", [])


def test_empty_or_false_unsupported_values_are_not_notes():
    j = select_job(parse(workflow(
        {"a": job(mounts={}, resource={"devices": {}, "exclusive": False, "annotations": {}})},
        volumes={}, annotations={})))
    assert j.unsupported == []


# ---------------------------------------------------------------------------
# dependencies


def test_status_is_case_insensitive_and_defaults_to_finished():
    wf = parse(workflow(
        {"a": job(), "b": job(depends_on=[{"name": "a", "status": "fInIsHeD"}]),
         "c": job(depends_on=[{"name": "b"}, {"name": "s", "status": "running"}])},
        services={"s": job()},
    ))
    assert wf.jobs["b"].depends_on == [("a", "FINISHED")]
    assert wf.jobs["c"].depends_on == [("b", "FINISHED"), ("s", "RUNNING")]


def test_requires_is_ignored_when_depends_on_is_set():
    wf = parse(workflow({"a": job(), "b": job(requires=["nowhere"], depends_on=after("a"))}))
    assert wf.jobs["b"].depends_on == [("a", "FINISHED")]
    assert wf.warnings == [
        "jobs.b.requires: ignored because depends-on is set (requires is deprecated)"
    ]


def test_services_can_depend_on_jobs_and_services():
    wf = parse(workflow(
        {"a": job(), "b": job(depends_on=[{"name": "s2", "status": "RUNNING"}])},
        services={"s1": job(depends_on=after("a")),
                  "s2": job(depends_on=[{"name": "s1", "status": "RUNNING"}])},
    ))
    assert wf.order == ["a", "s1", "s2", "b"]
    assert wf.waves == [["a"], ["s1"], ["s2"], ["b"]]


def test_order_ties_follow_the_file():
    wf = parse(workflow({
        "z": job(depends_on=after("y")),
        "y": job(),
        "x": job(),
        "w": job(depends_on=after("x", "y")),
        "v": job(depends_on=after("y")),
    }))
    assert wf.order == ["y", "z", "x", "w", "v"]
    assert wf.waves == [["y", "x"], ["z", "w", "v"]]


def test_a_diamond():
    wf = parse(workflow({
        "join": job(depends_on=after("left", "right")),
        "left": job(depends_on=after("fork")),
        "right": job(depends_on=after("fork")),
        "fork": job(),
    }))
    assert wf.order == ["fork", "left", "right", "join"]
    assert wf.waves == [["fork"], ["left", "right"], ["join"]]


@pytest.mark.parametrize(
    "jobs, services, message",
    [
        ({"a": job(depends_on=after("a"))}, None, "jobs: dependency cycle: a -> a"),
        (
            {"a": job(depends_on=after("b")), "b": job(depends_on=after("a"))},
            None,
            "jobs: dependency cycle: a -> b -> a",
        ),
        (
            {"x": job(), "c": job(depends_on=after("a")), "a": job(depends_on=after("b")),
             "b": job(depends_on=after("c", "x"))},
            None,
            "jobs: dependency cycle: c -> a -> b -> c",
        ),
        (
            {"a": job(requires=["b"]), "b": job(requires=["a"])},
            None,
            "jobs: dependency cycle: a -> b -> a",
        ),
        (
            {"ok": job(), "a": job(depends_on=[{"name": "s", "status": "RUNNING"}])},
            {"s": job(depends_on=after("a"))},
            "jobs: dependency cycle: a -> s -> a",
        ),
        (
            {"a": job(depends_on=after("b")), "b": job(depends_on=after("c")),
             "c": job(depends_on=after("b"))},
            None,
            "jobs: dependency cycle: b -> c -> b",
        ),
    ],
)
def test_cycles(jobs, services, message):
    top = {"services": services} if services else {}
    assert error(workflow(jobs, **top)) == message


# ---------------------------------------------------------------------------
# Go durations


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("2h", 7200),
        ("10m0s", 600),
        ("90s", 90),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("300ms", 0.3),
        ("1h0.5m", 3630),
        (".5s", 0.5),
        ("5.s", 5),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("1\u03bcs", 1e-6),
        ("1500ns", 1.5e-6),
        ("+5m", 300),
        ("1h1h", 7200),
        ("2562047h47m16.854775807s", (2**63 - 1) / 1e9),
    ],
)
def test_durations(text, seconds):
    assert parse_go_duration(text) / 1e9 == pytest.approx(seconds)
    j = select_job(parse(workflow({"a": job(policy={"timeout": {"execute": text}})})))
    assert j.timeout_seconds == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["0", 0, "0s", "0h0m", "-0", "0.0s"])
def test_zero_durations_mean_no_timeout(value):
    assert parse_go_duration(value) == 0
    j = select_job(parse(workflow({"a": job(policy={"timeout": {"execute": value}})})))
    assert j.timeout_seconds is None


DURATION = "jobs.a.policy.timeout.execute: must be a duration such as 2h, 10m0s, 90s or 1h30m"
UNITS = "units are ns, us, ms, s, m, h"


@pytest.mark.parametrize(
    "value, message",
    [
        ("10", "%s, got '10' (missing unit after '10'; %s)" % (DURATION, UNITS)),
        (10, "%s, got 10 (missing unit; %s)" % (DURATION, UNITS)),
        ("1d", "%s, got '1d' (unknown unit 'd'; %s)" % (DURATION, UNITS)),
        ("h", "%s, got 'h' (expected a number at 'h')" % DURATION),
        ("-5m", "%s, got '-5m' (must not be negative)" % DURATION),
        ("", "%s, got '' (no number)" % DURATION),
        ("-", "%s, got '-' (no number)" % DURATION),
        (".s", "%s, got '.s' (expected a number at '.s')" % DURATION),
        ("1.5", "%s, got '1.5' (missing unit after '1.5'; %s)" % (DURATION, UNITS)),
        ("1h 30m", "%s, got '1h 30m' (unknown unit 'h '; %s)" % (DURATION, UNITS)),
        (" 5m", "%s, got ' 5m' (expected a number at ' 5m')" % DURATION),
        ("5M", "%s, got '5M' (unknown unit 'M'; %s)" % (DURATION, UNITS)),
        ("2562047h47m16.854775808s", "%s, got '2562047h47m16.854775808s' (too large)" % DURATION),
        ("1" * 30 + "h", "%s, got '%s' (too large)" % (DURATION, "1" * 30 + "h")),
        (1.5, "%s, got 1.5" % DURATION),
        (True, "%s, got true" % DURATION),
        ([], "%s, got a list" % DURATION),
    ],
)
def test_bad_durations(value, message):
    assert error(workflow({"a": job(policy={"timeout": {"execute": value}})})) == message


def go_duration_string(ns):
    """Go's time.Duration.String() for ns >= 0."""

    def frac(value, precision):
        rest = value % 10**precision
        digits = ("." + str(rest).rjust(precision, "0").rstrip("0")) if rest else ""
        return digits, value // 10**precision

    if ns == 0:
        return "0s"
    if ns < 10**9:
        if ns < 10**3:
            return "%dns" % ns
        precision, unit = (3, "\u00b5s") if ns < 10**6 else (6, "ms")
        digits, whole = frac(ns, precision)
        return "%d%s%s" % (whole, digits, unit)
    digits, seconds = frac(ns, 9)
    text = "%d%ss" % (seconds % 60, digits)
    minutes = seconds // 60
    if minutes:
        text = "%dm" % (minutes % 60) + text
        if minutes // 60:
            text = "%dh" % (minutes // 60) + text
    return text


@pytest.mark.parametrize(
    "ns, text",
    [(0, "0s"), (1, "1ns"), (1500, "1.5\u00b5s"), (300 * 10**6, "300ms"),
     (90 * 10**9, "1m30s"), (5400 * 10**9, "1h30m0s"), (2**63 - 1, "2562047h47m16.854775807s")],
)
def test_go_duration_string_matches_go(ns, text):
    assert go_duration_string(ns) == text


@settings(max_examples=500, deadline=None)
@given(ns=st.integers(min_value=0, max_value=2**63 - 1))
def test_go_durations_round_trip(ns):
    assert parse_go_duration(go_duration_string(ns)) == ns


UNIT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(
    st.tuples(st.integers(0, 10**6), st.one_of(st.none(), st.text("0123456789", max_size=9)),
              st.sampled_from(sorted(UNIT_NS))),
    min_size=1, max_size=4))
def test_duration_sums(parts):
    text = "".join(
        "%d%s%s" % (whole, "" if fraction is None else "." + fraction, unit)
        for whole, fraction, unit in parts
    )
    expected = sum(
        whole * UNIT_NS[unit]
        + (int(fraction) * UNIT_NS[unit] // 10 ** len(fraction) if fraction else 0)
        for whole, fraction, unit in parts
    )
    if expected > 2**63 - 1:  # Go's limit: an int64 of nanoseconds
        with pytest.raises(FuzzfileError, match=r"\(too large\)$"):
            parse_go_duration(text)
    else:
        assert parse_go_duration(text) == expected


# ---------------------------------------------------------------------------
# invalid input: every rule, with its message


def job_error(**changes):
    return error(workflow({"a": job(**changes), "b": job()}))


@pytest.mark.parametrize(
    "changes, message",
    [
        # depends-on / requires
        ({"depends_on": ["b"]},
         "jobs.a.depends-on[0]: must be a mapping with 'name' and 'status', got 'b'"),
        ({"depends_on": [{"status": "FINISHED"}]},
         "jobs.a.depends-on[0].name: required (the name of a job or service)"),
        ({"depends_on": [{"name": 1}]},
         "jobs.a.depends-on[0].name: must be a string, got 1 (quote it in YAML)"),
        ({"depends_on": [{"name": "b", "state": "FINISHED"}]},
         "jobs.a.depends-on[0].state: unknown key; expected one of description, name, status "
         "(did you mean 'status'?)"),
        ({"depends_on": [{"name": "b", "status": "DONE"}]},
         "jobs.a.depends-on[0].status: must be FINISHED or RUNNING (any case), got 'DONE'"),
        ({"depends_on": [{"name": "b", "status": "\ufb01nished"}]},
         "jobs.a.depends-on[0].status: must be FINISHED or RUNNING (any case), got "
         "'\ufb01nished'"),
        ({"depends_on": [{"name": "b", "status": True}]},
         "jobs.a.depends-on[0].status: must be FINISHED or RUNNING (any case), got true"),
        ({"depends_on": [{"name": "b", "status": "RUNNING"}]},
         "jobs.a.depends-on[0].status: RUNNING is only for services, and 'b' is a job; use "
         "FINISHED"),
        ({"depends_on": [{"name": "b", "description": 3}]},
         "jobs.a.depends-on[0].description: must be a string, got 3 (quote it in YAML)"),
        ({"depends_on": after("b", "b")}, "jobs.a.depends-on[1].name: 'b' is listed twice"),
        ({"depends_on": after("c")},
         "jobs.a.depends-on[0].name: no job or service named 'c' (jobs: a, b)"),
        ({"requires": ["c"]}, "jobs.a.requires[0]: no job or service named 'c' (jobs: a, b)"),
        ({"requires": [1]}, "jobs.a.requires[0]: must be a string, got 1 (quote it in YAML)"),
        ({"requires": ["b", "b"]}, "jobs.a.requires[1]: 'b' is listed twice"),
        # policy
        ({"policy": {"timeout": "2h"}}, "jobs.a.policy.timeout: must be a mapping, got '2h'"),
        ({"policy": {"timeout": {"run": "2h"}}},
         "jobs.a.policy.timeout.run: unknown key; expected one of execute"),
        ({"policy": {"retries": 1}},
         "jobs.a.policy.retries: unknown key; expected one of restart, retry, timeout (did you "
         "mean 'retry'?)"),
        ({"policy": {"retry": {"attempts": -1}}},
         "jobs.a.policy.retry.attempts: must be an integer >= 0, got -1"),
        ({"policy": {"retry": {"attempts": "3"}}},
         "jobs.a.policy.retry.attempts: must be an integer >= 0, got '3'"),
        ({"policy": {"retry": {"count": 3}}},
         "jobs.a.policy.retry.count: unknown key; expected one of attempts"),
        ({"policy": {"restart": "always"}},
         "jobs.a.policy.restart: must be one of on-node-fault, never, got 'always'"),
        ({"policy": {"restart": "On-Node-Fault"}},
         "jobs.a.policy.restart: must be one of on-node-fault, never, got 'On-Node-Fault'"),
        # task-array
        ({"task_array": {"start": 5, "end": 2}},
         "jobs.a.task-array.end: must not be less than start (5), got 2"),
        ({"task_array": {"start": 1, "end": 10, "concurrency": 201}},
         "jobs.a.task-array.concurrency: must be an integer from 1 to 200, got 201"),
        ({"task_array": {"start": 1, "end": 10, "concurrency": 0}},
         "jobs.a.task-array.concurrency: must be an integer >= 1, got 0"),
        ({"task_array": {"end": 10}}, "jobs.a.task-array.start: required (an integer >= 0)"),
        ({"task_array": {"start": 1}}, "jobs.a.task-array.end: required (an integer >= start)"),
        ({"task_array": {"start": -1, "end": 1}},
         "jobs.a.task-array.start: must be an integer >= 0, got -1"),
        ({"task_array": {"start": "1", "end": 2}},
         "jobs.a.task-array.start: must be an integer >= 0, got '1'"),
        ({"task_array": {"start": 1, "end": 2, "parallel": 2}},
         "jobs.a.task-array.parallel: unknown key; expected one of concurrency, end, start"),
        # network
        ({"network": {"isolated": "yes"}}, "jobs.a.network.isolated: must be a boolean, got 'yes'"),
        ({"network": {"expose-tcp": 80}},
         "jobs.a.network.expose-tcp: must be a list of port numbers, got 80"),
        ({"network": {"expose-udp": [0]}},
         "jobs.a.network.expose-udp[0]: must be a port number from 1 to 65535, got 0"),
        ({"network": {"expose-tcp": [65536]}},
         "jobs.a.network.expose-tcp[0]: must be a port number from 1 to 65535, got 65536"),
        ({"network": {"ports": []}},
         "jobs.a.network.ports: unknown key; expected one of expose-tcp, expose-udp, isolated"),
        # files
        ({"files": {"etc/app.conf": "file://conf"}},
         "jobs.a.files: keys must be absolute container paths, got 'etc/app.conf'"),
        ({"files": {"/etc/app.conf": "conf"}},
         "jobs.a.files./etc/app.conf: 'conf' names an entry of the top-level files; write "
         "file://conf to use it (any other string is the file's contents)"),
        ({"files": {"/etc/app.conf": ""}}, "jobs.a.files./etc/app.conf: must not be empty"),
        ({"files": {"/etc/app.conf": "file://nope"}},
         "jobs.a.files./etc/app.conf: 'file://nope' names no entry of the top-level files "
         "(conf)"),
        ({"files": {"/etc/app.conf": 1}},
         "jobs.a.files./etc/app.conf: must be a string, got 1 (quote it in YAML)"),
        # mounts (v4 form)
        ({"mounts": {"data": {"volume": "data"}}},
         "jobs.a.mounts: keys must be absolute mount paths (v4 form: /path: {volume: VOLUME}), "
         "got 'data'"),
        ({"mounts": {"data": {"location": "/data"}}},
         "jobs.a.mounts: keys must be absolute mount paths (v4 form: /path: {volume: VOLUME}), "
         "got 'data' (that is the v1 form; a v4 Fuzzfile mounts /path: {volume: VOLUME})"),
        ({"mounts": {"/data": {"volume": "nope"}}},
         "jobs.a.mounts./data.volume: no volume named 'nope' under volumes (data)"),
        ({"mounts": {"/data": 1}},
         "jobs.a.mounts./data: must be a volume name or a mapping with 'volume', got 1"),
        # mounts (the short form)
        ({"mounts": {"/data": "nope"}},
         "jobs.a.mounts./data: no volume named 'nope' under volumes (data)"),
        ({"mounts": {"/data": ""}}, "jobs.a.mounts./data: must not be empty"),
        ({"mounts": {"data": "/data"}},
         "jobs.a.mounts: keys of the short form /path: VOLUME must be absolute mount paths, got "
         "'data' (the short form is /path: VOLUME: the location first)"),
        ({"mounts": {"/data": {"volume": "data", "readonly": True}}},
         "jobs.a.mounts./data.readonly: unknown key; expected one of volume"),
        ({"mounts": {"/data": {"volume": ""}}}, "jobs.a.mounts./data.volume: must not be empty"),
        # resource
        ({"resource": {"devices": {"nvidia.com/gpu": 0}}},
         "jobs.a.resource.devices.nvidia.com/gpu: must be an integer >= 1, got 0"),
        ({"resource": {"devices": {"nvidia.com/gpu": "1"}}},
         "jobs.a.resource.devices.nvidia.com/gpu: must be an integer >= 1, got '1'"),
        ({"resource": {"devices": {"gpu": 1}}},
         "jobs.a.resource.devices: device kinds are CDI kinds VENDOR/CLASS, such as "
         "nvidia.com/gpu, got 'gpu'"),
        ({"resource": {"devices": {"nvidia.com/": 1}}},
         "jobs.a.resource.devices: device kinds are CDI kinds VENDOR/CLASS, such as "
         "nvidia.com/gpu, got 'nvidia.com/'"),
        ({"resource": {"annotations": {"rack": 1}}},
         "jobs.a.resource.annotations.rack: must be a string, got 1 (quote it in YAML)"),
        ({"resource": {"cpu": {"sockets": 0}}},
         "jobs.a.resource.cpu.sockets: must be an integer >= 1, got 0"),
        # cwd
        ({"cwd": "./work"}, "jobs.a.cwd: must be an absolute path, got './work'"),
        # services only
        ({"persist": True},
         "jobs.a.persist: unknown key; expected one of args, command, cwd, depends-on, env, "
         "files, image, mounts, multinode, name, network, policy, requires, resource, script, "
         "task-array"),
    ],
)
def test_job_errors(changes, message):
    data = workflow(
        {"a": job(**changes), "b": job()},
        files={"conf": "x"},
        volumes={"data": {}},
    )
    assert error(data) == message


def test_mounts_of_undeclared_volumes_without_volumes():
    assert error(workflow({"a": job(mounts={"/d": {"volume": "v"}})})) == (
        "jobs.a.mounts./d.volume: no volume named 'v' under volumes (the workflow declares none)"
    )


def test_file_references_without_files():
    assert error(workflow({"a": job(files={"/etc/x": "file://x"})})) == (
        "jobs.a.files./etc/x: 'file://x' names no entry of the top-level files (the workflow "
        "has none)"
    )


def test_dangling_names_list_jobs_and_services():
    assert error(workflow({"a": job(depends_on=after("nope"))}, services={"s": job()})) == (
        "jobs.a.depends-on[0].name: no job or service named 'nope' (jobs: a; services: s)"
    )


V1_VOLUMES = {"data": {"reference": "volume://user/ephemeral"}}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"mounts": {"/data": {"volume": "data"}}},
         "jobs.a.mounts./data: must be a mapping with 'location', got a mapping (that is the v4 "
         "form; a v1 Fuzzfile mounts VOLUME: {location: /path})"),
        ({"mounts": {"data": {"location": "data"}}},
         "jobs.a.mounts.data.location: must be an absolute path, got 'data'"),
        ({"mounts": {"data": {"location": "/d", "mode": "ro"}}},
         "jobs.a.mounts.data.mode: unknown key; expected one of location"),
        ({"mounts": {"nope": {"location": "/d"}}},
         "jobs.a.mounts.nope: no volume named 'nope' under volumes (data, tmp)"),
        ({"mounts": {"data": {"location": "/d"}, "tmp": {"location": "/d"}}},
         "jobs.a.mounts.tmp.location: '/d' is already the mount point of volume 'data'"),
        ({"mounts": {1: {"location": "/d"}}},
         "jobs.a.mounts: keys must be volume names (v1 form: VOLUME: {location: /path}), got 1"),
    ],
)
def test_v1_mount_errors(changes, message):
    data = workflow({"a": job(**changes)}, version="v1",
                    volumes={"data": V1_VOLUMES["data"], "tmp": V1_VOLUMES["data"]})
    assert error(data) == message


@pytest.mark.parametrize(
    "top, message",
    [
        # files
        ({"files": {"conf": 1}},
         "files.conf: must be the file's contents as a string, got 1"),
        ({"files": {1: "x"}}, "files: names must be non-empty strings, got 1"),
        # annotations
        ({"annotations": {"team": 1}},
         "annotations.team: must be a string, got 1 (quote it in YAML)"),
        # volumes
        ({"volumes": {"v": []}}, "volumes.v: must be a mapping, got a list"),
        ({"volumes": {"v": {"kind": "nfs"}}},
         "volumes.v.kind: unknown key; expected one of annotations, egress, ingress, name, "
         "reference, size, use"),
        ({"volumes": {"v": {"size": "10XB"}}},
         "volumes.v.size: must be a size such as 1GB, 512MiB or 0.5GiB, got '10XB'"),
        ({"volumes": {"v": {"reference": "user/ephemeral"}}},
         "volumes.v.reference: must be a volume:// reference such as volume://user/ephemeral, "
         "got 'user/ephemeral'"),
        ({"volumes": {"v": {"use": 1}}},
         "volumes.v.use: must be a string, got 1 (quote it in YAML)"),
        ({"volumes": {"v": {"ingress": {"source": {"uri": "x"}}}}},
         "volumes.v.ingress: must be a list, got a mapping"),
        ({"volumes": {"v": {"ingress": [{"source": {"uri": "s3://b/x"}}]}}},
         "volumes.v.ingress[0].destination: required (a mapping with 'uri')"),
        ({"volumes": {"v": {"egress": [{"source": {}, "destination": {"uri": "s3://b"}}]}}},
         "volumes.v.egress[0].source.uri: required"),
        ({"volumes": {"v": {"egress": [{"source": {"url": "file://x"},
                                        "destination": {"uri": "s3://b"}}]}}},
         "volumes.v.egress[0].source.url: unknown key; expected one of secret, uri (did you "
         "mean 'uri'?)"),
        ({"volumes": {"v": {"ingress": [{"source": {"uri": "file://nope"},
                                         "destination": {"uri": "file://x"}}]}}},
         "volumes.v.ingress[0].source.uri: 'file://nope' names no entry of the top-level files "
         "(the workflow has none)"),
        ({"volumes": {"v": {"ingress": [{"source": {"uri": "s3://b/x"},
                                         "destination": {"uri": "file://x"},
                                         "policy": {"timeout": {"execute": "1d"}}}]}}},
         "volumes.v.ingress[0].policy.timeout.execute: must be a duration such as 2h, 10m0s, "
         "90s or 1h30m, got '1d' (unknown unit 'd'; units are ns, us, ms, s, m, h)"),
        # defaults
        ({"defaults": {"jobs": {}}},
         "defaults.jobs: unknown key; expected one of env, job, mounts, resource, service "
         "(did you mean 'job'?)"),
        ({"defaults": {"job": {"command": ["x"]}}},
         "defaults.job.command: unknown key; expected one of env, mounts, policy, resource"),
        ({"defaults": {"service": {"policy": {}}}},
         "defaults.service.policy: unknown key; expected one of env, mounts, resource"),
        ({"defaults": {"policy": {}}},
         "defaults.policy: unknown key; expected one of env, job, mounts, resource, service"),
        ({"defaults": {"env": {"A": "1"}}},
         "defaults.env: must be a list of KEY=VALUE strings, got a mapping"),
        ({"defaults": {"job": {"resource": {"cpu": {"cores": 0}}}}},
         "defaults.job.resource.cpu.cores: must be an integer >= 1, got 0"),
        ({"defaults": {"job": {"policy": {"timeout": {"execute": "10"}}}}},
         "defaults.job.policy.timeout.execute: must be a duration such as 2h, 10m0s, 90s or "
         "1h30m, got '10' (missing unit after '10'; units are ns, us, ms, s, m, h)"),
        ({"defaults": {"mounts": {"/d": {"volume": "v"}}}},
         "defaults.mounts./d.volume: no volume named 'v' under volumes (the workflow declares "
         "none)"),
        ({"defaults": {"job": []}}, "defaults.job: must be a mapping, got a list"),
    ],
)
def test_workflow_errors(top, message):
    assert error(workflow(**top)) == message


@pytest.mark.parametrize(
    "top, message",
    [
        ({"defaults": {"env": ["A=1"]}},
         "defaults.env: only allowed in version v4 Fuzzfiles (this one is v1)"),
        ({"defaults": {"service": {}}},
         "defaults.service: only allowed in version v4 Fuzzfiles (this one is v1)"),
        ({"defaults": {"resource": {}}},
         "defaults.resource: only allowed in version v4 Fuzzfiles (this one is v1)"),
        ({"volumes": {"v": {"reference": "volume://user/ephemeral", "use": "ephemeral"}}},
         "volumes.v.use: only allowed in version v4 Fuzzfiles (this one is v1)"),
        ({"volumes": {"v": {"size": "1GB"}}},
         "volumes.v.size: only allowed in version v4 Fuzzfiles (this one is v1)"),
        ({"volumes": {"v": {}}},
         "volumes.v.reference: required (volume://user/ephemeral, volume://user/ephemeral/NAME, "
         "volume://user/persistent, volume://user/persistent/NAME or volume://account/persistent)"),
    ],
)
def test_v4_only_keys_in_v1(top, message):
    assert error(workflow(version="v1", **top)) == message


@pytest.mark.parametrize(
    "service, message",
    [
        ({"command": DELETE, "image": DELETE}, "services.s.image: required (a mapping with 'uri')"),
        ({"policy": {"timeout": "1h"}}, "services.s.policy.timeout: must be a mapping, got '1h'"),
        ({"policy": {"priority": 1}},
         "services.s.policy.priority: unknown key; expected one of restart, retry, timeout"),
        ({"comand": ["x"]},
         "services.s.comand: unknown key; expected one of args, command, cwd, depends-on, env, "
         "files, image, mounts, multinode, name, network, persist, policy, readiness-probe, "
         "requires, resource, script, task-array (did you mean 'command'?)"),
        ({"persist": "yes"}, "services.s.persist: must be a boolean, got 'yes'"),
        ({"script": "x"}, "services.s: has both command and script; exactly one is allowed"),
        ({"readiness-probe": {}},
         "services.s.readiness-probe: needs exactly one of exec, http-get, tcp-socket, grpc, "
         "got none"),
        ({"readiness-probe": {"exec": {"command": ["x"]}, "grpc": {"port": 1}}},
         "services.s.readiness-probe: needs exactly one of exec, http-get, tcp-socket, grpc, "
         "got exec and grpc"),
        ({"readiness-probe": {"exec": {}}},
         "services.s.readiness-probe.exec.command: required (a list of strings)"),
        ({"readiness-probe": {"tcp-socket": {}}},
         "services.s.readiness-probe.tcp-socket.port: required"),
        ({"readiness-probe": {"grpc": {"port": "grpc"}}},
         "services.s.readiness-probe.grpc.port: must be a port number from 1 to 65535, got "
         "'grpc'"),
        ({"readiness-probe": {"http-get": {"port": 80, "scheme": "ftp"}}},
         "services.s.readiness-probe.http-get.scheme: must be HTTP or HTTPS (any case), got "
         "'ftp'"),
        ({"readiness-probe": {"http-get": {"port": 80, "http-headers": [{"name": "X"}]}}},
         "services.s.readiness-probe.http-get.http-headers[0].value: required"),
        ({"readiness-probe": {"tcp-socket": {"port": 1}, "period-seconds": 0}},
         "services.s.readiness-probe.period-seconds: must be an integer >= 1, got 0"),
        ({"readiness-probe": {"tcp-socket": {"port": 1}, "initialDelaySeconds": 1}},
         "services.s.readiness-probe.initialDelaySeconds: unknown key; expected one of exec, "
         "failure-threshold, grpc, http-get, initial-delay-seconds, period-seconds, "
         "success-threshold, tcp-socket, timeout-seconds (did you mean "
         "'initial-delay-seconds'?)"),
        ({"network": {"ports": [{"port": 80, "protocol": "sctp"}]}},
         "services.s.network.ports[0].protocol: must be TCP or UDP (any case), got 'sctp'"),
        ({"network": {"ports": [{"name": "http"}]}}, "services.s.network.ports[0].port: required"),
        ({"network": {"ports": [{"port": 70000}]}},
         "services.s.network.ports[0].port: must be a port number from 1 to 65535, got 70000"),
        ({"network": {"endpoints": ["x"]}},
         "services.s.network.endpoints[0]: must be a mapping with 'name', got 'x'"),
        ({"network": {"host": "yes"}}, "services.s.network.host: must be a boolean, got 'yes'"),
        ({"depends_on": [{"name": "a", "status": "RUNNING"}]},
         "services.s.depends-on[0].status: RUNNING is only for services, and 'a' is a job; use "
         "FINISHED"),
    ],
)
def test_service_errors(service, message):
    assert error(workflow({"a": job()}, services={"s": job(**service)})) == message


def test_service_names():
    assert error(workflow({"a": job()}, services={"Web": job()})) == (
        "services: invalid service name 'Web': use at most 63 lowercase letters, digits and "
        "'-', starting and ending with a letter or digit (the name becomes a host name)"
    )
    assert error(workflow({"a": job()}, services={"a": job()})) == (
        "services.a: a job has the same name; job and service names must differ"
    )


@pytest.mark.parametrize("version", ["v1", "v4"])
def test_errors_name_the_field_in_both_versions(version):
    data = workflow({"a": job(task_array={"start": 3, "end": 1})}, version=version)
    assert error(data) == "jobs.a.task-array.end: must not be less than start (3), got 1"


def test_yaml_errors_still_name_the_line():
    text = V4_EVERYTHING.replace("    persist: true\n", "    persist: true\n   bad: [\n")
    message = error(text)
    assert re.match(r"line \d+, column \d+: invalid YAML: ", message), message


# ---------------------------------------------------------------------------
# slots, ranks, tasks


@pytest.mark.parametrize(
    "changes, slots, total, tasks",
    [
        ({}, 1, 1, 1),
        ({"resource": {"cpu": {"cores": 4}}}, 4, 4, 1),
        ({"multinode": {"nodes": 3, "implementation": "mpich"}}, 1, 3, 1),
        ({"multinode": {"nodes": 3, "implementation": "ompi"}, "resource": {"cpu": {"cores": 2}}},
         2, 6, 1),
        ({"multinode": {"nodes": 2, "implementation": "generic", "procs-per-node": 5},
          "resource": {"cpu": {"cores": 2}}}, 5, 10, 1),
        ({"task_array": {"start": 0, "end": 0}}, 1, 1, 1),
        ({"task_array": {"start": 1, "end": 100, "concurrency": 200}}, 1, 1, 100),
    ],
)
def test_slots_and_tasks(changes, slots, total, tasks):
    j = select_job(parse(workflow({"a": job(**changes)})))
    assert (j.slots_per_node, j.total_slots, j.tasks) == (slots, total, tasks)
    data = j.to_dict()
    assert (data["slots_per_node"], data["total_slots"], data["tasks"]) == (slots, total, tasks)


def test_cores_from_the_defaults_give_the_slots():
    wf = parse(workflow(
        {"a": job(multinode={"nodes": 2, "implementation": "generic"})},
        defaults={"job": {"resource": {"cpu": {"cores": 3}}}},
    ))
    assert (wf.jobs["a"].slots_per_node, wf.jobs["a"].total_slots) == (3, 6)


# ---------------------------------------------------------------------------
# properties of the dependency order
NAMES = ["j%d" % index for index in range(12)]


@st.composite
def dags(draw):
    """A random DAG over 1..12 names in a random file order: edges only go
    from a later name to an earlier one in a hidden order."""
    count = draw(st.integers(1, 12))
    hidden = draw(st.permutations(NAMES[:count]))
    graph = {}
    for index, name in enumerate(hidden):
        graph[name] = sorted(draw(st.sets(st.sampled_from(hidden[:index]))) if index else [])
    file_order = draw(st.permutations(list(graph)))
    return {name: graph[name] for name in file_order}


def greedy_order(graph):
    """The reference: repeatedly take the earliest name (in file order)
    whose dependencies are all taken."""
    order = []
    while len(order) < len(graph):
        name = next(n for n in graph if n not in order and all(d in order for d in graph[n]))
        order.append(name)
    return order


@settings(max_examples=300, deadline=None)
@given(graph=dags())
def test_any_dag_is_ordered(graph):
    order, waves = dependency_order(graph)
    assert order == greedy_order(graph)
    position = {name: index for index, name in enumerate(order)}
    for name, deps in graph.items():
        assert all(position[dep] < position[name] for dep in deps)
    level = {}
    for name in order:
        level[name] = max((level[dep] + 1 for dep in graph[name]), default=0)
    assert waves == [[n for n in graph if level[n] == k] for k in range(max(level.values()) + 1)]
    assert sorted(sum(waves, [])) == sorted(graph)


@settings(max_examples=100, deadline=None)
@given(graph=dags())
def test_any_dag_parses_in_that_order(graph):
    data = workflow({name: job(depends_on=after(*deps)) if deps else job()
                     for name, deps in graph.items()})
    wf = parse(data)
    assert (wf.order, wf.waves) == dependency_order(graph)


@st.composite
def graphs(draw):
    count = draw(st.integers(1, 8))
    names = NAMES[:count]
    return {name: sorted(draw(st.sets(st.sampled_from(names), max_size=3))) for name in names}


def has_cycle(graph):
    state = {}

    def visit(name):
        state[name] = "open"
        for dep in graph[name]:
            if state.get(dep) == "open" or (dep not in state and visit(dep)):
                return True
        state[name] = "done"
        return False

    return any(name not in state and visit(name) for name in graph)


@settings(max_examples=300, deadline=None)
@given(graph=graphs())
def test_cycles_are_found_and_named(graph):
    if not has_cycle(graph):
        order, _unused = dependency_order(graph)
        assert sorted(order) == sorted(graph)
        return
    with pytest.raises(FuzzfileError) as info:
        dependency_order(graph)
    message = str(info.value)
    assert message.startswith("jobs: dependency cycle: ")
    cycle = message[len("jobs: dependency cycle: "):].split(" -> ")
    assert cycle[0] == cycle[-1] and len(set(cycle[:-1])) == len(cycle) - 1
    for name, dep in zip(cycle, cycle[1:], strict=False):
        assert dep in graph[name]
    position = list(graph).index
    assert position(cycle[0]) == min(position(name) for name in cycle)


def test_dependency_order_rejects_unknown_names():
    with pytest.raises(FuzzfileError) as info:
        dependency_order({"a": ["b"]})
    assert str(info.value) == "jobs.a: depends on 'b', which is not a job or service"


# ---------------------------------------------------------------------------
# the module


def test_module_returns_the_normalized_workflow():
    rc, result = adhoc("fuzz.multinode.fuzzfile",
                       "path=examples/pipeline.yml job=solve")
    assert rc == 0, result
    with open(PIPELINE, encoding="utf-8") as handle:
        wf = parse_workflow(handle.read())
    assert result["workflow"] == wf.to_dict()
    assert result["workflow"]["order"] == ["prepare", "solve", "energy", "residual", "report"]
    assert result["workflow"]["waves"] == [["prepare"], ["solve"], ["energy", "residual"],
                                           ["report"]]
    assert result["job"] == wf.jobs["solve"].to_dict()
    assert (result["job"]["total_slots"], result["job"]["timeout_seconds"]) == (4, 5400.0)
    assert result["warnings"] == ["examples/pipeline.yml: " + note for note in [
        "jobs.solve.depends-on: prepare not run first; -e job=solve runs this one job only",
    ]]


def test_module_reports_a_cycle(tmp_path):
    bad = tmp_path / "cycle.yml"
    bad.write_text(textwrap.dedent("""\
        version: v4
        jobs:
          a: {image: {uri: docker://x}, command: [x], depends-on: [{name: b}]}
          b: {image: {uri: docker://x}, command: [x], requires: [a]}
    """))
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s job=a" % bad)
    assert rc != 0
    assert result["msg"] == "%s: jobs: dependency cycle: a -> b -> a" % bad


def test_module_reports_a_bad_duration(tmp_path):
    bad = tmp_path / "duration.yml"
    bad.write_text(yaml.safe_dump(workflow({"a": job(policy={"timeout": {"execute": "1d"}})})))
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s" % bad)
    assert rc != 0
    assert result["msg"] == (
        "%s: jobs.a.policy.timeout.execute: must be a duration such as 2h, 10m0s, 90s or "
        "1h30m, got '1d' (unknown unit 'd'; units are ns, us, ms, s, m, h)" % bad
    )


def test_module_warns_about_requires(tmp_path):
    path = tmp_path / "requires.yml"
    path.write_text(yaml.safe_dump(workflow({"a": job(), "b": job(requires=["a"])})))
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s job=b" % path)
    assert rc == 0, result
    assert result["job"]["depends_on"] == [{"name": "a", "status": "FINISHED"}]
    assert result["warnings"][0] == (
        "%s: jobs.b.requires: deprecated; read as depends-on with status FINISHED" % path
    )


# ---------------------------------------------------------------------------
# robustness: any value anywhere gives a result or a FuzzfileError
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
              st.floats(allow_nan=False), st.text(max_size=12),
              st.sampled_from(["file://conf", "/abs", "FINISHED", "running", "2h", "1GB", "v",
                               "data", "solve", "db", "volume://user/ephemeral"])),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8),
                                  st.sampled_from(["name", "status", "/d", "uri", "port"])),
                        children, max_size=3)),
    max_leaves=8,
)


def paths_of(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, prefix + (index,))


EVERYTHING_DATA = yaml.safe_load(V4_EVERYTHING)
EVERYTHING_PATHS = [path for path in paths_of(EVERYTHING_DATA) if path]


@settings(max_examples=400, deadline=None)
@given(path=st.sampled_from(EVERYTHING_PATHS), value=VALUES,
       version=st.sampled_from(["v1", "v4"]))
def test_any_value_anywhere_is_a_result_or_a_fuzzfile_error(path, value, version):
    data = json.loads(json.dumps(EVERYTHING_DATA))
    data["version"] = version
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        wf = parse(data)
    except FuzzfileError:
        return
    assert load_workflow(json.loads(json.dumps(wf.to_dict()))) == wf


def test_runner_names_what_it_does_not_carry_out_yet():
    """Validated but not yet executed by run-job.yml: the user is told."""
    workflow = parse_workflow(
        "version: v4\n"
        "files:\n  cfg: hello\n"
        "jobs:\n"
        "  a:\n    image: {uri: docker://x}\n    command: [\"true\"]\n"
        "  b:\n    image: {uri: docker://x}\n    command: [\"true\"]\n"
        "    depends-on: [{name: a}]\n"
        "    policy: {timeout: {execute: 10m}}\n"
        "    task-array: {start: 1, end: 3}\n"
        "    files: {/etc/cfg: 'file://cfg'}\n"
        "    env: [TOKEN=secret://user/token, PLAIN=x]\n"
        "    resource: {cpu: {cores: 2, affinity: SOCKET}, memory: {size: 1GiB}}\n"
    )
    notes = not_executed_yet(select_job(workflow, "b"))
    assert notes == [
        "jobs.b.depends-on: a not run first; -e job=b runs this one job only",
        # task arrays, files, secret:// env values and cwd are carried out: no note.
    ]
    assert not_executed_yet(select_job(workflow, "a")) == []
