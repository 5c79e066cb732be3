"""Verifier of the quoting scenario: where variables expand in scripts sent
with the generic helper, how arguments travel to every node, and command-mode
expansion of every MULTINODE_* variable, on a real 3-node container cluster.

Three run-job.yml runs, each run as a user runs it:
- quoting-dash and quoting-busybox (tests/fuzzfiles/quoting/helper.yml): the
  same helper script under /bin/sh (dash) and under `#!/bin/busybox sh`; it
  prints labelled lines (the label is the first word, `on=` names the node
  that printed the line) that the tests below compare with what the
  specification promises;
- quoting-cmd (tests/fuzzfiles/quoting/command-mode.yml): command mode.
"""

import collections
import os
import re
import sys
from pathlib import Path

import pytest
import testinfra
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
import quoting_expectations as qe  # noqa: E402  (the expected lines, shared with tests/local)
from docker_network import network_address  # noqa: E402  (shared with molecule/busybox and scale)
from job_logs import JobLogs  # noqa: E402  (shared with molecule/scale)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "quoting"
NODES = ["fmn-quoting-node-1", "fmn-quoting-node-2", "fmn-quoting-node-3"]
NETWORK = "fmn-quoting"
WORKER_RANKS = range(1, len(NODES))

testinfra_hosts = NODES
ALL_NODES = [testinfra.get_host("ansible://" + name, ansible_inventory=INVENTORY) for name in NODES]

HELPER_JOBS = {"quoting-dash": "/usr/bin/dash", "quoting-busybox": "/usr/bin/busybox"}  # job: its head's shell
WORKER_SHELL = "/usr/bin/dash"  # a worker runs what it receives with /bin/sh: dash in the node image

# -- running jobs -----------------------------------------------------------------


def run_job(fuzzfile, job, logs):
    """Run run-job.yml the way a user does; returns (rc, output, seconds)."""
    return user_playbook.run_job(FUZZFILES / fuzzfile, logs, job)


class Run(JobLogs):
    """One finished run of run-job.yml; its logs are read through JobLogs."""

    def __init__(self, job, logs, rc, output, seconds):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds


class Jobs:
    """Runs each job once, on first use, and keeps its result and logs."""

    def __init__(self, root):
        self.root, self.runs = root, {}

    def get(self, job):
        if job not in self.runs:
            fuzzfile = "command-mode.yml" if job == "quoting-cmd" else "helper.yml"
            logs = self.root / job
            logs.mkdir()
            self.runs[job] = Run(job, logs, *run_job(fuzzfile, job, logs))
            print("%s: run-job.yml took %.1f s" % (job, self.runs[job].seconds))
        return self.runs[job]


@pytest.fixture(scope="session")
def jobs(tmp_path_factory):
    return Jobs(tmp_path_factory.mktemp("fuzz-logs"))


@pytest.fixture(scope="session")
def head_ip():
    """rank 0's address on the scenario network, as Docker assigned it."""
    return network_address(NETWORK, NODES[0])


@pytest.fixture(params=list(HELPER_JOBS))
def helper(request, jobs):
    run = jobs.get(request.param)
    assert run.rc == 0, run.output
    return run


# -- what the helper job must print (molecule/shared/quoting_expectations.py) -----

@pytest.fixture
def expected(helper, head_ip):
    return qe.helper_lines(helper.job, ranks=len(NODES), ip=head_ip, pid=qe.rank0_pid(helper.lines),
                           head_shell=HELPER_JOBS[helper.job], worker_shell=WORKER_SHELL)


def check_labelled(helper, expected, *labels):
    """The job log holds exactly the expected lines of these labels."""
    assert helper.labelled(*labels) == qe.expected_labelled(expected, *labels), helper.log


# -- the helper jobs --------------------------------------------------------------

def test_both_scripts_are_the_same_but_for_the_shebang():
    jobs = yaml.safe_load((FUZZFILES / "helper.yml").read_text())["jobs"]
    dash, busybox = (jobs[name]["script"].split("\n", 1) for name in HELPER_JOBS)
    assert (dash[0], busybox[0]) == ("#!/bin/sh", "#!/bin/busybox sh")
    assert dash[1] == busybox[1]
    assert {k: v for k, v in jobs["quoting-dash"].items() if k != "script"} == \
        {k: v for k, v in jobs["quoting-busybox"].items() if k != "script"}


def test_head_runs_the_shebang_shell_and_workers_run_sh(helper, expected):
    """The job's script runs under its shebang's shell on the head; a worker
    runs what it receives with /bin/sh -c (dash in the node image)."""
    check_labelled(helper, expected, "shell", "wsh")


def test_single_quotes_expand_on_each_node(helper, expected):
    """'$HOSTNAME', '$RANK' and job-env variables take each node's own value;
    MULTINODE_* are set on the head only (unset on workers)."""
    check_labelled(helper, expected, "sq")


def test_double_quotes_expand_on_the_head(helper, expected):
    """Every worker prints the head's HOSTNAME, RANK, job-env value as the
    head script changed it, and the six MULTINODE_* variables."""
    check_labelled(helper, expected, "dq")


def test_quoted_heredoc_expands_on_each_node(helper, expected):
    check_labelled(helper, expected, "hq")


def test_unquoted_heredoc_expands_on_the_head(helper, expected):
    check_labelled(helper, expected, "hu")


def test_runtime_variables_reach_workers_as_positional_arguments(helper, expected):
    check_labelled(helper, expected, "pos")


def test_scripts_reach_workers_verbatim(helper, expected):
    """A multi-line script with a comment, a line continuation and a nested
    heredoc runs on each worker as written."""
    check_labelled(helper, expected, "vb")


def test_exec_rank0_reads_a_multiline_heredoc(helper, expected):
    check_labelled(helper, expected, "r0hd")


def test_rank0_pid_and_wait_rank0_status(helper, expected):
    """$rank0_pid is empty before exec_rank0 and then the pid of the rank 0
    process; wait_rank0 exits (not returns) with rank 0's status, 7 or 0."""
    assert re.fullmatch(r"[1-9][0-9]*", qe.rank0_pid(helper.lines)), helper.log
    check_labelled(helper, expected, "r0pid")


def test_exec_all_without_arguments_reads_a_heredoc(helper, expected):
    check_labelled(helper, expected, "ah")


def test_exec_all_in_double_quotes_sends_the_head_values(helper, expected):
    check_labelled(helper, expected, "ad")


def test_exec_all_ends_with_the_status_of_rank0(helper, expected):
    check_labelled(helper, expected, "as")


@pytest.mark.parametrize("how", ["args0", "argsN", "argsA"])
def test_arguments_arrive_byte_for_byte(helper, expected, how):
    """exec_rank0 -, exec_rankN - and exec_all - with ARGS: every node gets
    the same $# and the same bytes in every argument."""
    check_labelled(helper, expected, how)


def test_every_line_appears_exactly_once(helper, expected):
    """Forwarding on: each node's lines are in the job log once, and nothing
    else is (no error message, no duplicate)."""
    unexpected, missing = qe.counted_difference(helper.lines, expected)
    assert unexpected == collections.Counter(), "unexpected or duplicated:\n" + helper.log
    assert missing == collections.Counter(), "missing:\n" + helper.log


def test_forwarded_lines_are_the_rank_logs(helper):
    """What a worker printed (its rank log) is what reached the job log."""
    for rank in WORKER_RANKS:
        forwarded = qe.printed_on(helper.lines, helper.job, rank)
        assert forwarded, helper.log
        assert sorted(helper.rank_log(rank) or []) == forwarded, (rank, helper.log)


# -- command mode ---------------------------------------------------------------

@pytest.fixture(scope="module")
def command(jobs):
    run = jobs.get("quoting-cmd")
    assert run.rc == 0, run.output
    return run


# The three parts of qe.command_mode_lines(), one test each: 9 arguments
# holding MULTINODE_* variables, 7 without a shell, 6 environment lines.

def test_command_mode_expands_every_multinode_variable(command, head_ip):
    assert command.lines[:9] == qe.command_mode_lines(head_ip)[:9], command.log


def test_command_mode_expands_without_a_shell(command, head_ip):
    """Unknown names expand to nothing (an empty argument stays an argument),
    job env and rank variables expand, spaces stay inside one argument,
    $(...), `...`, globs and non-name $ stay literal; args are appended."""
    assert command.lines[9:16] == qe.command_mode_lines(head_ip)[9:16], command.log


def test_command_mode_has_the_variables_in_its_environment(command, head_ip):
    assert command.lines[16:] == qe.command_mode_lines(head_ip)[16:], command.log


# -- nodes are left as they were (after every job above) ----------------------------

def job_processes(host):
    out = host.check_output("ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"' || true")
    return [line for line in out.splitlines() if line.strip()]


def test_nothing_of_the_jobs_is_left_on_the_node(host, jobs):
    for job in list(HELPER_JOBS) + ["quoting-cmd"]:
        jobs.get(job)
    assert job_processes(host) == []
    assert "fuzz.multinode job" not in host.file("/etc/hosts").content_string
    assert host.check_output("hostname") == host.backend.get_hostname()
