"""What the controller-side tasks fuzzfile and rank_plan do (their modules and
their action plugins share it): messages name the file and what is wrong,
warnings name the file, and a note rank_plan adds is warned about once.
Pure logic, on real files under tmp_path."""

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    load_fuzzfile,
    plan_ranks,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError

TWO_JOBS = """
version: v4
jobs:
  first:
    image: {uri: "docker://alpine"}
    command: [/bin/true]
    multinode: {nodes: 2, implementation: generic}
  second:
    image: {uri: "docker://alpine"}
    command: [/bin/true]
    requires: [first]
"""

NODES = [{"node": "a", "address": "10.0.0.1"}, {"node": "b", "address": "10.0.0.2"}]
PLAN_OPTIONS = dict(user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10,
                    files=None, secret_names=None, local=False)


def load(path, job=None, secret_names=None):
    return load_fuzzfile({"path": str(path), "job": job, "secret_names": secret_names})


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FuzzfileError, match=r"^%s: no such file$" % (tmp_path / "none.yml")):
        load(tmp_path / "none.yml")


def test_a_directory_is_named(tmp_path):
    with pytest.raises(FuzzfileError, match=r": is a directory, not a Fuzzfile$"):
        load(tmp_path)


def test_bytes_that_are_not_utf8_are_named_with_their_offset(tmp_path):
    path = tmp_path / "latin1.yml"
    path.write_bytes(b"version: v4\n# caf\xe9\n")
    with pytest.raises(FuzzfileError, match=r"latin1.yml: not UTF-8 text \(byte 0xe9 at offset 17\)$"):
        load(path)


def test_an_invalid_fuzzfile_fails_naming_the_file_and_the_field(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text(TWO_JOBS.replace("nodes: 2", "nodes: zero"))
    with pytest.raises(FuzzfileError) as raised:
        load(path)
    assert str(raised.value).startswith("%s: " % path)
    assert "jobs.first.multinode.nodes" in str(raised.value)


def test_the_whole_workflow_runs_in_dependency_order_and_one_job_on_request(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    whole, _ = load(path)
    assert [job["name"] for job in whole["run"]] == ["first", "second"]
    assert "job" not in whole  # no single job: the workflow has two
    one, _ = load(path, job="second")
    assert [job["name"] for job in one["run"]] == ["second"]
    assert one["job"]["name"] == "second"


def test_warnings_name_the_file(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    _, warnings = load(path)
    assert warnings, "an image uri is always noted (images are not pulled)"
    assert all(warning.startswith("%s: " % path) for warning in warnings)


def test_a_secret_without_a_value_is_refused_before_any_host_is_touched(tmp_path):
    path = tmp_path / "secret.yml"
    path.write_text(TWO_JOBS.replace("command: [/bin/true]\n    multinode",
                                     "command: [/bin/true]\n    env: [TOKEN=secret://user/token]\n    multinode", 1))
    with pytest.raises(FuzzfileError, match="secret://user/token"):
        load(path, secret_names=[])
    load(path, secret_names=["user/token"])  # with a value it loads


def test_rank_plan_warns_only_about_notes_the_fuzzfile_task_did_not(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    loaded, _ = load(path, job="first")
    planned, warnings = plan_ranks(dict(PLAN_OPTIONS, job=loaded["job"], nodes=NODES))
    assert [rank["name"] for rank in planned["spec"]["ranks"]] == ["first-0", "first-1"]
    assert not set(warnings) & set(loaded["job"]["unsupported"])


def test_rank_plan_refuses_too_few_nodes_naming_the_job(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    loaded, _ = load(path, job="first")
    with pytest.raises(FuzzfileError, match="first"):
        plan_ranks(dict(PLAN_OPTIONS, job=loaded["job"], nodes=NODES[:1]))


WITH_TASK_ARRAY = TWO_JOBS + """  sweep:
    image: {uri: "docker://alpine"}
    command: [/bin/true]
    task-array: {start: 1, end: 3}
"""


def test_each_task_reads_and_admits_a_job_once(tmp_path, monkeypatch):
    """The fuzzfile task admits each job of the run once (run policy:
    rank names, implementation, secrets); rank_plan reads the job's JSON
    form once and admits it once, a task array's too."""
    from ansible_collections.fuzz.multinode.plugins.module_utils import controller_tasks, job_spec

    calls = []

    def counted(name, real):
        def wrapper(job, *args):
            calls.append((name, job["name"] if isinstance(job, dict) else job.name))
            return real(job, *args)
        return wrapper

    monkeypatch.setattr(controller_tasks, "admit", counted("admit", controller_tasks.admit))
    monkeypatch.setattr(job_spec, "admit", counted("admit", job_spec.admit))
    monkeypatch.setattr(job_spec, "load_job", counted("load", job_spec.load_job))
    path = tmp_path / "three.yml"
    path.write_text(WITH_TASK_ARRAY)
    loaded, _ = load(path, secret_names=[])
    assert calls == [("admit", "first"), ("admit", "second"), ("admit", "sweep")]
    for job, nodes in zip(loaded["run"], (NODES, NODES[:1], NODES), strict=True):
        del calls[:]
        plan_ranks(dict(PLAN_OPTIONS, job=job, nodes=nodes, secret_names=[]))
        assert calls == [("load", job["name"]), ("admit", job["name"])]
