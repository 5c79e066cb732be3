"""Local mode, quoting and argument passing (the `quoting` share of
conftest.py's finishing workflow: molecule/quoting's jobs quoting-dash of
tests/fuzzfiles/quoting/helper.yml and command-mode.yml, on 3 ranks of this
machine): where variables expand in
scripts sent with the generic helper, exec_all/exec_rankN/exec_rank0/
wait_rank0, arguments byte for byte, command-mode expansion. The same
expectations as molecule/quoting, with this machine's shells and the head's
local address."""

import collections
import os
import re
import sys

import pytest

import local_jobs as lj

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from hostile_args import ARGS, ARGS_HEX  # noqa: E402  (shared with molecule/quoting)

RANKS = range(3)
WORKER_RANKS = range(1, 3)
WRAPPER = "/multinode/ssh-wrapper"
UNSET6 = "|".join(["unset"] * 6)
HEAD_IP = "127.0.0.1"  # local mode: rank 0's address
SH = os.path.realpath("/bin/sh")  # what a worker runs its script with
HELPER_JOBS = {"quoting-dash": SH}  # the job's shell on the head


def names(job):
    return ["%s-%d" % (job, r) for r in RANKS]


def hostlist(job, slots=1):
    return ",".join("%s:%d" % (n, slots) for n in names(job))


def head_multinode(job):
    return "|".join([hostlist(job), ",".join(names(job)), str(len(RANKS)), HEAD_IP, WRAPPER, WRAPPER])


def expected_lines(job, pid):
    """Every line the helper job prints (molecule/quoting/tests/test_quoting.py)."""
    n = names(job)
    head, env = "changed-on-head", "from-the-job-env"
    lines = {
        "shell": ["shell rank=0 exe=%s" % HELPER_JOBS[job]],
        "sq": ["sq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[0], n[0], head, head_multinode(job))]
        + ["sq on=%s rank=%d host=%s myvar=%s mn=%s" % (n[r], r, n[r], env, UNSET6) for r in WORKER_RANKS],
        "dq": ["dq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[r], n[0], head, head_multinode(job))
               for r in WORKER_RANKS],
        "hq": ["hq on=%s rank=%d host=%s myvar=%s ip=unset" % (n[r], r, n[r], env) for r in WORKER_RANKS],
        "hu": ["hu on=%s rank=0 host=%s myvar=%s ip=%s" % (n[r], n[0], head, HEAD_IP) for r in WORKER_RANKS],
        "pos": ["pos on=%s rank=%d n=2 1=%s 2=%s" % (n[r], r, hostlist(job), HEAD_IP) for r in WORKER_RANKS],
        "vb": ["vb on=%s one line" % n[r] for r in WORKER_RANKS]
        + ["vb on=%s inner rank=%d 'q' \"dq\" $literal" % (n[r], r) for r in WORKER_RANKS],
        "wsh": ["wsh on=%s exe=%s" % (n[r], SH) for r in WORKER_RANKS],
        "r0hd": ["r0hd on=%s rank=0 ip=%s" % (n[0], HEAD_IP), "r0hd second line myvar=%s" % head],
        "r0pid": ["r0pid before=[]", "r0pid set=%s" % pid, "r0pid self=%s" % pid,
                  "r0pid wait_rank0 status=7", "r0pid wait_rank0 status-ok=0"],
        "ah": ["ah on=%s rank=%d host=%s myvar=%s n=0" % (n[r], r, n[r], head if r == 0 else env)
               for r in RANKS]
        + ["ah second line on=%s" % n[r] for r in RANKS] + ["ah status=0"],
        "ad": ["ad on=%s rank=0 hostlist=%s ip=%s" % (n[r], hostlist(job), HEAD_IP) for r in RANKS]
        + ["ad status=0"],
        "as": ["as status=4"],
        "args0": ["args0 on=%s rank=0 n=%d hex=%s" % (n[0], len(ARGS), ARGS_HEX)],
        "argsN": ["argsN on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in WORKER_RANKS],
        "argsA": ["argsA on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in RANKS],
    }
    return {label: sorted(found) for label, found in lines.items()}


class Helper:
    """One helper job of the run: its lines, by label."""

    def __init__(self, run, job):
        self.run, self.job = run, job
        self.lines = run.lines(job)
        pid = next((line.split("=", 1)[1] for line in self.lines if line.startswith("r0pid set=")), "<missing>")
        self.pid = pid
        self.expected = expected_lines(job, pid)

    def labelled(self, *labels):
        return sorted(line for line in self.lines if line.split(" ", 1)[0] in labels)

    def __repr__(self):
        return "%s job log:\n%s\n%r" % (self.job, self.run.log(self.job), self.run)


@pytest.fixture(params=list(HELPER_JOBS))
def helper(request, quoting):
    assert quoting.failed_jobs() == {} and quoting.rc == 0, quoting
    return Helper(quoting, request.param)


def test_head_runs_the_shebang_shell_and_workers_run_sh(helper):
    assert helper.labelled("shell", "wsh") == sorted(helper.expected["shell"] + helper.expected["wsh"]), helper


def test_single_quotes_expand_on_each_rank(helper):
    """'$HOSTNAME', '$RANK' and job-env variables take each rank's own
    value; MULTINODE_* are set on the head only."""
    assert helper.labelled("sq") == helper.expected["sq"], helper


def test_double_quotes_expand_on_the_head(helper):
    assert helper.labelled("dq") == helper.expected["dq"], helper


def test_quoted_heredoc_expands_on_each_rank(helper):
    assert helper.labelled("hq") == helper.expected["hq"], helper


def test_unquoted_heredoc_expands_on_the_head(helper):
    assert helper.labelled("hu") == helper.expected["hu"], helper


def test_runtime_variables_reach_workers_as_positional_arguments(helper):
    assert helper.labelled("pos") == helper.expected["pos"], helper


def test_scripts_reach_workers_verbatim(helper):
    assert helper.labelled("vb") == helper.expected["vb"], helper


def test_exec_rank0_reads_a_multiline_heredoc(helper):
    assert helper.labelled("r0hd") == helper.expected["r0hd"], helper


def test_rank0_pid_and_wait_rank0_status(helper):
    """$rank0_pid is empty before exec_rank0, then rank 0's process;
    wait_rank0 exits with rank 0's status, 7 or 0."""
    assert re.fullmatch(r"[1-9][0-9]*", helper.pid), helper
    assert helper.labelled("r0pid") == helper.expected["r0pid"], helper


def test_exec_all_reads_a_heredoc_sends_head_values_and_ends_with_rank0_status(helper):
    assert helper.labelled("ah", "ad", "as") == sorted(
        helper.expected["ah"] + helper.expected["ad"] + helper.expected["as"]), helper


@pytest.mark.parametrize("how", ["args0", "argsN", "argsA"])
def test_arguments_arrive_byte_for_byte(helper, how):
    """exec_rank0 -, exec_rankN - and exec_all - with molecule's hostile
    arguments: every rank gets the same $# and the same bytes."""
    assert helper.labelled(how) == helper.expected[how], helper


def test_every_line_appears_exactly_once(helper):
    """Forwarding on: each rank's lines are in the job log once, and nothing
    else is (no error message, no duplicate)."""
    want = collections.Counter(line for lines in helper.expected.values() for line in lines)
    got = collections.Counter(helper.lines)
    assert got - want == collections.Counter(), "unexpected or duplicated: %r" % helper
    assert want - got == collections.Counter(), "missing: %r" % helper


def test_forwarded_lines_are_the_rank_logs(helper):
    """What a worker printed (its rank log) is what reached the job log."""
    for rank in WORKER_RANKS:
        name = "%s-%d" % (helper.job, rank)
        forwarded = sorted(line for line in helper.lines if (" on=%s " % name) in line + " ")
        assert forwarded, helper
        assert sorted((helper.run.rank_log(helper.job, rank) or "").splitlines()) == forwarded, (rank, helper)


# -- command mode ---------------------------------------------------------------

def test_command_mode_expands_every_multinode_variable_without_a_shell(quoting):
    lines = quoting.lines("quoting-cmd")
    hosts = "quoting-cmd-0:2,quoting-cmd-1:2,quoting-cmd-2:2"
    noslots = "quoting-cmd-0,quoting-cmd-1,quoting-cmd-2"
    assert lines == [
        "arg [hostlist=%s]" % hosts,
        "arg [noslots=%s]" % noslots,
        "arg [noslots-unbraced=%s]" % noslots,
        "arg [total=6]",
        "arg [ip=%s]" % HEAD_IP,
        "arg [ssh=%s]" % WRAPPER,
        "arg [rsh=%s]" % WRAPPER,
        "arg [adjacent=6x6.]",
        "arg [unknown=[][][]]",
        "arg []",
        "arg [env=from the job env rank=0 host=quoting-cmd-0]",
        "arg [spaces=an argument with  two  spaces]",
        "arg [subst=$(echo executed) `echo executed`]",
        "arg [glob=* /*]",
        "arg [literal=$1 $@ ${} $]",
        "arg [from args: two  words]",
        "env MULTINODE_HOSTLIST=%s" % hosts,
        "env MULTINODE_HOSTLIST_NOSLOTS=%s" % noslots,
        "env MULTINODE_NODE_IP=%s" % HEAD_IP,
        "env MULTINODE_RSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_SSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_TOTAL_SLOTS=6",
    ], quoting


def test_nothing_of_the_jobs_is_left_on_the_machine(quoting):
    assert quoting.state == lj.cleaned(quoting.state, quoting.jobs), quoting.state
    assert quoting.state["hostname"] == quoting.hostname_before
