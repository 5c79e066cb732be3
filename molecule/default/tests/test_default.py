"""Verifier of the default scenario: the spec's three examples (run by
converge.yml) and the core behaviours, on a real 2-node container cluster."""

import os
import re
import sys
from pathlib import Path

import pytest
import testinfra

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
LOGS = EPHEMERAL / "fuzz-logs"
NODES = ["fmn-default-node-1", "fmn-default-node-2"]

testinfra_hosts = NODES
# Tests that run a job check every node themselves, so they run once.
ALL_NODES = [testinfra.get_host("ansible://" + name, ansible_inventory=INVENTORY) for name in NODES]


def job_log(job, logs=LOGS):
    return (logs / (job + ".log")).read_text()


def log_lines(job, logs=LOGS):
    return job_log(job, logs).splitlines()


def run_job(fuzzfile, logs):
    """Run run-job.yml the way a user does; returns (rc, output, seconds)."""
    return user_playbook.run_job(PROJECT / "tests/fuzzfiles" / fuzzfile, logs)


def job_processes(host):
    """Processes of the job user on a node (the job runs as user fuzz),
    zombies included: ps lists every process, also ones that called setsid."""
    out = host.check_output("ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"' || true")
    return [line for line in out.splitlines() if line.strip()]


def processes_on_all_nodes():
    return {node.backend.get_hostname(): job_processes(node) for node in ALL_NODES}


NO_PROCESSES = {name: [] for name in NODES}


# -- the spec's examples, exactly as documented ------------------------------

def test_helper_example_prints_the_documented_lines():
    assert log_lines("generic-multinode-helper") == [
        "generic-multinode-helper-0 is the head node",
        "generic-multinode-helper-1 is a worker node",
    ]


def test_script_example_prints_the_documented_lines():
    assert log_lines("generic-multinode-script") == [
        "generic-multinode-script-0 is the head node",
        "generic-multinode-script-1 is a worker node",
    ]


def test_mpi_example_runs_four_ranks_over_both_nodes():
    hello = re.compile(r"^Hello world from processor (\S+), rank (\d) out of 4 processors$")
    matches = [hello.match(line) for line in log_lines("generic-multinode")]
    assert all(matches), job_log("generic-multinode")
    assert sorted(int(m.group(2)) for m in matches) == [0, 1, 2, 3]
    assert {m.group(1) for m in matches} == {"generic-multinode-0", "generic-multinode-1"}


# -- nodes are left as they were ----------------------------------------------

def test_node_host_name_is_unchanged(host):
    assert host.check_output("hostname") == host.backend.get_hostname()


def test_no_job_process_survives(host):
    assert job_processes(host) == []


def test_rank_names_are_unregistered_after_the_job(host):
    assert "fuzz.multinode job" not in host.file("/etc/hosts").content_string


# -- behaviours the issue names -------------------------------------------------

@pytest.fixture(scope="module")
def worker_failure(tmp_path_factory):
    return run_job("worker-fails.yml", tmp_path_factory.mktemp("logs"))


def test_failing_worker_fails_the_job_before_the_head_ends(worker_failure):
    rc, output, seconds = worker_failure
    assert rc != 0, output
    assert "rank 1 (worker-fails-1 on fmn-default-node-2) exited with status 3" in output
    # The head had 120 s of work left; the job must have stopped long before.
    assert seconds < 100, output


def test_failing_worker_stops_every_process(worker_failure):
    assert processes_on_all_nodes() == NO_PROCESSES


def test_wait_rank0_passes_the_head_status_through(tmp_path):
    rc, output, _unused = run_job("head-fails.yml", tmp_path)
    assert rc != 0, output
    assert "rank 0 (head-fails-0 on fmn-default-node-1) exited with status 5" in output
    assert "not reached" not in job_log("head-fails", tmp_path)


def test_worker_output_only_with_forwarding(tmp_path):
    rc, output, _unused = run_job("forwarding-off.yml", tmp_path)
    assert rc == 0, output
    assert log_lines("forwarding-off", tmp_path) == ["forwarding-off-0 is the head node"]
    rank_log = (tmp_path / "forwarding-off" / "rank-1.log").read_text().splitlines()
    assert sorted(rank_log) == ["forwarding-off-1 is a worker node", "forwarding-off-1 on stderr"]


def test_processes_left_behind_are_killed_even_after_setsid(tmp_path):
    rc, output, _unused = run_job("lingering.yml", tmp_path)
    assert rc == 0, output
    assert sorted(log_lines("lingering", tmp_path)) == [
        "lingering-0 left sleepers", "lingering-1 left sleepers"]
    assert processes_on_all_nodes() == NO_PROCESSES


def test_every_rank_has_its_name_env_and_resolves_all_ranks(tmp_path):
    rc, output, _unused = run_job("rank-names.yml", tmp_path)
    assert rc == 0, output
    assert sorted(log_lines("rank-names", tmp_path)) == [
        "rank=%d hostname=rank-names-%d HOSTNAME=rank-names-%d user=fuzz "
        "greeting=hello from the job env resolves=2" % (r, r, r) for r in (0, 1)]


def test_command_mode_expands_variables_without_a_shell(tmp_path):
    rc, output, _unused = run_job("command-mode.yml", tmp_path)
    assert rc == 0, output
    assert log_lines("command-mode", tmp_path) == [
        "[4]",  # 2 nodes x 2 cores (a node has 2 CPUs at least)
        "[command-mode-0:2,command-mode-1:2]",
        "[the job env says hi]",
        "[]",
        "[$(echo not a shell)]",
        "[an arg with spaces]",
        "/tmp",
        "fuzz",
    ]


def test_script_without_shebang_runs_with_sh_and_gets_args(tmp_path):
    rc, output, _unused = run_job("no-shebang.yml", tmp_path)
    assert rc == 0, output
    assert log_lines("no-shebang", tmp_path) == ["first=one second=two words count=2"]
