"""A node's CDI devices and their allocation (the node runtime's devices.py):
the CDI specifications read (JSON, YAML), each rank or task given devices
of its own, two jobs on one node never sharing one, a node with too few
refusing the job before anything of it is written, the devices a job's
container is started with, each rank's environment, and on the bare host
the node's other devices hidden in the run's sandbox (made for real, as
root, over stand-in device nodes: character devices 1:3, /dev/null's)."""

import json
import os
import pwd
import subprocess
import sys

import pytest
from multinode_runtime import containers, devices, registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.inputs import job_environment
from multinode_runtime.prepare import prepare_job
from multinode_runtime.sandbox import job_sandbox
from multinode_runtime.spec import JobSpec

USER = pwd.getpwuid(os.getuid()).pw_name
UUID0 = "GPU-4f3c2a1e-0000-1111-2222-333344445555"


@pytest.fixture
def gpus(tmp_path, monkeypatch):
    """Three stand-in GPUs (device nodes gpu0..gpu2, 1:3) listed by a CDI
    specification in the node's /etc/cdi (here under tmp_path); returns
    (the CDI directories, the device directory)."""
    etc, run = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    etc.mkdir()
    run.mkdir()
    nodes = tmp_path / "dev"
    nodes.mkdir()
    for index in range(3):
        os.mknod(nodes / ("gpu%d" % index), 0o666 | 0o020000, os.makedev(1, 3))
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
            "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"],
                               "deviceNodes": [{"path": str(nodes / "ctl")}]},
            "devices": [{"name": str(index), "containerEdits": {
                "deviceNodes": [{"path": str(nodes / ("gpu%d" % index))}],
                "env": ["FMN_GPU_INDEX=%d" % index]}} for index in range(3)]
            + [{"name": "all", "containerEdits": {"deviceNodes": [
                {"path": str(nodes / ("gpu%d" % index))} for index in range(3)]}}]}
    (etc / "nvidia.json").write_text(json.dumps(spec))
    monkeypatch.setattr(devices, "CDI_DIRS", (str(etc), str(run)))
    return (etc, run), nodes


def spec_data(job="ja", gpus_each=1, ranks=(("node-1", 0), ("node-2", 1)), execution="host", **more):
    data = {"job": job, "run": "20261201T165012Z-a1b2c3", "user": USER, "argv": ["true"],
            "kill_grace": 1, "execution": execution,
            "resources": {"devices": {"nvidia.com/gpu": gpus_each}},
            "ranks": [{"rank": rank, "name": "%s-%d" % (job, rank), "node": node, "address": "10.0.0.1",
                       "env": {"RANK": str(rank)}} for node, rank in ranks]}
    data.update(more)
    return data


def prepare(data, node="node-1"):
    return prepare_job(data, JobSpec.from_dict(data), node)


def held(job):
    return [[device["names"][0] for device in slot["nvidia.com/gpu"]]
            for slot in devices.read_allocation(job)["slots"]]


# -- the CDI specifications ---------------------------------------------------------

def test_json_and_yaml_specifications_are_read_all_is_no_device_and_two_names_of_one_device_are_one(gpus):
    (etc, run), nodes = gpus
    pytest.importorskip("yaml")
    (run / "fpga.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: xilinx.com/fpga\ndevices:\n"
        "- name: f0\n  containerEdits:\n    deviceNodes:\n    - path: /dev/xclmgmt0\n      hostPath: %s\n"
        "- name: %s\n  containerEdits:\n    deviceNodes: [{path: %s}]\n"
        % (nodes / "gpu0", UUID0, nodes / "gpu1"))
    # nvidia-ctk's second name for GPU 0: its UUID, the same device nodes.
    spec = json.loads((etc / "nvidia.json").read_text())
    spec["devices"].append({"name": UUID0, "containerEdits": {"deviceNodes": [{"path": str(nodes / "gpu0")}]}})
    (etc / "nvidia.json").write_text(json.dumps(spec))
    found, common = devices.read_node_devices()
    gpus_found = found["nvidia.com/gpu"]
    assert [d.names for d in gpus_found] == [["0", UUID0], ["1"], ["2"]]
    assert [d.nodes for d in gpus_found] == [[str(nodes / ("gpu%d" % i))] for i in range(3)]
    assert [d.visible_name for d in gpus_found] == [UUID0, "1", "2"]
    assert common == {"nvidia.com/gpu": ["NVIDIA_VISIBLE_DEVICES=void"], "xilinx.com/fpga": []}
    assert [(d.names, d.nodes) for d in found["xilinx.com/fpga"]] == [
        (["f0"], [str(nodes / "gpu0")]), ([UUID0], [str(nodes / "gpu1")])]  # hostPath: the node's


def test_a_device_in_var_run_cdi_replaces_the_one_of_its_name_in_etc_cdi(gpus):
    (etc, run), nodes = gpus
    (run / "override.json").write_text(json.dumps({
        "cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "devices": [{"name": "2", "containerEdits": {"deviceNodes": [{"path": "/dev/other"}]}}]}))
    found, _unused = devices.read_node_devices()
    assert [(d.name, d.nodes) for d in found["nvidia.com/gpu"]][2] == ("2", ["/dev/other"])


@pytest.mark.parametrize("name, text, says", [
    ("bad.json", "{", "bad.json: not valid JSON: "),
    ("bad.json", "[]", "bad.json: not a mapping"),
    ("bad.json", '{"cdiVersion": "0.5.0", "devices": []}',
     "bad.json: kind: must be VENDOR/CLASS, such as nvidia.com/gpu, got None"),
    ("bad.json", '{"kind": "a.com/b", "devices": []}', "bad.json: cdiVersion: must be a string"),
    ("bad.json", '{"cdiVersion": "0.5.0", "kind": "a.com/b", "devices": [{"name": "x y"}]}',
     "bad.json: devices[0].name: must be letters, digits and - _ . :, got 'x y'"),
    ("bad.json", '{"cdiVersion": "0.5.0", "kind": "a.com/b", "devices": [{"name": "x", '
                 '"containerEdits": {"deviceNodes": [{"path": "dev/x"}]}}]}',
     "bad.json: devices[0].containerEdits.deviceNodes[0].path: must be an absolute path, got 'dev/x'"),
    ("bad.json", '{"cdiVersion": "0.5.0", "kind": "a.com/b", "devices": [], '
                 '"containerEdits": {"env": ["novalue"]}}',
     "bad.json: containerEdits.env: must be a list of KEY=VALUE strings"),
    ("bad.yaml", "kind: [", "bad.yaml: not valid YAML: "),
])
def test_a_bad_specification_refuses_a_job_that_asks_for_devices_naming_the_file_and_field(
        gpus, runtime_state, name, text, says):
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    (etc, _unused), _unused = gpus
    (etc / name).write_text(text)
    with pytest.raises(RuntimeFailure) as failure:
        prepare(spec_data())
    assert str(failure.value).startswith("CDI specification %s/%s" % (etc, says)), failure.value
    assert not os.path.exists(registry.job_dir("ja"))
    # Passed over where nothing asks for devices (the bare host's hiding).
    assert len(devices.read_node_devices(strict=False)[0]["nvidia.com/gpu"]) == 3


def test_a_yaml_specification_on_a_node_without_pyyaml_says_what_to_do(gpus, monkeypatch):
    (etc, _unused), _unused = gpus
    (etc / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml: ImportError
    with pytest.raises(RuntimeFailure) as failure:
        devices.read_node_devices()
    assert str(failure.value) == (
        "CDI specification %s/nvidia.yaml is YAML, and this node's Python has no YAML parser: install "
        "python3-yaml, or write the specification as JSON (nvidia-ctk cdi generate --format=json "
        "--output=/etc/cdi/nvidia.json)" % etc)


# -- allocation -------------------------------------------------------------------

def test_each_rank_on_a_node_gets_devices_of_its_own_and_its_environment_names_them(gpus, runtime_state):
    (_unused, _unused), nodes = gpus
    data = spec_data(ranks=(("node-1", 0), ("node-1", 1), ("node-1", 2)), local=True)
    prepare(data)
    assert held("ja") == [["0"], ["1"], ["2"]]
    spec = JobSpec.from_dict(data)
    user = pwd.getpwnam(USER)
    envs = [job_environment(spec, rank, user) for rank in spec.ranks]
    assert [(e["CUDA_VISIBLE_DEVICES"], e["NVIDIA_VISIBLE_DEVICES"], e["FMN_GPU_INDEX"], e["RANK"])
            for e in envs] == [("0", "0", "0", "0"), ("1", "1", "1", "1"), ("2", "2", "2", "2")]


def test_two_jobs_on_one_node_never_get_the_same_device_and_cleanup_frees_them(gpus, runtime_state):
    prepare(spec_data("ja", gpus_each=2))
    prepare(spec_data("jb", gpus_each=1))
    assert (held("ja"), held("jb")) == ([["0", "1"]], [["2"]])
    with pytest.raises(RuntimeFailure) as failure:
        prepare(spec_data("jc", gpus_each=1))
    assert str(failure.value) == (
        "job jc cannot start on node node-1: jobs.jc.resource.devices.nvidia.com/gpu: 1 wanted "
        "(1 for each of 1 rank at once here), but the node has 3 (0 free; the others held by job ja, jb)")
    assert not os.path.exists(registry.job_dir("jc"))
    from multinode_runtime.teardown import cleanup_job
    cleanup_job("ja", 1, pwd.getpwnam(USER))
    prepare(spec_data("jc", gpus_each=2))
    assert held("jc") == [["0", "1"]]


def test_a_node_with_too_few_devices_refuses_the_job_before_anything_of_it_is_written(gpus, runtime_state):
    with pytest.raises(RuntimeFailure) as failure:
        prepare(spec_data(gpus_each=4), node="node-2")
    assert str(failure.value) == (
        "job ja cannot start on node node-2: jobs.ja.resource.devices.nvidia.com/gpu: 4 wanted "
        "(4 for each of 1 rank at once here), but the node has 3")
    assert not os.path.exists(registry.job_dir("ja"))
    assert not os.path.exists(os.path.join(registry.LOG_DIR, "ja"))
    data = spec_data(gpus_each=1, resources={"devices": {"amd.com/gpu": 1}}, service={"ready_timeout": 5})
    with pytest.raises(RuntimeFailure) as failure:
        prepare(data)
    assert str(failure.value) == (
        "job ja cannot start on node node-1: services.ja.resource.devices.amd.com/gpu: 1 wanted "
        "(1 for each of 1 rank at once here), but the node has none (no CDI specification in %s or %s "
        "lists a device of kind amd.com/gpu)" % devices.CDI_DIRS)


def test_a_task_array_gets_a_device_set_for_each_task_running_at_once_and_a_task_takes_a_free_one(
        gpus, runtime_state):
    data = spec_data(ranks=[("node-1", t) for t in range(5)], task_array={"start": 1, "end": 5, "concurrency": 2})
    for index, rank in enumerate(data["ranks"]):
        rank["task_id"] = index + 1
    prepare(data)
    assert held("ja") == [["0"], ["1"]]  # two at once, not five
    spec = JobSpec.from_dict(data)
    assert devices.task_slot("ja", spec.ranks[0]) == 0  # held by this process from now on
    assert devices.task_slot("ja", spec.ranks[0]) == 0

    def slot_in_child(task):
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            try:
                os.write(write, str(devices.task_slot("ja", spec.ranks[task])).encode())
            except RuntimeFailure as exc:
                os.write(write, str(exc).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
        with os.fdopen(read) as answer:
            return answer.read()

    assert slot_in_child(1) == "1"  # ended: its slot is free again
    assert slot_in_child(2) == "1"
    # One more task at once than the array's concurrency lets start: refused.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        registry.write_file(os.path.join(registry.job_path("ja", registry.DEVICE_SLOTS_DIR), "1"),
                            devices._process_mark(holder.pid), 0o600)
        assert slot_in_child(3) == ("task ja-3: all 2 device sets of job ja on node node-1 are in use by its "
                                    "other tasks")
    finally:
        holder.kill()
        holder.wait()


# -- the container, the bare host -------------------------------------------------

def test_the_jobs_container_is_started_with_its_devices_on_that_node(gpus, runtime_state, monkeypatch):
    """A stand-in podman (it records its arguments, and writes this test's
    pid as the container's PID 1 into the --pidfile of its `run`) starts
    the container: its `run` gets every device of the job on the node, by
    CDI name, and no other."""
    calls = runtime_state / "podman-calls"
    podman = runtime_state / "podman"
    podman.write_text('#!/bin/sh\necho "$*" >>%s\ncase "$*" in\n*"{{.Id}}"*) echo sha256:1 ;;\nesac\n'
                      'while [ $# -gt 0 ]; do [ "$1" = --pidfile ] && echo %d >"$2"; shift; done\n'
                      % (calls, os.getpid()))
    podman.chmod(0o755)
    monkeypatch.setattr(containers, "PODMAN", str(podman))
    monkeypatch.setattr(containers, "NSENTER", "/bin/true")
    data = spec_data(gpus_each=1, execution="container", local=True,
                     ranks=(("node-1", 0), ("node-1", 1)), image={"uri": "docker://example.org/cuda:1"})
    prepare(data)
    run = next(line for line in calls.read_text().splitlines() if line.startswith("run "))
    assert " --device nvidia.com/gpu=0 --device nvidia.com/gpu=1 --pull=never example.org/cuda:1 -c " in run
    assert run.count("--device") == 2
    assert devices.podman_arguments("ja") == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert devices.podman_arguments("nosuch") == []


def test_on_the_bare_host_a_run_sees_its_own_devices_and_the_nodes_others_read_as_empty_files(
        gpus, runtime_state):
    (_unused, _unused), nodes = gpus
    prepare(spec_data("ja", gpus_each=1))
    prepare(spec_data("jb", gpus_each=1))
    prepare(spec_data("jn", gpus_each=1, resources={}))  # asks for none: sees none
    looks = {}
    for job in ("ja", "jb", "jn"):
        sandbox = job_sandbox(job)
        done = subprocess.run(
            ["nsenter", "--target", str(sandbox.pid), "--mount", "--pid", "--", "sh", "-c",
             'for d in "$1"/gpu*; do if [ -c "$d" ]; then echo "${d##*/} device"; else echo "${d##*/} hidden"; fi; '
             'done; (echo x >"$1/gpu2") 2>/dev/null || echo gpu2 read-only', "sh", str(nodes)],
            capture_output=True, text=True, timeout=20, check=False)
        looks[job] = done.stdout.split("\n")
    assert looks["ja"][:3] == ["gpu0 device", "gpu1 hidden", "gpu2 hidden"]
    assert looks["jb"][:3] == ["gpu0 hidden", "gpu1 device", "gpu2 hidden"]
    assert looks["jn"][:4] == ["gpu0 hidden", "gpu1 hidden", "gpu2 hidden", "gpu2 read-only"]
    assert all(os.path.exists(nodes / name) and os.stat(nodes / name).st_rdev == os.makedev(1, 3)
               for name in ("gpu0", "gpu1", "gpu2"))  # the host keeps them
