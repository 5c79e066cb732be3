"""Verifier of the security scenario, no survivors (issue 12, hole 1;
docs/docsite/rst/guide_security.rst): each test runs an attacker's job script
(tests/fuzzfiles/security/survivor-*.yml) through run-job.yml exactly as a
user runs it, on a real 3-node container cluster, then looks at every node
as root the moment the playbook returns: no process of the job user is
left, what the attack's processes write has stopped, and the next job's
ranks see none of them."""

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
NODES = ["fmn-security-node-1", "fmn-security-node-2", "fmn-security-node-3"]
JOB_USER = "fuzz"
# What the attacks' processes write, a line at each hop or turn.
TRACES = {"survivor-hopper": "/tmp/fmn-survivor-hopper",
          "survivor-nested": "/tmp/fmn-survivor-nested"}


def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, check=False)


def job_user_processes(node):
    """Every process of the job user on a node, zombies and processes in
    nested PID namespaces included (ps as root sees them all)."""
    done = docker("exec", node, "sh", "-c", "ps -e -o user=,pid=,stat=,args= | awk '$1 == \"%s\"'" % JOB_USER)
    if done.returncode != 0:
        return ["(cannot look: %s)" % done.stderr.strip()]
    return [line for line in done.stdout.splitlines() if line.strip()]


def trace_size(node, path):
    done = docker("exec", node, "sh", "-c", "wc -c <%s 2>/dev/null || echo 0" % path)
    return int(done.stdout.strip() or 0)


def run_job(fuzzfile, logs, extra_vars=None):
    rc, output, seconds = user_playbook.run_job(FUZZFILES / fuzzfile, logs, None, extra_vars)
    leftovers = {node: job_user_processes(node) for node in NODES}
    return user_playbook.JobRun(Path(fuzzfile).stem, logs, rc, output, seconds, leftovers)


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    """Runs each attacker's Fuzzfile once, for the tests that look at it."""
    for node in NODES:
        docker("exec", node, "rm", "-f", *TRACES.values())
    runs = {}

    def get(fuzzfile):
        if fuzzfile not in runs:
            runs[fuzzfile] = run_job(fuzzfile, tmp_path_factory.mktemp("logs"),
                                     {"fuzz_multinode_kill_grace": 1})
        return runs[fuzzfile]
    yield get
    for node in NODES:
        # Survivors (the hole reopened) must not spoil the tests after
        # these: a process that forks on is stopped only by a kill of all
        # the job user's processes at once.
        for _unused in range(3):
            docker("exec", node, "su", JOB_USER, "-s", "/bin/sh", "-c", "kill -9 -1")
        for job in runs:
            docker("exec", node, *node_runtime.runtime_argv("cleanup", Path(job).stem), timeout=120)


NO_PROCESSES = {node: [] for node in NODES}
SURVIVORS = pytest.mark.parametrize("fuzzfile", ["survivor-hopper.yml", "survivor-nested.yml"],
                                    ids=["pid-hopper", "nested-pid-namespace"])


@SURVIVORS
def test_the_attack_ran(attack, fuzzfile):
    run = attack(fuzzfile)
    assert run.rc == 0, run
    job = Path(fuzzfile).stem
    for node in NODES[:2]:
        assert trace_size(node, TRACES[job]) > 0, (node, run)


@SURVIVORS
def test_no_process_of_the_job_is_left_on_any_node(attack, fuzzfile):
    run = attack(fuzzfile)
    assert run.leftovers == NO_PROCESSES, run


@SURVIVORS
def test_nothing_of_the_job_runs_on(attack, fuzzfile):
    """What its processes write stops growing on every node: nothing of the
    job is left, whatever it is called or wherever it hides."""
    attack(fuzzfile)
    path = TRACES[Path(fuzzfile).stem]
    before = {node: trace_size(node, path) for node in NODES}
    time.sleep(1)
    assert {node: trace_size(node, path) for node in NODES} == before


def test_the_next_job_sees_no_process_of_the_attacks(attack, tmp_path):
    for fuzzfile in ("survivor-hopper.yml", "survivor-nested.yml"):
        attack(fuzzfile)
    run = run_job("next-job.yml", tmp_path)
    assert run.rc == 0, run
    seen = [line for line in run.log().splitlines() if " sees: " in line]
    assert seen, run
    assert not [line for line in seen if "fmn-survivor" in line], run


def test_the_job_user_may_not_leave_work_for_cron_or_at(attack):
    run = attack("survivor-later.yml")
    assert run.rc == 0, run
    assert "crontab installed" not in run.log() and "at job queued" not in run.log(), run
    for node in NODES:
        for tool in ("cron", "at"):
            deny = docker("exec", node, "cat", "/etc/%s.deny" % tool).stdout.split()
            allow = docker("exec", node, "sh", "-c", "cat /etc/%s.allow 2>/dev/null" % tool).stdout.split()
            assert JOB_USER in deny and JOB_USER not in allow, (node, tool)
