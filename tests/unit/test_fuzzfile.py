"""Tests for plugins/module_utils/fuzzfile.py and the fuzz.multinode.fuzzfile module."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    load_job,
    parse_memory_size,
    parse_workflow,
    require_runnable,
    select_job,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
DELETE = object()


def read(name):
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as handle:
        return handle.read()


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
    for key, value in list(data.items()) + list(top.items()):
        if value is DELETE:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def parse(data):
    return parse_workflow(yaml.safe_dump(data, sort_keys=False))


def parse_job(version="v4", top=None, **changes):
    """The job ``solve`` of a workflow; ``top`` adds top-level keys."""
    return select_job(parse(workflow({"solve": job(**changes)}, version=version, **(top or {}))))


def error(data):
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    with pytest.raises(FuzzfileError) as info:
        parse_workflow(text)
    return str(info.value)


def job_error(**changes):
    return error(workflow({"solve": job(**changes)}))


# ---------------------------------------------------------------------------
# the examples of the primary specification


def test_example_command_parses():
    wf = parse_workflow(read("generic-multinode.yml"))
    assert wf.version == "v4"
    assert list(wf.jobs) == ["generic-multinode"]
    assert wf.unsupported == []  # the image is used: no note
    j = select_job(wf)
    assert j.name == "generic-multinode"
    assert j.image_uri.startswith("oras://docker.io/anderbubble/openmpi-hello-world.sif@sha256:")
    assert j.command == [
        "mpirun",
        "-H",
        "$MULTINODE_HOSTLIST",
        "--mca",
        "plm_rsh_agent",
        "$MULTINODE_SSH_WRAPPER",
        "-np",
        "$MULTINODE_TOTAL_SLOTS",
        "/usr/lib64/openmpi/bin/mpi_hello_world",
    ]
    assert j.script is None
    assert j.env == [("PATH", "/usr/lib64/openmpi/bin:/usr/local/bin:/usr/bin:/bin")]
    assert (j.cores, j.affinity, j.memory_bytes) == (2, "NUMA", 10**9)
    assert (j.nodes, j.implementation, j.procs_per_node) == (2, "generic", None)
    assert j.slots_per_node == 2
    assert j.unsupported == []


def test_example_helper_parses():
    j = select_job(parse_workflow(read("generic-multinode-helper.yml")))
    assert j.name == "generic-multinode-helper"
    assert j.command is None
    assert j.script == (
        "#!/bin/sh\n"
        ". /multinode/generic-helper\n"
        "\n"
        "exec_rank0 'echo \"$HOSTNAME is the head node\"; sleep 3'\n"
        "exec_rankN 'echo \"$HOSTNAME is a worker node\"'\n"
        "wait_rank0\n"
    )
    assert j.env == [("MULTINODE_WRAPPER_FORWARD_STREAMS", "1")]
    assert (j.cores, j.nodes, j.implementation, j.slots_per_node) == (1, 2, "generic", 1)


def test_example_script_as_published_is_read_with_a_warning():
    """The script example of generic-multinode.md is copied verbatim, and it is
    not valid YAML: line 13 of the file (``sleep_func``'s echo) starts with a TAB.
    A block scalar's lines must be indented with spaces by at least the
    scalar's indentation (6 here); the TAB line has 0 spaces, so it ends the
    scalar, and a TAB cannot start a token in block context. PyYAML, ruamel
    and libyaml-based parsers reject it. The example must still run unchanged,
    so such tabs are expanded to 8-column stops, with a warning naming the line."""
    text = read("generic-multinode-script.yml")
    assert text.splitlines()[12].startswith("\t      echo")
    workflow = parse_workflow(text)
    assert workflow.warnings == [
        "line 13: tabs in the indentation were read as spaces to the next multiple of 8 "
        "columns; YAML forbids tabs there and strict parsers reject this file"
    ]
    j = select_job(workflow)
    assert j.name == "generic-multinode-script"
    assert j.script.startswith("#!/bin/sh\nHOSTNAME=$(hostname)\n\nsleep_func() {\n")
    assert '        echo "$HOSTNAME is the head node"\n  sleep 3\n}\n' in j.script
    assert "for HOST in ${MULTINODE_HOSTLIST_NOSLOTS}; do\n" in j.script
    assert j.script.endswith("wait $pid\n")
    assert j.env == [("MULTINODE_WRAPPER_FORWARD_STREAMS", "1")]
    assert (j.cores, j.nodes, j.implementation) == (1, 2, "generic")


def test_tabs_that_do_not_help_keep_the_strict_error():
    message = error("version: v4\njobs:\n\tx: [\n")
    assert "invalid YAML" in message and message.startswith("line 3, column 1:")


def test_strict_yaml_has_no_warnings():
    assert parse_workflow(read("generic-multinode-helper.yml")).warnings == []


# ---------------------------------------------------------------------------
# valid input


@pytest.mark.parametrize("version", ["v1", "v4"])
def test_versions(version):
    wf = parse(workflow(version=version))
    assert wf.version == version
    assert select_job(wf).command == ["true"]


def test_single_node_job():
    j = parse_job(resource={"cpu": {"cores": 3}})
    assert (j.nodes, j.implementation, j.procs_per_node) == (1, None, None)
    assert j.slots_per_node == 3
    assert not j.multinode


@pytest.mark.parametrize(
    "resource, multinode, slots",
    [
        ({"cpu": {"cores": 4}}, {"nodes": 2, "implementation": "generic", "procs-per-node": 3}, 3),
        ({"cpu": {"cores": 4}}, {"nodes": 2, "implementation": "generic"}, 4),
        (None, {"nodes": 2, "implementation": "generic"}, 1),
        (None, {"nodes": 2, "implementation": "generic", "procs-per-node": 5}, 5),
    ],
)
def test_slots_per_node(resource, multinode, slots):
    changes = {"multinode": multinode}
    if resource is not None:
        changes["resource"] = resource
    assert parse_job(**changes).slots_per_node == slots


def test_all_handled_fields():
    j = parse_job(
        command=DELETE,
        script="echo hi\n",
        args=["a b", "$X"],
        env=["A=1", "B=", "C=x=y", "D= spaced "],
        cwd="/work",
        resource={"cpu": {"cores": 2, "affinity": "SOCKET"}, "memory": {"size": "512MiB"}},
        multinode={"nodes": 3, "implementation": "openmpi", "procs-per-node": 4},
    )
    assert j.script == "echo hi\n" and j.command is None
    assert j.args == ["a b", "$X"]
    assert j.env == [("A", "1"), ("B", ""), ("C", "x=y"), ("D", " spaced ")]
    assert j.cwd == "/work"
    assert (j.cores, j.affinity, j.memory_bytes) == (2, "SOCKET", 512 * 2**20)
    assert (j.nodes, j.implementation, j.procs_per_node) == (3, "openmpi", 4)


def test_env_later_duplicate_wins_at_first_position():
    j = parse_job(env=["A=1", "B=2", "A=3", "C=4", "B=5"])
    assert j.env == [("A", "3"), ("B", "5"), ("C", "4")]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1GB", 10**9),
        ("1gb", 10**9),
        ("1Gb", 10**9),
        ("512MiB", 512 * 2**20),
        ("512mib", 512 * 2**20),
        ("0.5GiB", 2**29),
        ("1.5k", 1500),
        ("2Ki", 2048),
        ("1 MB", 10**6),
        ("1024", 1024),
        ("100B", 100),
        (".5KiB", 512),
        (4096, 4096),
        ("1TiB", 2**40),
        ("1EB", 10**18),
    ],
)
def test_memory_sizes(text, expected):
    assert parse_memory_size(text) == expected
    assert parse_job(resource={"memory": {"size": text}}).memory_bytes == expected


def test_yaml_1_2_booleans_and_no_dates():
    text = (
        "version: v4\n"
        "jobs:\n"
        "  solve:\n"
        "    image: {uri: docker://alpine}\n"
        "    command: [echo, yes, no, on, off, 2024-01-01, Yes]\n"
    )
    j = select_job(parse_workflow(text))
    assert j.command == ["echo", "yes", "no", "on", "off", "2024-01-01", "Yes"]


def test_null_optional_keys_count_as_absent():
    text = (
        "version: v4\n"
        "jobs:\n"
        "  solve:\n"
        "    image: {uri: docker://alpine}\n"
        "    command: [true]\n"
        "    env:\n"
        "    args:\n"
        "    resource:\n"
        "    multinode:\n"
        "    mounts:\n"
    )
    # `true` unquoted is a boolean: that is the only error here
    assert error(text) == (
        "jobs.solve.command[0]: must be a string or a number, got true (quote it in YAML)"
    )
    j = select_job(parse_workflow(text.replace("[true]", "['true']")))
    assert (j.env, j.args, j.nodes, j.implementation, j.unsupported) == ([], [], 1, None, [])


def test_name_inside_a_job_is_ignored():
    j = parse_job(name="something-else")
    assert j.name == "solve"
    assert j.unsupported == []


def test_unsupported_job_features_are_recorded():
    """Features this collection does not execute are notes; what the runner
    will execute (dependencies, timeout, task arrays, files, secret env
    values, cpu/memory) is part of the model instead."""
    wf = parse(
        workflow(
            {
                "prep": job(),
                "solve": job(
                    image={"uri": "docker://alpine", "secret": "secret://user/registry"},
                    env=["TOKEN=secret://user/token", "PLAIN=x"],
                    mounts={"/data": {"volume": "v"}},
                    files={"/etc/app.conf": "file://conf"},
                    requires=["prep"],
                    depends_on=[{"name": "prep", "status": "FINISHED"}],
                    policy={
                        "timeout": {"execute": "2h"},
                        "retry": {"attempts": 3},
                        "restart": "on-node-fault",
                    },
                    task_array={"start": 1, "end": 4},
                    network={"isolated": True},
                    resource={
                        "cpu": {"cores": 1, "threads": True, "sockets": 1},
                        "memory": {"size": "1GB", "by-core": False},
                        "devices": {"nvidia.com/gpu": 1},
                        "exclusive": True,
                        "annotations": {"a": "b"},
                    },
                ),
            },
            volumes={"v": {"use": "ephemeral"}},
            files={"conf": "x=1\n"},
        )
    )
    j = wf.jobs["solve"]
    assert j.unsupported == [
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
    assert wf.warnings == [
        "jobs.solve.requires: ignored because depends-on is set (requires is deprecated)"
    ]
    assert j.env == [("TOKEN", "secret://user/token"), ("PLAIN", "x")]
    assert j.secret_env == ["TOKEN"]
    assert j.files == {"/etc/app.conf": "conf"}
    assert j.depends_on == [("prep", "FINISHED")]
    assert j.timeout_seconds == 7200.0
    assert j.task_array == (1, 4, None) and j.tasks == 4
    assert (j.cores, j.memory_bytes, j.memory_by_core) == (1, 10**9, False)
    assert (j.image_secret, j.cpu_threads, j.cpu_sockets) == ("secret://user/registry", True, 1)
    assert (j.devices, j.exclusive, j.resource_annotations) == ({"nvidia.com/gpu": 1}, True,
                                                                {"a": "b"})
    assert (j.retry_attempts, j.restart, j.network_isolated) == (3, "on-node-fault", True)
    assert j.mounts == {"/data": "v"}
    assert wf.jobs["prep"].unsupported == []


@pytest.mark.parametrize("version", ["v1", "v4"])
def test_unsupported_workflow_features_are_recorded(version):
    """Top-level files, defaults, volumes and their data movement, and
    services are applied now (no notes); annotations are a note. A volume
    with transfers that no job mounts gets a warning: they are not run."""
    wf = parse(
        workflow(
            version=version,
            files={"conf": "x=1\n"},
            defaults={"job": {"env": ["A=1"]}},
            annotations={"team": "hpc"},
            volumes={"data": {"reference": "volume://user/ephemeral",
                              "ingress": [{"source": {"uri": "https://example.org/in.csv"},
                                           "destination": {"uri": "file://in.csv"}}]}},
            services={"web": {"image": {"uri": "docker://nginx"}},
                      "db": {"image": {"uri": "docker://postgres"}}},
        )
    )
    assert wf.services == ["web", "db"]
    assert wf.unsupported == ["annotations: workflow annotations are not supported yet; ignored"]
    assert wf.warnings == ["volumes.data: no job mounts it, so its ingress and egress are not run"]
    assert select_job(wf).env == [("A", "1")]
    assert wf.to_dict() == {
        "version": version,
        "jobs": ["solve"],
        "services": ["web", "db"],
        "unsupported": wf.unsupported,
        "warnings": wf.warnings,
        "files": {"conf": "x=1\n"},
        "volumes": {"data": {"store": "ephemeral", "egress": [], "ingress": [
            {"source": "https://example.org/in.csv", "destination": "file://in.csv", "secret": None,
             "timeout_seconds": None, "attempts": 1}]}},
        "order": ["solve", "web", "db"],
        "waves": [["solve", "web", "db"]],
        "job_defs": {"solve": select_job(wf).to_dict()},
        "service_defs": {name: wf.service_defs[name].to_dict() for name in ("web", "db")},
    }


def test_job_order_is_file_order():
    wf = parse(workflow({"zeta": job(), "alpha": job(), "mid-1": job()}))
    assert list(wf.jobs) == ["zeta", "alpha", "mid-1"]


@pytest.mark.parametrize("name", ["a", "0", "solve", "a-b", "x9-y-z", "a" * 63, "123"])
def test_valid_job_names(name):
    assert select_job(parse(workflow({name: job()}))).name == name


# ---------------------------------------------------------------------------
# invalid input: every rule, with its message

TOP = "annotations, defaults, files, jobs, services, version, volumes"
JOB_KEYS = (
    "args, command, cwd, depends-on, env, files, image, mounts, multinode, name, network, "
    "policy, requires, resource, script, task-array"
)
NAME_RULE = (
    "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or "
    "digit (the name becomes the ranks' host names)"
)


@pytest.mark.parametrize(
    "data, message",
    [
        ("", "the document is empty; expected a mapping with 'version' and 'jobs'"),
        ("# nothing\n", "the document is empty; expected a mapping with 'version' and 'jobs'"),
        ([1, 2], "top level: must be a mapping with 'version' and 'jobs', got a list"),
        ("just text", "top level: must be a mapping with 'version' and 'jobs', got 'just text'"),
        (
            workflow(job={"a": 1}),
            "job: unknown key; expected one of %s (did you mean 'jobs'?)" % TOP,
        ),
        (workflow(version=DELETE), "version: required (one of v1, v4)"),
        (workflow(version="v2"), "version: must be one of v1, v4, got 'v2'"),
        (workflow(version=4), "version: must be one of v1, v4, got 4"),
        (workflow(jobs=DELETE), "jobs: required: a mapping of job names to jobs"),
        (
            # services only: validated like any (select_run refuses to run them)
            workflow(jobs=DELETE, services={"web": {}}),
            "services.web.image: required (a mapping with 'uri')",
        ),
        (workflow(jobs=[job()]), "jobs: must be a mapping of job names to jobs, got a list"),
        (workflow(jobs={}), "jobs: must contain at least one job"),
        (workflow(jobs={"Solve": job()}), "jobs: invalid job name 'Solve': " + NAME_RULE),
        (workflow(jobs={"so_lve": job()}), "jobs: invalid job name 'so_lve': " + NAME_RULE),
        (workflow(jobs={"-solve": job()}), "jobs: invalid job name '-solve': " + NAME_RULE),
        (workflow(jobs={"solve-": job()}), "jobs: invalid job name 'solve-': " + NAME_RULE),
        (workflow(jobs={"so.lve": job()}), "jobs: invalid job name 'so.lve': " + NAME_RULE),
        (workflow(jobs={"": job()}), "jobs: invalid job name '': " + NAME_RULE),
        (
            workflow(jobs={"a" * 64: job()}),
            "jobs: invalid job name '%s': %s" % ("a" * 64, NAME_RULE),
        ),
        (workflow(jobs={1: job()}), "jobs: job names must be strings, got 1"),
        (workflow(jobs={"solve": [1]}), "jobs.solve: must be a mapping, got a list"),
        (workflow(jobs={"solve": None}), "jobs.solve: must be a mapping, got null"),
        (workflow(services=["web"]), "services: must be a mapping, got a list"),
        (workflow(volumes=["v"]), "volumes: must be a mapping, got a list"),
        (workflow(defaults="x"), "defaults: must be a mapping, got 'x'"),
        (workflow(files=[]), "files: must be a mapping, got a list"),
        (workflow(annotations=1), "annotations: must be a mapping, got 1"),
    ],
)
def test_workflow_errors(data, message):
    assert error(data) == message


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"comand": ["x"]},
            "jobs.solve.comand: unknown key; expected one of %s (did you mean 'command'?)"
            % JOB_KEYS,
        ),
        ({"image": DELETE}, "jobs.solve.image: required (a mapping with 'uri')"),
        (
            {"image": "docker://alpine"},
            "jobs.solve.image: must be a mapping with 'uri', got 'docker://alpine'",
        ),
        ({"image": {}}, "jobs.solve.image.uri: required"),
        ({"image": {"uri": ""}}, "jobs.solve.image.uri: must not be empty"),
        ({"image": {"uri": 5}}, "jobs.solve.image.uri: must be a string, got 5 (quote it in YAML)"),
        (
            {"image": {"url": "docker://alpine"}},
            "jobs.solve.image.url: unknown key; expected one of secret, uri (did you mean 'uri'?)",
        ),
        (
            {"image": {"uri": "x", "secret": []}},
            "jobs.solve.image.secret: must be a string, got a list",
        ),
        (
            {"image": {"uri": "x", "secret": "user/registry"}},
            "jobs.solve.image.secret: must be a secret:// reference (secret://SCOPE/NAME, e.g. "
            "secret://user/registry), got 'user/registry'",
        ),
        (
            {"image": {"uri": "x", "secret": "secret://"}},
            "jobs.solve.image.secret: must be a secret:// reference (secret://SCOPE/NAME, e.g. "
            "secret://user/registry), got 'secret://'",
        ),
        (
            {"image": {"uri": "x", "secret": "secret://user/my registry"}},
            "jobs.solve.image.secret: must be a secret:// reference (secret://SCOPE/NAME, e.g. "
            "secret://user/registry), got 'secret://user/my registry'",
        ),
        ({"image": {"uri": "x", "secret": ""}}, "jobs.solve.image.secret: must not be empty"),
        ({"command": "echo hi"}, "jobs.solve.command: must be a list of strings, got 'echo hi'"),
        ({"command": []}, "jobs.solve.command: must not be empty"),
        (
            {"command": ["echo", False]},
            "jobs.solve.command[1]: must be a string or a number, got false (quote it in YAML)",
        ),
        (
            {"command": ["echo", None]},
            "jobs.solve.command[1]: must be a string or a number, got null",
        ),
        (
            {"command": ["echo", ["-n"]]},
            "jobs.solve.command[1]: must be a string or a number, got a list",
        ),
        ({"command": ["a\x00b"]}, "jobs.solve.command[0]: must not contain a NUL character"),
        ({"script": "x"}, "jobs.solve: has both command and script; exactly one is allowed"),
        ({"command": DELETE}, "jobs.solve: needs a command or a script (exactly one)"),
        ({"command": DELETE, "script": ["x"]}, "jobs.solve.script: must be a string, got a list"),
        ({"command": DELETE, "script": ""}, "jobs.solve.script: must not be empty"),
        ({"args": "x"}, "jobs.solve.args: must be a list of strings, got 'x'"),
        (
            {"args": [True]},
            "jobs.solve.args[0]: must be a string or a number, got true (quote it in YAML)",
        ),
        ({"args": [{"n": 1}]}, "jobs.solve.args[0]: must be a string or a number, got a mapping"),
        ({"env": {"A": "1"}}, "jobs.solve.env: must be a list of KEY=VALUE strings, got a mapping"),
        ({"env": "A=1"}, "jobs.solve.env: must be a list of KEY=VALUE strings, got 'A=1'"),
        ({"env": ["A"]}, "jobs.solve.env[0]: must be KEY=VALUE, got 'A'"),
        ({"env": [{"A": "1"}]}, "jobs.solve.env[0]: must be a string, got a mapping"),
        (
            {"env": ["OK=1", "1A=x"]},
            "jobs.solve.env[1]: '1A' is not a valid variable name (letters, digits and '_', not "
            "starting with a digit)",
        ),
        (
            {"env": ["A-B=x"]},
            "jobs.solve.env[0]: 'A-B' is not a valid variable name (letters, digits and '_', "
            "not starting with a digit)",
        ),
        (
            {"env": ["=x"]},
            "jobs.solve.env[0]: '' is not a valid variable name (letters, digits and '_', not "
            "starting with a digit)",
        ),
        (
            {"env": [" A=x"]},
            "jobs.solve.env[0]: ' A' is not a valid variable name (letters, digits and '_', "
            "not starting with a digit)",
        ),
        ({"env": ["A=x\x00y"]}, "jobs.solve.env[0]: must not contain a NUL character"),
        ({"cwd": "work"}, "jobs.solve.cwd: must be an absolute path, got 'work'"),
        ({"cwd": ""}, "jobs.solve.cwd: must not be empty"),
        ({"cwd": ["/"]}, "jobs.solve.cwd: must be a string, got a list"),
        ({"resource": [1]}, "jobs.solve.resource: must be a mapping, got a list"),
        (
            {"resource": {"gpu": 1}},
            "jobs.solve.resource.gpu: unknown key; expected one of annotations, cpu, devices, "
            "exclusive, memory (did you mean 'cpu'?)",
        ),
        ({"resource": {"cpu": 2}}, "jobs.solve.resource.cpu: must be a mapping, got 2"),
        (
            {"resource": {"cpu": {"core": 2}}},
            "jobs.solve.resource.cpu.core: unknown key; expected one of affinity, cores, "
            "sockets, threads (did you mean 'cores'?)",
        ),
        (
            {"resource": {"cpu": {"cores": 0}}},
            "jobs.solve.resource.cpu.cores: must be an integer >= 1, got 0",
        ),
        (
            {"resource": {"cpu": {"cores": -2}}},
            "jobs.solve.resource.cpu.cores: must be an integer >= 1, got -2",
        ),
        (
            {"resource": {"cpu": {"cores": True}}},
            "jobs.solve.resource.cpu.cores: must be an integer >= 1, got true",
        ),
        (
            {"resource": {"cpu": {"cores": "2"}}},
            "jobs.solve.resource.cpu.cores: must be an integer >= 1, got '2'",
        ),
        (
            {"resource": {"cpu": {"cores": 1.5}}},
            "jobs.solve.resource.cpu.cores: must be an integer >= 1, got 1.5",
        ),
        (
            {"resource": {"cpu": {"affinity": "numa"}}},
            "jobs.solve.resource.cpu.affinity: must be one of NUMA, SOCKET, CORE, got 'numa'",
        ),
        (
            {"resource": {"cpu": {"affinity": 1}}},
            "jobs.solve.resource.cpu.affinity: must be one of NUMA, SOCKET, CORE, got 1",
        ),
        (
            {"resource": {"cpu": {"threads": "yes"}}},
            "jobs.solve.resource.cpu.threads: must be a boolean, got 'yes'",
        ),
        (
            {"resource": {"cpu": {"sockets": True}}},
            "jobs.solve.resource.cpu.sockets: must be an integer >= 1, got true",
        ),
        (
            {"resource": {"memory": {"sise": "1GB"}}},
            "jobs.solve.resource.memory.sise: unknown key; expected one of by-core, size (did "
            "you mean 'size'?)",
        ),
        (
            {"resource": {"memory": {"size": "1XB"}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got '1XB'",
        ),
        (
            {"resource": {"memory": {"size": "-1GB"}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got '-1GB'",
        ),
        (
            {"resource": {"memory": {"size": "GB"}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got 'GB'",
        ),
        (
            {"resource": {"memory": {"size": True}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got true",
        ),
        (
            {"resource": {"memory": {"size": 1.5}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got 1.5",
        ),
        (
            {"resource": {"memory": {"size": "0"}}},
            "jobs.solve.resource.memory.size: must be at least 1 byte, got '0'",
        ),
        (
            {"resource": {"memory": {"size": "0.5"}}},
            "jobs.solve.resource.memory.size: must be at least 1 byte, got '0.5'",
        ),
        (
            {"resource": {"memory": {"size": "100EiB"}}},
            "jobs.solve.resource.memory.size: too large, got '100EiB'",
        ),
        (
            {"resource": {"memory": {"size": 10**30}}},
            "jobs.solve.resource.memory.size: too large, got 1000000000000000000000000000000",
        ),
        (
            {"resource": {"memory": {"size": "1" * 5000}}},
            "jobs.solve.resource.memory.size: must be a size such as 1GB, 512MiB or 0.5GiB, "
            "got '%s...'" % ("1" * 57),
        ),
        (
            {"resource": {"cpu": {"cores": 2**31}}},
            "jobs.solve.resource.cpu.cores: must be an integer from 1 to 2147483647, got "
            "2147483648",
        ),
        (
            {"resource": {"memory": {"by-core": 1}}},
            "jobs.solve.resource.memory.by-core: must be a boolean, got 1",
        ),
        (
            {"resource": {"devices": [1]}},
            "jobs.solve.resource.devices: must be a mapping, got a list",
        ),
        (
            {"resource": {"exclusive": "yes"}},
            "jobs.solve.resource.exclusive: must be a boolean, got 'yes'",
        ),
        (
            {"resource": {"annotations": "x"}},
            "jobs.solve.resource.annotations: must be a mapping, got 'x'",
        ),
        ({"multinode": 2}, "jobs.solve.multinode: must be a mapping, got 2"),
        (
            {"multinode": {"node": 2, "implementation": "generic"}},
            "jobs.solve.multinode.node: unknown key; expected one of implementation, nodes, "
            "procs-per-node (did you mean 'nodes'?)",
        ),
        (
            {"multinode": {"implementation": "generic"}},
            "jobs.solve.multinode.nodes: required (an integer >= 1)",
        ),
        (
            {"multinode": {"nodes": 0, "implementation": "generic"}},
            "jobs.solve.multinode.nodes: must be an integer >= 1, got 0",
        ),
        (
            {"multinode": {"nodes": True, "implementation": "generic"}},
            "jobs.solve.multinode.nodes: must be an integer >= 1, got true",
        ),
        (
            {"multinode": {"nodes": "2", "implementation": "generic"}},
            "jobs.solve.multinode.nodes: must be an integer >= 1, got '2'",
        ),
        (
            {"multinode": {"nodes": None, "implementation": "generic"}},
            "jobs.solve.multinode.nodes: must be an integer >= 1, got null",
        ),
        (
            {"multinode": {"nodes": 2}},
            "jobs.solve.multinode.implementation: required (one of ompi, openmpi, mpich, "
            "gasnet, generic)",
        ),
        (
            {"multinode": {"nodes": 2, "implementation": "mpi"}},
            "jobs.solve.multinode.implementation: must be one of ompi, openmpi, mpich, gasnet, "
            "generic, got 'mpi'",
        ),
        (
            {"multinode": {"nodes": 2, "implementation": "Generic"}},
            "jobs.solve.multinode.implementation: must be one of ompi, openmpi, mpich, gasnet, "
            "generic, got 'Generic'",
        ),
        (
            {"multinode": {"nodes": 2, "implementation": "generic", "procs-per-node": 0}},
            "jobs.solve.multinode.procs-per-node: must be an integer >= 1, got 0",
        ),
        (
            {"multinode": {"nodes": 2, "implementation": "generic", "procs-per-node": False}},
            "jobs.solve.multinode.procs-per-node: must be an integer >= 1, got false",
        ),
        ({"mounts": ["/data"]}, "jobs.solve.mounts: must be a mapping, got a list"),
        ({"files": "x"}, "jobs.solve.files: must be a mapping, got 'x'"),
        ({"requires": "prep"}, "jobs.solve.requires: must be a list, got 'prep'"),
        ({"depends_on": {"name": "prep"}}, "jobs.solve.depends-on: must be a list, got a mapping"),
        ({"policy": "2h"}, "jobs.solve.policy: must be a mapping, got '2h'"),
        ({"task_array": [1, 4]}, "jobs.solve.task-array: must be a mapping, got a list"),
        ({"network": True}, "jobs.solve.network: must be a mapping, got true"),
        ({"name": ["x"]}, "jobs.solve.name: must be a string, got a list"),
    ],
)
def test_job_errors(changes, message):
    assert job_error(**changes) == message


@pytest.mark.parametrize("version", ["v1", "v4"])
def test_errors_are_the_same_in_v1_and_v4(version):
    data = workflow({"solve": job(multinode={"nodes": 0, "implementation": "generic"})}, version)
    assert error(data) == "jobs.solve.multinode.nodes: must be an integer >= 1, got 0"


def test_errors_are_value_errors():
    assert issubclass(FuzzfileError, ValueError)


# ---------------------------------------------------------------------------
# YAML-level errors: position and a message, never a traceback


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "version: v4\njobs:\n  solve:\n  @x\n",
            "line 4, column 3: invalid YAML: found character '@' that cannot start any token "
            "(while scanning for the next token)",
        ),
        (
            "version: v4\njobs:\n  solve:\n  x: : y\n",
            "line 4, column 6: invalid YAML: mapping values are not allowed here",
        ),
        (
            "version: v4\njobs: {solve: [a\n",
            "line 3, column 1: invalid YAML: expected ',' or ']', but got '<stream end>' (while "
            "parsing a flow sequence)",
        ),
        (
            "version: v4\njobs:\n  a: {}\n  a: {}\n",
            "line 4, column 3: invalid YAML: found duplicate key 'a' (while constructing a "
            "mapping)",
        ),
        (
            "version: v4\nversion: v1\njobs: {}\n",
            "line 2, column 1: invalid YAML: found duplicate key 'version' (while constructing "
            "a mapping)",
        ),
        (
            "version: v4\n---\nversion: v4\n",
            "line 2, column 1: invalid YAML: expected a single document in the stream, but "
            "found another document",
        ),
        (
            "version: v4\njobs:\n  a: \x00\n",
            "line 3, column 6: invalid YAML: unacceptable character #x0000: special characters "
            "are not allowed",
        ),
        (
            "version: v4\njobs: !!python/object/apply:os.system [echo hi]\n",
            "line 2, column 7: invalid YAML: could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system'",
        ),
        (
            "version: v4\njobs: *nope\n",
            "line 2, column 7: invalid YAML: found undefined alias 'nope'",
        ),
    ],
)
def test_yaml_errors(text, message):
    assert error(text) == message


def test_yaml_merge_keys_still_work():
    text = (
        "version: v4\n"
        "jobs:\n"
        "  a: &base\n"
        "    image: {uri: docker://alpine}\n"
        "    command: [x]\n"
        "  b:\n"
        "    <<: *base\n"
        "    command: [y]\n"
    )
    wf = parse_workflow(text)
    assert wf.jobs["b"].command == ["y"] and wf.jobs["b"].image_uri == "docker://alpine"


@pytest.mark.parametrize(
    "text",
    [
        "a: !!timestamp 2020-13-45\n",
        "a: !!binary '%%%'\n",
        "[" * 20000 + "]" * 20000,
        "a: !!int x\n",
        "a: !!float x\n",
        "a: !!set [1]\n",
        "a: " + "1" * 5000 + "\n",
        "version: 0x" + "f" * 5000 + "\n",
        "version: v4\njobs:\n  a:\n    image: {uri: x}\n    command: [x]\n"
        "    multinode: {implementation: generic, nodes: -0x" + "f" * 5000 + "}\n",
        "? [a]\n: b\n",
    ],
)
def test_odd_yaml_gives_fuzzfile_error(text):
    with pytest.raises(FuzzfileError):
        parse_workflow(text)


def test_non_text_input():
    with pytest.raises(FuzzfileError, match="expected the Fuzzfile as text, got bytes"):
        parse_workflow(b"version: v4\n")


# ---------------------------------------------------------------------------
# select_job and require_runnable


def test_select_job_picks_a_job_or_a_service_by_name():
    wf = parse(workflow({"a": job(), "b": job()}, services={"web": job()}))
    assert select_job(wf, "b").name == "b"
    assert select_job(wf, "web").kind == "service"
    with pytest.raises(FuzzfileError) as info:
        select_job(wf)
    assert str(info.value) == "jobs: the workflow has 2 jobs; name the one to run: a, b"
    with pytest.raises(FuzzfileError) as info:
        select_job(wf, "c")
    assert str(info.value) == "jobs: no job or service named 'c'; jobs: a, b; services: web"
    # without services, as before
    with pytest.raises(FuzzfileError) as info:
        select_job(parse(workflow({"a": job(), "b": job()})), "c")
    assert str(info.value) == "jobs: no job named 'c'; jobs: a, b"


def test_without_a_name_select_job_takes_the_only_job_or_else_the_only_service():
    wf = parse(workflow({"a": job()}, services={"web": job(), "db": job()}))
    assert select_job(wf).name == "a"
    wf = parse(workflow(jobs=DELETE, services={"web": job()}))
    assert select_job(wf).name == "web"
    wf = parse(workflow(jobs=DELETE, services={"web": job(), "db": job()}))
    with pytest.raises(FuzzfileError) as info:
        select_job(wf)
    assert str(info.value) == "services: the workflow has 2 services; name the one to run: web, db"


def test_select_the_only_job():
    assert select_job(parse(workflow())).name == "solve"
    assert select_job(parse(workflow()), "solve").name == "solve"


GASNET_REFUSED = (
    "jobs.%s.multinode.implementation: 'gasnet' is not supported: fuzz.multinode has no "
    "GASNet launcher (GASNet is not packaged in Debian, the OS its tests run on, so one could "
    "not be tested); use implementation 'generic' and let GASNet's ssh spawner start the "
    "processes through the wrapper: run the program with GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER, "
    "GASNET_SSH_SERVERS=$MULTINODE_HOSTLIST_NOSLOTS and GASNET_SPAWNFN=S (udp conduit; "
    "other conduits: GASNET_<CONDUIT>_SPAWNER=ssh)"
)


def test_require_runnable_refuses_gasnet_naming_the_field_and_the_way_out():
    j = parse_job(multinode={"nodes": 2, "implementation": "gasnet"})
    with pytest.raises(FuzzfileError) as info:
        require_runnable(j)
    assert str(info.value) == GASNET_REFUSED % "solve"


@pytest.mark.parametrize("implementation", ["generic", "openmpi", "ompi", "mpich"])
def test_require_runnable_accepts_every_other_implementation(implementation):
    j = parse_job(multinode={"nodes": 2, "implementation": implementation})
    assert require_runnable(j) is j


def test_require_runnable_accepts_plain_jobs():
    plain = parse_job()
    assert require_runnable(plain) is plain


def test_the_fuzzfile_module_refuses_gasnet_before_any_host(tmp_path):
    """run-job.yml's first task: refused on the controller, so no node is
    prepared for a job that cannot run (test_run_job_refusals.py checks
    that no host is reached)."""
    path = tmp_path / "gasnet.yml"
    path.write_text(yaml.safe_dump(workflow({"chapel": job(
        multinode={"nodes": 2, "implementation": "gasnet"})})))
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s" % path)
    assert rc != 0
    assert result["msg"] == "%s: %s" % (path, GASNET_REFUSED % "chapel")


# ---------------------------------------------------------------------------
# properties
# YAML cannot carry every character (it has no escape for a NUL that we
# would accept, and the job rejects NUL anyway); safe_dump escapes the rest.
ENV_VALUES = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))


@settings(max_examples=300, deadline=None)
@given(value=ENV_VALUES)
def test_env_values_round_trip(value):
    data = workflow({"solve": job(env=["K=" + value])})
    j = select_job(parse_workflow(yaml.safe_dump(data)))
    assert j.env == [("K", value)]
    assert load_job(json.loads(json.dumps(j.to_dict()))).env == [("K", value)]


@settings(max_examples=200, deadline=None)
@given(args=st.lists(ENV_VALUES, max_size=5))
def test_args_round_trip(args):
    data = workflow({"solve": job(args=args)})
    assert select_job(parse_workflow(yaml.safe_dump(data))).args == args


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_text_never_escapes_as_another_exception(text):
    try:
        parse_workflow(text)
    except FuzzfileError:
        pass


# ---------------------------------------------------------------------------
# the module, run by Ansible


def find_ansible(name="ansible"):
    """``ansible`` on PATH, else beside the Python running the tests."""
    found = shutil.which(name)
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(beside, os.X_OK):
        return beside
    pytest.fail(
        "%s not found on PATH nor beside %s; install ansible-core (requirements.txt) "
        "to run the module tests" % (name, sys.executable)
    )


def run_ansible(argv):
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    proc = subprocess.run(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("no JSON from %s:\n%s\n%s" % (argv, proc.stdout, proc.stderr))
    return proc.returncode, output


def adhoc(module, args):
    rc, output = run_ansible([find_ansible(), "localhost", "-m", module, "-a", args])
    result = output["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert "module_stderr" not in result, result
    return rc, result


def test_module_reads_the_example():
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=examples/generic-multinode.yml")
    assert rc == 0, result
    assert result["changed"] is False
    wf = parse_workflow(read("generic-multinode.yml"))
    expected = select_job(wf).to_dict()
    assert result["workflow"] == {
        "version": "v4",
        "jobs": ["generic-multinode"],
        "services": [],
        "unsupported": [],
        "warnings": [],
        "files": {},
        "volumes": {},
        "order": ["generic-multinode"],
        "waves": [["generic-multinode"]],
        "job_defs": {"generic-multinode": expected},
        "service_defs": {},
    }
    assert result["job"] == expected
    assert "warnings" not in result  # the image is used: nothing to warn about


def test_module_bad_input_gives_the_message(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("version: v4\njobs:\n  x:\n    command: [echo\n")
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s" % bad)
    assert rc != 0
    assert result["failed"] is True
    assert result["msg"].startswith("%s: line 5, column 1: invalid YAML: " % bad)
    assert "Traceback" not in result["msg"]


def test_module_warns_about_the_tab_in_the_script_example():
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=examples/generic-multinode-script.yml")
    assert rc == 0, result
    assert result["job"]["name"] == "generic-multinode-script"
    assert any("line 13: tabs in the indentation" in w for w in result["warnings"]), result


def test_module_missing_file():
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=examples/no-such-file.yml")
    assert rc != 0
    assert result["msg"] == "examples/no-such-file.yml: no such file"


def test_module_playbook(tmp_path):
    """fuzzfile -> rank_plan in a playbook, with validation errors, warnings
    and check mode."""
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"version: v4\njobs: \xff\n")
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump(workflow({"solve": job(command="echo hi")})))
    multi = tmp_path / "multi.yml"
    multi.write_text(
        yaml.safe_dump(
            workflow(
                {
                    "a": job(mounts={"/d": {"volume": "v"}}),
                    "b": job(
                        env=["RANK=7", "X=1"],
                        command=["echo", "$MULTINODE_TOTAL_SLOTS", "${X}"],
                        multinode={"nodes": 2, "implementation": "generic"},
                    ),
                    "c": job(multinode={"nodes": 2, "implementation": "openmpi"}),
                },
                volumes={"v": {"reference": "volume://user/ephemeral",
                               "egress": [{"source": {"uri": "file://out"},
                                           "destination": {"uri": "s3://bucket/out"}}]},
                         "w": {"reference": "volume://user/ephemeral",
                               "ingress": [{"source": {"uri": "https://example.org/x"},
                                            "destination": {"uri": "file://x"}}]}},
            )
        )
    )
    playbook = tmp_path / "play.yml"
    playbook.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: bad
      fuzz.multinode.fuzzfile:
        path: %(bad)s
      register: bad
      ignore_errors: true
    - name: directory
      fuzz.multinode.fuzzfile:
        path: %(dir)s
      register: directory
      ignore_errors: true
    - name: binary
      fuzz.multinode.fuzzfile:
        path: %(binary)s
      register: binary
      ignore_errors: true
    - name: several jobs, none chosen
      fuzz.multinode.fuzzfile:
        path: %(multi)s
      register: several
    - name: warnings
      fuzz.multinode.fuzzfile:
        path: %(multi)s
        job: a
      register: warnings
    - name: read b
      fuzz.multinode.fuzzfile:
        path: %(multi)s
        job: b
      register: b
    - name: plan b
      fuzz.multinode.rank_plan:
        job: "{{ b.job }}"
        nodes:
          - {node: n1, address: 10.0.0.1}
          - {node: n2, address: 10.0.0.2}
      register: plan
    - name: plan b with the wrong node count
      fuzz.multinode.rank_plan:
        job: "{{ b.job }}"
        nodes:
          - {node: n1, address: 10.0.0.1}
      register: wrong
      ignore_errors: true
    - name: read c
      fuzz.multinode.fuzzfile:
        path: %(multi)s
        job: c
      register: c
    - name: plan c
      fuzz.multinode.rank_plan:
        job: "{{ c.job }}"
        nodes:
          - {node: n1, address: 10.0.0.1}
          - {node: n2, address: 10.0.0.2}
      register: openmpi
""" % {"bad": bad, "multi": multi, "dir": tmp_path, "binary": binary})
    rc, output = run_ansible(
        [
            find_ansible("ansible-playbook"),
            "--check",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            "ansible_python_interpreter=" + sys.executable,
            str(playbook),
        ]
    )
    assert rc == 0, output
    tasks = {t["task"]["name"]: t["hosts"]["localhost"] for t in output["plays"][0]["tasks"]}
    assert (
        tasks["bad"]["msg"]
        == "%s: jobs.solve.command: must be a list of strings, got 'echo hi'" % bad
    )
    assert tasks["directory"]["msg"] == "%s: is a directory, not a Fuzzfile" % tmp_path
    assert tasks["binary"]["msg"] == "%s: not UTF-8 text (byte 0xff at offset 18)" % binary
    # Without a job name the whole workflow runs: every job, in dependency
    # order, and no single `job` to pick.
    several = tasks["several jobs, none chosen"]
    assert [job["name"] for job in several["run"]] == ["a", "b", "c"]
    assert "job" not in several
    assert tasks["warnings"]["warnings"] == [
        "%s: volumes.w: no job mounts it, so its ingress and egress are not run" % multi,
    ]
    # The run's transfers: those of the volume its job mounts, on its one host.
    assert tasks["warnings"]["transfers"] == several["transfers"] == [{
        "volume": "v", "store": "ephemeral", "hosts": 1, "s3": True, "ingress": [],
        "egress": [{"field": "volumes.v.egress[0]", "source": "file://out", "destination": "s3://bucket/out",
                    "secret": None, "timeout_seconds": None, "attempts": 1}]}]
    spec = tasks["plan b"]["spec"]
    assert tasks["plan b"]["changed"] is False
    assert spec["argv"] == ["echo", "2", "1"]
    assert spec["ranks"][1]["env"] == {"X": "1", "HOSTNAME": "b-1", "RANK": "1"}
    assert tasks["plan b"]["warnings"] == [
        "jobs.b.env: RANK is set by the runtime; the job's value is ignored"
    ]
    assert tasks["plan b with the wrong node count"]["msg"] == (
        "nodes: job 'b' needs 2 node(s) (multinode.nodes), but 1 were given"
    )
    # An openmpi job runs its command under mpirun across both ranks.
    assert tasks["plan c"]["spec"]["launcher"] == [
        "mpirun", "-H", "c-0:1,c-1:1", "--mca", "plm_rsh_agent", "/multinode/ssh-wrapper",
        "-np", "2"]
    assert tasks["plan c"]["spec"]["argv"] == ["true"]


def test_examples_are_copied_verbatim_from_the_spec():
    """Only checked where the shared spec is present (development checkouts)."""
    spec_path = os.path.join(os.path.dirname(ROOT), "shared", "spec", "generic-multinode.md")
    if not os.path.exists(spec_path):
        pytest.skip("the shared spec is not beside this checkout")
    with open(spec_path, encoding="utf-8") as handle:
        spec = handle.read()
    for name in (
        "generic-multinode.yml",
        "generic-multinode-script.yml",
        "generic-multinode-helper.yml",
    ):
        assert read(name) in spec, name
