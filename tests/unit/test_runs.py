"""Runs are isolated on every node: a job is claimed by one run of the
playbook at a time (the node runtime's claims.py), a second run of a job
that is still alive is refused before anything of it is written, and every
later step names its run and leaves another run's job alone. The same on
real clusters: molecule/failure and the local tier."""

import json
import os
import pwd
import time

import pytest
from multinode_runtime import claims, cli, rank_call, registry, teardown
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.inputs import rank_environment
from multinode_runtime.prepare import prepare_job
from multinode_runtime.spec import CLAIM_LEASE, JobSpec
from multinode_runtime.supervisor import Supervisor

USER = pwd.getpwuid(os.getuid()).pw_name
FIRST, SECOND = "20261201T165012Z-a1b2c3", "20261201T165015Z-d4e5f6"


@pytest.fixture
def node(runtime_state):
    """The runtime's state, logs and /etc/hosts in a temporary directory."""
    return runtime_state


def spec_data(run, job="ja"):
    return {"job": job, "run": run, "user": USER, "argv": ["true"], "kill_grace": 1,
            "ranks": [{"rank": 0, "name": job + "-0", "node": "node-1", "address": "10.0.0.1",
                       "env": {"RANK": "0"}},
                      {"rank": 1, "name": job + "-1", "node": "node-2", "address": "10.0.0.2",
                       "env": {"RANK": "1"}}]}


def prepare(run, job="ja", node_name="node-1"):
    data = spec_data(run, job)
    return prepare_job(data, JobSpec.from_dict(data), node_name)


def age_claim(job, seconds):
    path = registry.job_path(job, registry.RUN_FILE)
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_prepare_claims_the_job_for_its_run(node):
    assert prepare(FIRST)["run"] == FIRST
    assert claims.held_run("ja") == FIRST
    assert claims.held_run("other") is None


def test_every_rank_sees_the_run_as_FB_WORKFLOW_ID():
    spec = JobSpec.from_dict(dict(spec_data(FIRST), ranks=[
        {"rank": 0, "name": "ja-0", "node": "n", "env": {"FB_WORKFLOW_ID": "the job's own"}},
        {"rank": 1, "name": "ja-1", "node": "n", "env": {}}]))
    user = pwd.getpwuid(os.getuid())
    assert [rank_environment(spec, rank, user)["FB_WORKFLOW_ID"] for rank in spec.ranks] == [FIRST, FIRST]
    assert "FB_WORKFLOW_ID" not in rank_environment(JobSpec.from_dict(spec_data("")), spec.ranks[1], user)


def test_a_second_run_of_a_live_job_is_refused_before_anything_is_written(node):
    prepare(FIRST)
    written = {name: os.stat(registry.job_path("ja", name)).st_mtime_ns
               for name in os.listdir(registry.job_dir("ja"))}
    hosts = (node / "hosts").read_text()
    with pytest.raises(RuntimeFailure) as info:
        prepare(SECOND)
    assert str(info.value) == (
        "job ja is already running on node-1 as run %s; run %s does not start it again "
        "(wait for that run to end)" % (FIRST, SECOND))
    assert claims.held_run("ja") == FIRST
    assert {name: os.stat(registry.job_path("ja", name)).st_mtime_ns
            for name in os.listdir(registry.job_dir("ja"))} == written
    assert (node / "hosts").read_text() == hosts


def test_a_claim_is_live_while_a_process_of_the_job_runs_here_however_old(node, monkeypatch):
    """A long job's idle workers: the head's lifeline (a `hold` process in a
    recorded namespace) keeps the claim live."""
    prepare(FIRST)
    age_claim("ja", CLAIM_LEASE + 3600)
    monkeypatch.setattr(claims, "recorded_namespaces", lambda job: {4026531838})
    monkeypatch.setattr(claims, "pids_in_namespaces", lambda namespaces, exclude, user: [12345])
    with pytest.raises(RuntimeFailure, match="is already running on node-2 as run " + FIRST):
        prepare(SECOND, node_name="node-2")


def test_a_claim_with_nothing_alive_is_stale_after_the_lease_and_is_taken_over(node):
    prepare(FIRST)
    age_claim("ja", CLAIM_LEASE - 5)
    with pytest.raises(RuntimeFailure):
        prepare(SECOND)  # still within the lease: the first run may be starting its head
    age_claim("ja", CLAIM_LEASE + 1)
    prepare(SECOND)
    assert claims.held_run("ja") == SECOND


def test_a_spec_without_a_claim_lease_has_the_default_and_one_given_is_kept():
    assert JobSpec.from_dict(spec_data(FIRST)).claim_lease == CLAIM_LEASE == 120
    assert JobSpec.from_dict(dict(spec_data(FIRST), claim_lease=15)).claim_lease == 15


@pytest.mark.parametrize("lease", [0, -15, True, "15", 1.5, [15]])
def test_a_claim_lease_that_is_not_a_positive_integer_is_refused_naming_it(lease):
    with pytest.raises(RuntimeFailure) as info:
        JobSpec.from_dict(dict(spec_data(FIRST), claim_lease=lease))
    assert str(info.value) == (
        "malformed job spec (claim_lease, the role variable fuzz_multinode_claim_lease: "
        "must be a positive integer of seconds, got %r)" % (lease,))


def prepare_with_lease(run, lease, node_name="node-1"):
    data = dict(spec_data(run), claim_lease=lease)
    return prepare_job(data, JobSpec.from_dict(data), node_name)


def test_the_claiming_runs_lease_decides_when_its_claim_is_stale(node):
    """The lease is written with the claim: a later run with another lease
    goes by the first run's, shorter or longer than its own."""
    prepare_with_lease(FIRST, 15)
    assert claims.claim_lease("ja") == 15
    age_claim("ja", 10)
    with pytest.raises(RuntimeFailure, match="is already running on node-1 as run " + FIRST):
        prepare_with_lease(SECOND, 5)  # past its own lease, not past the first run's
    age_claim("ja", 16)
    prepare_with_lease(SECOND, 600)  # within its own lease, past the first run's
    assert (claims.held_run("ja"), claims.claim_lease("ja")) == (SECOND, 600)
    age_claim("ja", 599)
    with pytest.raises(RuntimeFailure, match="as run " + SECOND):
        prepare_with_lease(FIRST, 15)


def test_a_claim_without_a_lease_has_the_default(node):
    """As an older install wrote it: the run id alone."""
    prepare_with_lease(FIRST, 15)
    registry.write_file(registry.job_path("ja", registry.RUN_FILE), FIRST + "\n", 0o644)
    assert (claims.held_run("ja"), claims.claim_lease("ja")) == (FIRST, CLAIM_LEASE)
    age_claim("ja", CLAIM_LEASE - 5)
    with pytest.raises(RuntimeFailure):
        prepare_with_lease(SECOND, 15)
    age_claim("ja", CLAIM_LEASE + 1)
    prepare_with_lease(SECOND, 15)
    assert claims.held_run("ja") == SECOND


def test_the_same_run_prepares_again_and_a_registration_without_a_run_is_taken_over(node):
    prepare(FIRST)
    prepare(FIRST)
    assert claims.held_run("ja") == FIRST
    os.unlink(registry.job_path("ja", registry.RUN_FILE))  # as an older install left it
    assert claims.held_run("ja") == ""
    old = time.time() - CLAIM_LEASE - 1
    os.utime(registry.job_dir("ja"), (old, old))
    prepare(SECOND)
    assert claims.held_run("ja") == SECOND


def test_cleanup_of_another_run_leaves_the_job_and_its_host_names_alone(node, capsys):
    prepare(FIRST)
    hosts = (node / "hosts").read_text()
    assert "ja-1" in hosts
    assert teardown.cleanup("ja", everywhere=False, run=SECOND) == {
        "changed": False, "job": "ja", "killed": 0, "held_by": FIRST}
    assert claims.held_run("ja") == FIRST and (node / "hosts").read_text() == hosts
    cli.cmd_cleanup(["ja", "--run", FIRST])
    assert json.loads(capsys.readouterr().out)["job"] == "ja"
    assert claims.held_run("ja") is None and "ja-1" not in (node / "hosts").read_text()


def test_cleanup_by_hand_without_a_run_removes_any_run(node):
    prepare(FIRST)
    teardown.cleanup("ja", everywhere=False)
    assert claims.held_run("ja") is None


def run_volumes(root):
    """Two runs' ephemeral volumes and a persistent one, each with a file."""
    for path in (root / "ephemeral" / FIRST / "scratch", root / "ephemeral" / SECOND / "scratch",
                 root / "persistent" / "keep"):
        path.mkdir(parents=True)
        (path / "file").write_text("kept?\n")


def test_cleanup_with_run_volumes_removes_its_runs_ephemeral_volumes_only(node, capsys):
    """An interrupted play's cleanup when the run ends with the job: that
    run's ephemeral volumes go, where the job's spec places them; another
    run's and the persistent ones stay. Without the flag, and for a job
    another run holds, none go."""
    root = node / "volumes"
    data = dict(spec_data(FIRST), volume_root=str(root))
    prepare_job(data, JobSpec.from_dict(data), "node-1")
    run_volumes(root)
    teardown.cleanup("ja", everywhere=False, run=SECOND, run_volumes=True)  # held by FIRST: left alone
    cli.cmd_cleanup(["ja", "--run", FIRST])
    assert sorted(os.listdir(root / "ephemeral")) == [FIRST, SECOND]
    prepare_job(data, JobSpec.from_dict(data), "node-1")
    capsys.readouterr()
    cli.cmd_cleanup(["ja", "--run", FIRST, "--run-volumes"])
    assert json.loads(capsys.readouterr().out)["job"] == "ja"
    assert claims.held_run("ja") is None
    assert os.listdir(root / "ephemeral") == [SECOND]
    assert (root / "ephemeral" / SECOND / "scratch" / "file").exists()
    assert (root / "persistent" / "keep" / "file").exists()


@pytest.mark.parametrize("asked", [True, False])
def test_a_worker_asked_to_clean_up_with_run_volumes_removes_its_runs_ephemeral_volumes(node, asked):
    """A worker's part of the head's `cleanup --everywhere --run-volumes`:
    the cleanup request from the head, with `run_volumes`."""
    root = node / "volumes"
    data = dict(spec_data(FIRST), volume_root=str(root))
    prepare_job(data, JobSpec.from_dict(data), "node-2")
    run_volumes(root)
    teardown.stop_on_request(JobSpec.from_dict(data), "node-2", unregister=True, run_volumes=asked)
    assert claims.held_run("ja") is None
    assert sorted(os.listdir(root / "ephemeral")) == ([SECOND] if asked else [FIRST, SECOND])


def test_secrets_of_another_run_are_refused(node, monkeypatch):
    prepare(FIRST)
    with pytest.raises(RuntimeFailure) as info:
        cli.cmd_secrets(["ja", "--run", SECOND])
    assert str(info.value) == "secrets: job ja on this node belongs to run %s, not to run %s" % (FIRST, SECOND)


def test_the_launch_server_refuses_a_request_of_another_run():
    spec = JobSpec.from_dict(spec_data(FIRST))
    rank_call.check_request_run(spec, {"job": "ja", "run": FIRST}, "node-2")
    with pytest.raises(RuntimeFailure) as info:
        rank_call.check_request_run(spec, {"job": "ja", "run": SECOND}, "node-2")
    assert str(info.value) == "job ja on node node-2 belongs to run %s, not to run %s" % (FIRST, SECOND)
    with pytest.raises(RuntimeFailure, match="not to run [(]no id[)]"):
        rank_call.check_request_run(spec, {"job": "ja", "run": ""}, "node-2")


def test_a_call_that_lost_its_connection_while_the_job_ran_fails_the_job(node):
    prepare(FIRST)
    supervisor = Supervisor(JobSpec.from_dict(spec_data(FIRST)))
    supervisor.teardown_at = 100.0
    supervisor.remote_calls = [{"rank": 1, "start": 10.0, "end": 150.0, "status": 255,
                                "lost": "lost connection to rank 1 (ja-1 on node-2): at the teardown"}]
    assert supervisor.lost_call() is None  # cut by the teardown itself
    supervisor.remote_calls.append({"rank": 1, "start": 10.0, "end": 20.0, "status": 255,
                                    "lost": "lost connection to rank 1 (ja-1 on node-2): ssh exited with status 255"})
    assert supervisor.lost_call() == (
        "job ja lost connection to rank 1 (ja-1 on node-2): ssh exited with status 255")
