"""Local mode, quoting and argument passing (the `quoting` share of
conftest.py's finishing workflow: molecule/quoting's jobs quoting-dash of
tests/fuzzfiles/quoting/helper.yml and command-mode.yml, on 3 ranks of this
machine): where variables expand in
scripts sent with the generic helper, exec_all/exec_rankN/exec_rank0/
wait_rank0, arguments byte for byte, command-mode expansion. The same
expectations as molecule/quoting (one definition for both:
molecule/shared/quoting_expectations.py), with this machine's shells and the
head's local address."""

import collections
import os
import re
import sys

import pytest

import local_jobs as lj

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
import quoting_expectations as qe  # noqa: E402  (the expected lines, shared with molecule/quoting)

RANKS = 3
WORKER_RANKS = range(1, RANKS)
HEAD_IP = "127.0.0.1"  # local mode: rank 0's address
SH = os.path.realpath("/bin/sh")  # what a worker runs its script with
HELPER_JOBS = {"quoting-dash": SH}  # the job's shell on the head


class Helper:
    """One helper job of the run: its lines, by label."""

    def __init__(self, run, job):
        self.run, self.job = run, job
        self.lines = run.lines(job)
        self.pid = qe.rank0_pid(self.lines)
        self.expected = qe.helper_lines(job, ranks=RANKS, ip=HEAD_IP, pid=self.pid,
                                        head_shell=HELPER_JOBS[job], worker_shell=SH)

    def labelled(self, *labels):
        return qe.labelled(self.lines, *labels)

    def __repr__(self):
        return "%s job log:\n%s\n%r" % (self.job, self.run.log(self.job), self.run)


@pytest.fixture(params=list(HELPER_JOBS))
def helper(request, quoting):
    assert quoting.failed_jobs() == {} and quoting.rc == 0, quoting
    return Helper(quoting, request.param)


def check_labelled(helper, *labels):
    """The job log holds exactly the expected lines of these labels."""
    assert helper.labelled(*labels) == qe.expected_labelled(helper.expected, *labels), helper


def test_head_runs_the_shebang_shell_and_workers_run_sh(helper):
    check_labelled(helper, "shell", "wsh")


def test_single_quotes_expand_on_each_rank(helper):
    """'$HOSTNAME', '$RANK' and job-env variables take each rank's own
    value; MULTINODE_* are set on the head only."""
    check_labelled(helper, "sq")


def test_double_quotes_expand_on_the_head(helper):
    check_labelled(helper, "dq")


def test_quoted_heredoc_expands_on_each_rank(helper):
    check_labelled(helper, "hq")


def test_unquoted_heredoc_expands_on_the_head(helper):
    check_labelled(helper, "hu")


def test_runtime_variables_reach_workers_as_positional_arguments(helper):
    check_labelled(helper, "pos")


def test_scripts_reach_workers_verbatim(helper):
    check_labelled(helper, "vb")


def test_exec_rank0_reads_a_multiline_heredoc(helper):
    check_labelled(helper, "r0hd")


def test_rank0_pid_and_wait_rank0_status(helper):
    """$rank0_pid is empty before exec_rank0, then rank 0's process;
    wait_rank0 exits with rank 0's status, 7 or 0."""
    assert re.fullmatch(r"[1-9][0-9]*", helper.pid), helper
    check_labelled(helper, "r0pid")


def test_exec_all_reads_a_heredoc_sends_head_values_and_ends_with_rank0_status(helper):
    check_labelled(helper, "ah", "ad", "as")


@pytest.mark.parametrize("how", ["args0", "argsN", "argsA"])
def test_arguments_arrive_byte_for_byte(helper, how):
    """exec_rank0 -, exec_rankN - and exec_all - with molecule's hostile
    arguments: every rank gets the same $# and the same bytes."""
    check_labelled(helper, how)


def test_every_line_appears_exactly_once(helper):
    """Forwarding on: each rank's lines are in the job log once, and nothing
    else is (no error message, no duplicate)."""
    unexpected, missing = qe.counted_difference(helper.lines, helper.expected)
    assert unexpected == collections.Counter(), "unexpected or duplicated: %r" % helper
    assert missing == collections.Counter(), "missing: %r" % helper


def test_forwarded_lines_are_the_rank_logs(helper):
    """What a worker printed (its rank log) is what reached the job log."""
    for rank in WORKER_RANKS:
        forwarded = qe.printed_on(helper.lines, helper.job, rank)
        assert forwarded, helper
        assert sorted((helper.run.rank_log(helper.job, rank) or "").splitlines()) == forwarded, (rank, helper)


# -- command mode ---------------------------------------------------------------

def test_command_mode_expands_every_multinode_variable_without_a_shell(quoting):
    assert quoting.lines("quoting-cmd") == qe.command_mode_lines(HEAD_IP), quoting


def test_nothing_of_the_jobs_is_left_on_the_machine(quoting):
    assert quoting.state == lj.cleaned(quoting.state, quoting.jobs), quoting.state
    assert quoting.state["hostname"] == quoting.hostname_before
