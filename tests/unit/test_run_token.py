"""The run's token (run_token.py): derived alike on every node of a run
from the cluster key, kept for the job, carried by requests over ssh and
checked by the forced command."""

import os

import pytest
from multinode_runtime import registry, run_token
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.spec import JobSpec


def spec(job="j", run="r1", local=False):
    return JobSpec.from_dict({"job": job, "run": run, "local": local,
                              "ranks": [{"rank": 0, "name": job + "-0", "node": "n1"}]})


@pytest.fixture
def node(runtime_state, monkeypatch):
    key = runtime_state / "cluster_ed25519"
    key.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nfmn\n")
    monkeypatch.setattr(registry, "CLUSTER_KEY", str(key))
    for job in ("j", "k"):
        os.makedirs(registry.job_dir(job))
    return key


def test_every_node_derives_the_same_token_for_a_run_and_another_for_another_run(node):
    run_token.make(spec(), os.getgid())
    first = run_token.read("j")
    assert len(first) == 64
    run_token.make(spec(), os.getgid())  # another node of the run: the same key, job and run
    assert run_token.read("j") == first
    run_token.make(spec(run="r2"), os.getgid())
    assert run_token.read("j") != first
    run_token.make(spec("k"), os.getgid())
    assert run_token.read("k") not in (first, run_token.read("j"))
    info = os.stat(registry.job_path("j", run_token.TOKEN_FILE))
    assert info.st_mode & 0o777 == 0o640 and info.st_uid == 0


def test_a_request_over_ssh_is_served_only_with_its_runs_token(node):
    run_token.make(spec(), os.getgid())
    request = run_token.with_token("j", {"job": "j", "run": "r1", "hold": True})
    run_token.check(spec(), request, "n1")
    for forged in ({"job": "j", "run": "r1", "hold": True},
                   dict(request, token="0" * 64),
                   dict(request, token=run_token.read("j").upper()),
                   dict(request, token=None)):
        with pytest.raises(RuntimeFailure) as info:
            run_token.check(spec(), forged, "n1")
        assert str(info.value) == "job j on node n1: the request does not come from its run r1"


def test_local_mode_has_no_token_and_no_key_is_needed(runtime_state):
    os.makedirs(registry.job_dir("j"))
    run_token.make(spec(local=True), os.getgid())
    assert run_token.read("j") is None
    run_token.check(spec(local=True), {"job": "j"}, "localhost")
    assert run_token.with_token("j", {"job": "j"}) == {"job": "j"}


def test_a_node_without_the_cluster_key_refuses_the_registration_saying_so(runtime_state, monkeypatch):
    monkeypatch.setattr(registry, "CLUSTER_KEY", str(runtime_state / "none"))
    os.makedirs(registry.job_dir("j"))
    with pytest.raises(RuntimeFailure) as info:
        run_token.make(spec(), os.getgid())
    assert str(info.value).startswith("cannot read the cluster key %s: " % (runtime_state / "none"))
