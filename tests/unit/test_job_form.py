"""Tests for plugins/module_utils/_fuzzfile/job_form.py and the JSON forms
of the model (Job.to_dict, Workflow.to_dict): a job or workflow read back
from its JSON form, every field checked, as the rank_plan task reads its
job argument. Moved here from test_fuzzfile.py (single jobs) and
test_fuzzfile_workflow.py (workflow fields), assertions unchanged."""

import json

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    load_job,
    load_workflow,
    parse_workflow,
    select_job,
)

from test_fuzzfile import DELETE, NAME_RULE, parse_job, read
from test_fuzzfile_workflow import V4_EVERYTHING

# ---------------------------------------------------------------------------
# to_dict / from_dict


def full_job():
    return parse_job(
        args=["-v"],
        env=["A=1", "B=x=y", "TOKEN=secret://u/t"],
        cwd="/work",
        resource={"cpu": {"cores": 2, "affinity": "CORE"}, "memory": {"size": "1GiB"}},
        multinode={"nodes": 2, "implementation": "generic", "procs-per-node": 3},
        mounts={"/d": {"volume": "v"}},
        top={"volumes": {"v": {"use": "ephemeral"}}},
    )


def test_to_dict():
    data = full_job().to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "name": "solve",
        "image_uri": "docker://alpine:3.16",
        "command": ["true"],
        "script": None,
        "args": ["-v"],
        "env": [["A", "1"], ["B", "x=y"], ["TOKEN", "secret://u/t"]],
        "cwd": "/work",
        "cores": 2,
        "affinity": "CORE",
        "memory_bytes": 2**30,
        "nodes": 2,
        "implementation": "generic",
        "procs_per_node": 3,
        "slots_per_node": 3,
        "unsupported": [],
        "kind": "job",
        "depends_on": [],
        "timeout_seconds": None,
        "task_array": None,
        "files": {},
        "mounts": {"/d": "v"},
        "volumes": {"v": "ephemeral"},
        "memory_by_core": False,
        "image_secret": None,
        "cpu_threads": None,
        "cpu_sockets": None,
        "devices": {},
        "exclusive": False,
        "resource_annotations": {},
        "retry_attempts": None,
        "restart": None,
        "network_isolated": False,
        "expose_tcp": [],
        "expose_udp": [],
        "persist": None,
        "inline_files": {},
        "readiness_probe": None,
        "ports": [],
        "endpoints": [],
        "total_slots": 6,
        "tasks": 1,
        "max_hosts": 2,
        "secret_env": ["TOKEN"],
    }


@pytest.mark.parametrize(
    "j",
    [
        full_job(),
        parse_job(),
        parse_job(command=DELETE, script="#!/bin/sh\necho $1\n", args=["x y"]),
        select_job(parse_workflow(read("generic-multinode.yml"))),
    ],
)
def test_from_dict_round_trip(j):
    data = json.loads(json.dumps(j.to_dict()))
    assert load_job(data) == j


def test_from_dict_accepts_an_env_mapping():
    data = parse_job().to_dict()
    data["env"] = {"A": "1", "B": ""}
    assert load_job(data).env == [("A", "1"), ("B", "")]


def test_from_dict_ignores_slots_per_node():
    data = parse_job().to_dict()
    data["slots_per_node"] = 99
    assert load_job(data).slots_per_node == 1


def dict_with(**changes):
    data = parse_job(multinode={"nodes": 2, "implementation": "generic"}).to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "job: must be a mapping, got a list"),
        (
            dict_with(comand=["x"]),
            "job.comand: unknown key; expected one of affinity, args, command, cores, "
            "cpu_sockets, cpu_threads, cwd, depends_on, devices, endpoints, env, exclusive, "
            "expose_tcp, expose_udp, files, image_secret, image_uri, implementation, inline_files, "
            "kind, max_hosts, memory_by_core, memory_bytes, mounts, name, network_isolated, nodes, "
            "persist, ports, procs_per_node, readiness_probe, resource_annotations, restart, "
            "retry_attempts, script, secret_env, slots_per_node, "
            "task_array, tasks, timeout_seconds, total_slots, unsupported, volumes (did you mean "
            "'command'?)",
        ),
        (dict_with(name="Bad_Name"), "job.name: invalid job name 'Bad_Name': " + NAME_RULE),
        (dict_with(name=None), "job.name: job names must be strings, got null"),
        (dict_with(image_uri=""), "job.image_uri: must not be empty"),
        (dict_with(command="ls"), "job.command: must be a list of strings, got 'ls'"),
        (dict_with(script="x"), "job: needs exactly one of command and script"),
        (dict_with(command=None), "job: needs exactly one of command and script"),
        (dict_with(args=[1]), "job.args[0]: must be a string, got 1 (quote it in YAML)"),
        (dict_with(env=["A=1"]), "job.env[0]: must be a [key, value] pair, got 'A=1'"),
        (dict_with(env="A=1"), "job.env: must be a list of [key, value] pairs, got 'A=1'"),
        (
            dict_with(env=[["1A", "x"]]),
            "job.env[0]: '1A' is not a valid variable name (letters, digits and '_', not "
            "starting with a digit)",
        ),
        (dict_with(env=[["A", 1]]), "job.env[0]: must be a string, got 1 (quote it in YAML)"),
        (dict_with(cwd="rel"), "job.cwd: must be an absolute path, got 'rel'"),
        (dict_with(cores=0), "job.cores: must be an integer >= 1, got 0"),
        (dict_with(affinity="numa"), "job.affinity: must be one of NUMA, SOCKET, CORE, got 'numa'"),
        (dict_with(memory_bytes=True), "job.memory_bytes: must be an integer >= 1, got true"),
        (dict_with(nodes=0), "job.nodes: must be an integer >= 1, got 0"),
        (
            dict_with(implementation="mpi"),
            "job.implementation: must be one of ompi, openmpi, mpich, gasnet, generic, got 'mpi'",
        ),
        (dict_with(procs_per_node="2"), "job.procs_per_node: must be an integer >= 1, got '2'"),
        (
            dict_with(implementation=None),
            "job: a job without a multinode implementation runs on 1 node without "
            "procs_per_node, got nodes=2, procs_per_node=null",
        ),
        (dict_with(unsupported="x"), "job.unsupported: must be a list of strings, got 'x'"),
    ],
)
def test_from_dict_errors(data, message):
    with pytest.raises(FuzzfileError) as info:
        load_job(data)
    assert str(info.value) == message


# ---------------------------------------------------------------------------
# JSON forms


def everything():
    return parse_workflow(V4_EVERYTHING)


@pytest.mark.parametrize("name", ["prepare", "solve", "sweep"])
def test_job_round_trip(name):
    j = everything().jobs[name]
    data = json.loads(json.dumps(j.to_dict()))
    assert load_job(data) == j


@pytest.mark.parametrize("name", ["db", "web", "grpc", "probe-exec"])
def test_service_round_trip(name):
    s = everything().service_defs[name]
    assert load_job(json.loads(json.dumps(s.to_dict()))) == s


def test_workflow_round_trip():
    wf = everything()
    data = json.loads(json.dumps(wf.to_dict()))
    assert data["order"] == wf.order and data["waves"] == wf.waves
    assert load_workflow(data) == wf
    assert load_workflow(data).to_dict() == data


def test_old_job_dicts_still_load():
    """A job dict written before the workflow fields existed."""
    data = {"name": "a", "image_uri": "docker://x", "command": ["true"], "args": [],
            "env": [], "cwd": None, "cores": None, "affinity": None, "memory_bytes": None,
            "nodes": 1, "implementation": None, "procs_per_node": None, "slots_per_node": 1,
            "unsupported": []}
    j = load_job(data)
    assert (j.kind, j.depends_on, j.timeout_seconds, j.task_array, j.files) == (
        "job", [], None, None, {})


def solve_dict(**changes):
    data = everything().jobs["solve"].to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        (solve_dict(kind="task"), "job.kind: must be one of job, service, got 'task'"),
        (solve_dict(depends_on=[["a", "FINISHED"]]),
         "job.depends_on[0]: must be a mapping with 'name' and 'status', got a list"),
        (solve_dict(depends_on=[{"name": "a", "status": "finished"}]),
         "job.depends_on[0].status: must be one of FINISHED, RUNNING, got 'finished'"),
        (solve_dict(depends_on=[{"name": "a", "status": "FINISHED"}] * 2),
         "job.depends_on[1].name: 'a' is listed twice"),
        (solve_dict(timeout_seconds=0), "job.timeout_seconds: must be a number of seconds > 0, "
                                        "got 0"),
        (solve_dict(timeout_seconds="90s"), "job.timeout_seconds: must be a number of seconds > "
                                            "0, got '90s'"),
        (solve_dict(timeout_seconds=float("inf")), "job.timeout_seconds: must be a number of "
                                                   "seconds > 0, got inf"),
        (solve_dict(task_array={"start": 2, "end": 1, "concurrency": None}),
         "job.task_array.end: must not be less than start (2), got 1"),
        (solve_dict(task_array={"start": 1, "end": 2, "concurrency": 500}),
         "job.task_array.concurrency: must be an integer from 1 to 200, got 500"),
        (solve_dict(files={"etc/x": "x"}), "job.files: keys must be absolute paths, got 'etc/x'"),
        (solve_dict(mounts={"/d": ""}), "job.mounts./d: must not be empty"),
        (solve_dict(mounts={"/d": "w"}), "job.mounts./d: volume 'w' has no store in volumes"),
        (solve_dict(volumes={"v": "persistent/../x"}),
         "job.volumes.v: must be ephemeral, user/persistent, account/persistent or persistent/NAME, "
         "got 'persistent/../x'"),
        (solve_dict(mounts={"/proc/x": "v"}, volumes={"v": "ephemeral"}),
         "job.mounts./proc/x: '/proc/x' is under /proc, which the runtime provides; mount the "
         "volume elsewhere"),
        (solve_dict(devices={"nvidia.com/gpu": 0}),
         "job.devices.nvidia.com/gpu: must be an integer >= 1, got 0"),
        (solve_dict(exclusive=None), "job.exclusive: must be a boolean, got null"),
        (solve_dict(restart="always"),
         "job.restart: must be one of on-node-fault, never, got 'always'"),
        (solve_dict(expose_tcp=[0]), "job.expose_tcp[0]: must be a port number from 1 to 65535, "
                                     "got 0"),
        (solve_dict(retry_attempts=-1), "job.retry_attempts: must be an integer >= 0, got -1"),
        (solve_dict(image_secret="user/registry"),
         "job.image_secret: must be a secret:// reference (secret://SCOPE/NAME, e.g. "
         "secret://user/registry), got 'user/registry'"),
        (solve_dict(command=None, script=None), "job: needs exactly one of command and script"),
    ],
)
def test_job_from_dict_errors(data, message):
    with pytest.raises(FuzzfileError) as info:
        load_job(data)
    assert str(info.value) == message


def test_a_service_dict_may_have_neither_command_nor_script():
    data = everything().service_defs["db"].to_dict()
    assert (data["command"], data["script"]) == (None, None)
    assert load_job(data).kind == "service"


def workflow_dict(**changes):
    data = json.loads(json.dumps(everything().to_dict()))
    data.update(changes)
    return data


def test_workflow_from_dict_errors():
    def message(data):
        with pytest.raises(FuzzfileError) as info:
            load_workflow(data)
        return str(info.value)

    data = workflow_dict()
    data["job_defs"]["solve"]["depends_on"].append({"name": "nope", "status": "FINISHED"})
    assert message(data) == (
        "workflow.job_defs.solve.depends_on[2].name: no job or service named 'nope' (jobs: "
        "prepare, solve, sweep; services: db, web, grpc, probe-exec)"
    )
    data = workflow_dict()
    data["job_defs"]["prepare"]["depends_on"] = [{"name": "sweep", "status": "FINISHED"}]
    assert message(data) == "jobs: dependency cycle: prepare -> sweep -> solve -> prepare"
    data = workflow_dict()
    data["job_defs"]["prepare"]["depends_on"] = [{"name": "solve", "status": "RUNNING"}]
    assert message(data) == (
        "workflow.job_defs.prepare.depends_on[0].status: RUNNING is only for services, and "
        "'solve' is a job; use FINISHED"
    )
    data = workflow_dict(files={})
    assert message(data) == (
        "workflow.job_defs.prepare.files./etc/app.conf: no entry 'conf' in files (none)"
    )
    data = workflow_dict()
    data["job_defs"]["solve"]["name"] = "other"
    assert message(data) == "workflow.job_defs.solve.name: must be 'solve', got 'other'"
    data = workflow_dict()
    data["service_defs"]["grpc"]["kind"] = "job"
    assert message(data) == "workflow.service_defs.grpc.kind: must be 'service', got 'job'"
    assert message(workflow_dict(job_defs={}, service_defs={})) == (
        "workflow.job_defs: must contain at least one job (or service_defs a service)"
    )
    assert message(workflow_dict(version="v2")) == (
        "workflow.version: must be one of v1, v4, got 'v2'"
    )
    assert message(workflow_dict(extra=1)) == (
        "workflow.extra: unknown key; expected one of files, job_defs, jobs, order, "
        "service_defs, services, unsupported, version, volumes, warnings, waves"
    )
