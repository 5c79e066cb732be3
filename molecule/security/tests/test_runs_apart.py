"""Verifier of the security scenario, runs cannot see or touch each other
(issue 12; docs/docsite/rst/guide_security.rst "Runs and each other"): while one run holds a
job on two nodes (runs-held.yml), another run's job (the attacker's script,
runs-peeper.yml), given the held job's pids and run id, tries to signal its
processes, read their environment, read the cluster key, and have a node
run a command in the held job through its own run's ssh connection. None
of it works, and the held job finishes untouched."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "security"
NODES = ["fmn-security-node-1", "fmn-security-node-2"]
JOB_USER = "fuzz"


def on(node, script, timeout=60):
    return subprocess.run(["docker", "exec", node, "sh", "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    for node in NODES:
        on(node, "rm -f /tmp/fmn-runs-*")
    logs = tmp_path_factory.mktemp("logs")
    argv, env = user_playbook.playbook(FUZZFILES / "runs-held.yml", logs)
    out_path = logs / "held.out"
    with open(out_path, "w") as out:
        held = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    seen = {}
    try:
        deadline = time.monotonic() + 240
        while any(on(node, "test -e /tmp/fmn-runs-ready-%d" % rank).returncode for rank, node in enumerate(NODES)):
            if held.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the held job did not start:\n%s" % out_path.read_text()[-6000:])
            time.sleep(0.5)
        run = node_runtime.show(NODES[0], "runs-held")["run"]
        for node in NODES:  # every process of the job user there now is the held job's
            pids = on(node, "ps -e -o user=,pid= | awk '$1 == \"%s\" { print $2 }'" % JOB_USER).stdout.split()
            assert pids, node
            on(node, "echo %s > /tmp/fmn-runs-held-pids; echo %s > /tmp/fmn-runs-held-run" % (" ".join(pids), run))
        rc, output, _unused = user_playbook.run_job(FUZZFILES / "runs-peeper.yml", logs)
        seen["peeper"] = {"rc": rc, "output": output, "log": (logs / "runs-peeper.log").read_text()
                          if (logs / "runs-peeper.log").exists() else ""}
        seen["intruded"] = [node for node in NODES if on(node, "test -e /tmp/fmn-runs-intruded").returncode == 0]
        for node in NODES:
            on(node, ": > /tmp/fmn-runs-stop")
        held.wait(timeout=240)
        seen["held"] = {"rc": held.returncode, "output": out_path.read_text(),
                        "log": (logs / "runs-held.log").read_text() if (logs / "runs-held.log").exists() else ""}
        yield seen
    finally:
        if held.poll() is None:
            os.killpg(held.pid, 9)
            held.wait()
        for node in NODES:
            on(node, "rm -f /tmp/fmn-runs-*")


def test_another_run_can_neither_signal_nor_read_the_held_jobs_processes(attack):
    peeper = attack["peeper"]
    assert peeper["rc"] == 0, peeper["output"][-6000:]
    lines = peeper["log"].splitlines()
    assert not [line for line in lines if "signalled" in line or "readable" in line or "environment" in line], lines


def test_another_run_reads_no_cluster_key_and_sees_only_its_own_job(attack):
    lines = attack["peeper"]["log"].splitlines()
    for rank in (0, 1):
        assert "rank %d: cluster key 0 bytes" % rank in lines, lines
        assert "rank %d: jobs runs-peeper " % rank in lines, lines


def test_a_node_runs_nothing_in_the_held_job_for_another_runs_request(attack):
    """The request goes through the attacker run's own connection to node
    2 (root's forced command behind it), naming the held job and its run:
    refused, as it does not carry the held run's token."""
    log = attack["peeper"]["log"]
    assert "job runs-held on node fmn-security-node-2: the request does not come from its run" in log, log
    assert attack["intruded"] == []


def test_the_held_job_finishes_untouched(attack):
    held = attack["held"]
    assert held["rc"] == 0, held["output"][-6000:]
    assert sorted(line for line in held["log"].splitlines() if "released" in line) == [
        "runs-held rank 0 released", "runs-held rank 1 released"], held["log"]
