"""What the controller-side tasks fuzzfile and rank_plan do (their modules and
their action plugins share it): messages name the file and what is wrong,
warnings name the file, and a note rank_plan adds is warned about once.
Pure logic, on real files under tmp_path."""

import json

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
    whole, _unused = load(path)
    assert [job["name"] for job in whole["run"]] == ["first", "second"]
    assert "job" not in whole  # no single job: the workflow has two
    one, _unused = load(path, job="second")
    assert [job["name"] for job in one["run"]] == ["second"]
    assert one["job"]["name"] == "second"


def test_warnings_name_the_file(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    _unused, warnings = load(path)
    assert warnings, "an image uri is always noted (images are not pulled)"
    assert all(warning.startswith("%s: " % path) for warning in warnings)


def test_a_secret_without_a_value_is_refused_before_any_host_is_touched(tmp_path):
    path = tmp_path / "secret.yml"
    path.write_text(TWO_JOBS.replace("command: [/bin/true]\n    multinode",
                                     "command: [/bin/true]\n    env: [TOKEN=secret://user/token]\n    multinode", 1))
    with pytest.raises(FuzzfileError, match="secret://user/token"):
        load(path, secret_names=[])
    load(path, secret_names=["user/token"])  # with a value it loads


def test_every_job_too_big_for_the_inventory_is_named_with_both_numbers(tmp_path):
    path = tmp_path / "big.yml"
    path.write_text(TWO_JOBS.replace("requires: [first]",
                                     "requires: [first]\n    multinode: {nodes: 3, implementation: generic}"))
    with pytest.raises(FuzzfileError) as raised:
        load_fuzzfile({"path": str(path), "inventory_hosts": 1})
    assert str(raised.value) == ("job first needs 2 nodes but the inventory group multinode has 1 hosts; "
                                 "job second needs 3 nodes but the inventory group multinode has 1 hosts")
    with pytest.raises(FuzzfileError, match="^job second needs 3 nodes but the inventory group multinode has 2 hosts$"):
        load_fuzzfile({"path": str(path), "inventory_hosts": 2})
    assert load_fuzzfile({"path": str(path), "inventory_hosts": 3})[0]["run"]
    assert load_fuzzfile({"path": str(path)})[0]["run"], "local mode: no limit"


def test_rank_plan_warns_only_about_notes_the_fuzzfile_task_did_not(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    loaded, _unused = load(path, job="first")
    planned, warnings = plan_ranks(dict(PLAN_OPTIONS, job=loaded["job"], nodes=NODES))
    assert [rank["name"] for rank in planned["spec"]["ranks"]] == ["first-0", "first-1"]
    assert not set(warnings) & set(loaded["job"]["unsupported"])


def test_rank_plan_refuses_too_few_nodes_naming_the_job(tmp_path):
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    loaded, _unused = load(path, job="first")
    with pytest.raises(FuzzfileError, match="first"):
        plan_ranks(dict(PLAN_OPTIONS, job=loaded["job"], nodes=NODES[:1]))


WITH_TASK_ARRAY = TWO_JOBS + """  sweep:
    image: {uri: "docker://alpine"}
    command: [/bin/true]
    task-array: {start: 1, end: 3}
"""


def test_the_gates_run_once_per_job_and_run(tmp_path, monkeypatch):
    """The fuzzfile task admits each job of the run once (run policy: rank
    names, implementation, secrets); rank_plan reads the job's JSON form
    once and takes its admission from it, without running a gate again, a
    task array's too."""
    from ansible_collections.fuzz.multinode.plugins.module_utils import job_spec
    from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile import policy

    calls = []

    def counted(name, real):
        def wrapper(job, *args):
            calls.append((name, job["name"] if isinstance(job, dict) else job.name))
            return real(job, *args)
        return wrapper

    for gate in ("check_rank_names", "require_runnable", "check_secrets"):
        monkeypatch.setattr(policy, gate, counted(gate, getattr(policy, gate)))
    monkeypatch.setattr(job_spec, "load_job", counted("load", job_spec.load_job))
    path = tmp_path / "three.yml"
    path.write_text(WITH_TASK_ARRAY)
    loaded, _unused = load(path, secret_names=[])
    for job in json.loads(json.dumps(loaded["run"])):  # as the play passes it on
        plan_ranks(dict(PLAN_OPTIONS, job=job, nodes=NODES if job["nodes"] == 2 or job["task_array"]
                        else NODES[:1], secret_names=[]))
    for name in ("first", "second", "sweep"):
        assert sorted(call for call in calls if call[1] == name) == sorted([
            ("check_rank_names", name), ("require_runnable", name), ("check_secrets", name),
            ("load", name)])


def test_rank_plan_admits_a_job_the_fuzzfile_task_did_not(tmp_path):
    """A job built or changed by hand after its admission is admitted by
    rank_plan, with the same messages."""
    path = tmp_path / "two.yml"
    path.write_text(TWO_JOBS)
    loaded, _unused = load(path, job="first", secret_names=[])
    changed = dict(loaded["run"][0], name="x" * 62)  # rank host names now too long
    with pytest.raises(FuzzfileError, match="rank host name 'x{62}-1' is longer than 63 characters"):
        plan_ranks(dict(PLAN_OPTIONS, job=changed, nodes=NODES))
    by_hand = dict(loaded["job"])  # the plain form: no admission
    by_hand["implementation"] = "gasnet"
    with pytest.raises(FuzzfileError, match="'gasnet' is not supported"):
        plan_ranks(dict(PLAN_OPTIONS, job=by_hand, nodes=NODES))
    forged = dict(by_hand, admitted=loaded["run"][0]["admitted"])  # another job's admission
    with pytest.raises(FuzzfileError, match="'gasnet' is not supported"):
        plan_ranks(dict(PLAN_OPTIONS, job=forged, nodes=NODES))


def test_rank_plan_checks_secrets_the_admission_did_not(tmp_path):
    """Admitted without secret names, or with a name rank_plan does not
    have: rank_plan checks the references, with check_secrets' message."""
    path = tmp_path / "secret.yml"
    path.write_text(TWO_JOBS.replace("command: [/bin/true]\n    multinode",
                                     "command: [/bin/true]\n    env: [TOKEN=secret://user/token]\n    multinode", 1))
    for admitted_with in (None, ["user/token"]):
        loaded, _unused = load(path, job="first", secret_names=admitted_with)
        with pytest.raises(FuzzfileError, match=r"jobs.first.env.TOKEN: secret://user/token is not defined"):
            plan_ranks(dict(PLAN_OPTIONS, job=loaded["run"][0], nodes=NODES, secret_names=["other"]))
        plan_ranks(dict(PLAN_OPTIONS, job=loaded["run"][0], nodes=NODES, secret_names=["user/token"]))
