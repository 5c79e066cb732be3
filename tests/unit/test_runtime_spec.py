"""The runtime's job spec records (multinode_runtime.spec): what a spec.json
becomes on the node, and what every runtime call pays to read it."""

import os
import subprocess
import sys

import pytest
from multinode_runtime import spec
from multinode_runtime.errors import RuntimeFailure

RUNTIME_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "files", "multinode-runtime")


def test_defaults_are_the_documented_ones_and_new_for_each_record():
    first, second = spec.JobSpec("a"), spec.JobSpec(job="b")
    assert (first.user, first.mode, first.cwd, first.execution, first.kill_grace, first.claim_lease) == (
        "fuzz", "command", "/", "host", spec.KILL_GRACE, spec.CLAIM_LEASE)
    assert first.resources == spec.Resources()
    first.argv.append("x")
    first.image["uri"] = "docker://x"
    assert second.argv == [] and second.image == {}


def test_positional_and_keyword_values():
    assert spec.TaskArray(1, 10, 3) == spec.TaskArray(start=1, end=10, concurrency=3)
    assert spec.TaskArray(1, 10).concurrency == 1
    assert spec.Mount("/data", "v", "ephemeral").store == "ephemeral"


@pytest.mark.parametrize("make", [
    lambda: spec.TaskArray(1),                      # end is required
    lambda: spec.TaskArray(1, 2, 3, 4),             # one too many
    lambda: spec.TaskArray(1, 2, start=1),          # start twice
    lambda: spec.TaskArray(1, 2, width=3),          # no such field
])
def test_wrong_values_are_refused(make):
    with pytest.raises(TypeError):
        make()


def test_records_are_frozen_and_changed_only_into_copies():
    rank = spec.Rank(0, name="solve-0", node="n1")
    with pytest.raises(AttributeError):
        rank.name = "other"
    with pytest.raises(AttributeError):
        del rank.node
    moved = rank.with_changes(node="n2")
    assert (moved.node, moved.name, rank.node) == ("n2", "solve-0", "n1")
    assert isinstance(moved, spec.Rank)


def test_equal_by_type_and_values():
    assert spec.TaskArray(1, 2) == spec.TaskArray(1, 2)
    assert spec.TaskArray(1, 2) != spec.TaskArray(1, 3)
    assert spec.SecretArg(1, [("text", "a")]) != spec.JobFile(1, [("text", "a")])
    assert hash(spec.TaskArray(1, 2)) == hash(spec.TaskArray(1, 2))
    assert len({spec.TaskArray(1, 2), spec.TaskArray(1, 2)}) == 1
    assert repr(spec.TaskArray(1, 2)) == "TaskArray(start=1, end=2, concurrency=1)"


def test_from_dict_builds_nested_records_and_leaves_unknown_keys():
    job = spec.parse_spec({
        "job": "solve", "cwd": "", "future_field": 1, "timeout": None,
        "ranks": [{"rank": 0, "name": "solve-0", "node": "n1", "later": True,
                   "secret_args": [{"index": 1, "parts": [["secret", "user/token"]]}]}],
        "resources": {"cores": 2, "devices": {"nvidia.com/gpu": 1}, "later": 1},
        "files": [{"path": "/f", "contents": "x"}],
        "mounts": [{"location": "/data", "volume": "v", "store": "ephemeral"}],
        "task_array": {"start": 1, "end": 4},
        "extra_hosts": [["db.svc", "10.0.0.5"]],
    })
    assert job.cwd == "/" and job.timeout is None
    assert job.head == spec.Rank(0, name="solve-0", node="n1",
                                 secret_args=[spec.SecretArg(1, [("secret", "user/token")])])
    assert job.resources == spec.Resources(cores=2, devices={"nvidia.com/gpu": 1})
    assert job.files == [spec.JobFile("/f", "x")]
    assert job.mounts == [spec.Mount("/data", "v", "ephemeral")]
    assert job.task_array == spec.TaskArray(1, 4)
    assert job.extra_hosts == [("db.svc", "10.0.0.5")]
    assert job.secret_names() == {"user/token"}


@pytest.mark.parametrize("data, named", [
    ({}, "'job'"),
    ({"job": "a", "ranks": [{"name": "a-0"}]}, "'rank'"),
    ({"job": "a", "task_array": {"start": 1}}, "'end'"),
    ({"job": "a", "resources": {"devices": {"gpu": 1}}}, "resources.devices"),
    ({"job": "a", "claim_lease": 0}, "claim_lease"),
])
def test_malformed_specs_are_runtime_failures_naming_the_field(data, named):
    with pytest.raises(RuntimeFailure, match="malformed job spec") as caught:
        spec.parse_spec(data)
    assert named in str(caught.value)


def test_reading_a_spec_imports_no_dataclasses_typing_or_inspect():
    """Each runtime call reads a spec: those imports alone cost it several
    milliseconds of its start."""
    program = ("import sys, json\n"
               "from multinode_runtime import spec\n"
               "spec.parse_spec({'job': 'a', 'ranks': [{'rank': 0}]})\n"
               "print(json.dumps(sorted(m for m in ('dataclasses', 'typing', 'inspect') if m in sys.modules)))\n")
    done = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n" % RUNTIME_DIR + program],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
