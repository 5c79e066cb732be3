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
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from hostile_args import ARGS, ARGS_HEX  # noqa: E402  (shared with molecule/busybox)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "quoting"
NODES = ["fmn-quoting-node-1", "fmn-quoting-node-2", "fmn-quoting-node-3"]
NETWORK = "fmn-quoting"
RANKS = range(len(NODES))
WORKER_RANKS = range(1, len(NODES))
WRAPPER = "/multinode/ssh-wrapper"
UNSET6 = "|".join(["unset"] * 6)

testinfra_hosts = NODES
ALL_NODES = [testinfra.get_host("ansible://" + name, ansible_inventory=INVENTORY) for name in NODES]

HELPER_JOBS = {"quoting-dash": "/usr/bin/dash", "quoting-busybox": "/usr/bin/busybox"}

# -- running jobs -----------------------------------------------------------------

def run_job(fuzzfile, job, logs):
    """Run run-job.yml the way a user does; returns (rc, output, seconds)."""
    return user_playbook.run_job(FUZZFILES / fuzzfile, logs, job)


class Run:
    def __init__(self, job, logs, rc, output, seconds):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds

    @property
    def log(self):
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    @property
    def lines(self):
        return self.log.splitlines()

    def labelled(self, *labels):
        return sorted(line for line in self.lines if line.split(" ", 1)[0] in labels)

    def rank_log(self, rank):
        path = self.logs / self.job / ("rank-%d.log" % rank)
        return path.read_text().splitlines() if path.exists() else None


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
    out = subprocess.run(
        ["docker", "inspect", "-f",
         '{{(index .NetworkSettings.Networks "%s").IPAddress}}' % NETWORK, NODES[0]],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", out), out
    return out


@pytest.fixture(params=list(HELPER_JOBS))
def helper(request, jobs):
    run = jobs.get(request.param)
    assert run.rc == 0, run.output
    return run


# -- what the helper job must print ------------------------------------------

def names(job):
    return ["%s-%d" % (job, r) for r in RANKS]


def hostlist(job, slots=1):
    return ",".join("%s:%d" % (n, slots) for n in names(job))


def head_multinode(job, ip):
    """The six runtime variables as the helper script prints them, joined by |."""
    return "|".join([hostlist(job), ",".join(names(job)), str(len(NODES)), ip, WRAPPER, WRAPPER])


def expected_lines(job, ip, pid):
    n = names(job)
    head, env = "changed-on-head", "from-the-job-env"
    lines = {
        "shell": ["shell rank=0 exe=%s" % HELPER_JOBS[job]],
        "sq": ["sq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[0], n[0], head, head_multinode(job, ip))]
        + ["sq on=%s rank=%d host=%s myvar=%s mn=%s" % (n[r], r, n[r], env, UNSET6) for r in WORKER_RANKS],
        "dq": ["dq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[r], n[0], head, head_multinode(job, ip))
               for r in WORKER_RANKS],
        "hq": ["hq on=%s rank=%d host=%s myvar=%s ip=unset" % (n[r], r, n[r], env) for r in WORKER_RANKS],
        "hu": ["hu on=%s rank=0 host=%s myvar=%s ip=%s" % (n[r], n[0], head, ip) for r in WORKER_RANKS],
        "pos": ["pos on=%s rank=%d n=2 1=%s 2=%s" % (n[r], r, hostlist(job), ip) for r in WORKER_RANKS],
        "vb": ["vb on=%s one line" % n[r] for r in WORKER_RANKS]
        + ["vb on=%s inner rank=%d 'q' \"dq\" $literal" % (n[r], r) for r in WORKER_RANKS],
        "wsh": ["wsh on=%s exe=/usr/bin/dash" % n[r] for r in WORKER_RANKS],
        "r0hd": ["r0hd on=%s rank=0 ip=%s" % (n[0], ip), "r0hd second line myvar=%s" % head],
        "r0pid": ["r0pid before=[]", "r0pid set=%s" % pid, "r0pid self=%s" % pid,
                  "r0pid wait_rank0 status=7", "r0pid wait_rank0 status-ok=0"],
        "ah": ["ah on=%s rank=%d host=%s myvar=%s n=0" % (n[r], r, n[r], head if r == 0 else env)
               for r in RANKS]
        + ["ah second line on=%s" % n[r] for r in RANKS] + ["ah status=0"],
        "ad": ["ad on=%s rank=0 hostlist=%s ip=%s" % (n[r], hostlist(job), ip) for r in RANKS]
        + ["ad status=0"],
        "as": ["as status=4"],
        "args0": ["args0 on=%s rank=0 n=%d hex=%s" % (n[0], len(ARGS), ARGS_HEX)],
        "argsN": ["argsN on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in WORKER_RANKS],
        "argsA": ["argsA on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in RANKS],
    }
    return {label: sorted(found) for label, found in lines.items()}


def rank0_pid(run):
    """The pid the script printed for $rank0_pid (checked by its own test)."""
    for line in run.lines:
        if line.startswith("r0pid set="):
            return line.split("=", 1)[1]
    return "<missing>"


@pytest.fixture
def expected(helper, head_ip):
    return expected_lines(helper.job, head_ip, rank0_pid(helper))


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
    assert helper.labelled("shell", "wsh") == sorted(expected["shell"] + expected["wsh"]), helper.log


def test_single_quotes_expand_on_each_node(helper, expected):
    """'$HOSTNAME', '$RANK' and job-env variables take each node's own value;
    MULTINODE_* are set on the head only (unset on workers)."""
    assert helper.labelled("sq") == expected["sq"], helper.log


def test_double_quotes_expand_on_the_head(helper, expected):
    """Every worker prints the head's HOSTNAME, RANK, job-env value as the
    head script changed it, and the six MULTINODE_* variables."""
    assert helper.labelled("dq") == expected["dq"], helper.log


def test_quoted_heredoc_expands_on_each_node(helper, expected):
    assert helper.labelled("hq") == expected["hq"], helper.log


def test_unquoted_heredoc_expands_on_the_head(helper, expected):
    assert helper.labelled("hu") == expected["hu"], helper.log


def test_runtime_variables_reach_workers_as_positional_arguments(helper, expected):
    assert helper.labelled("pos") == expected["pos"], helper.log


def test_scripts_reach_workers_verbatim(helper, expected):
    """A multi-line script with a comment, a line continuation and a nested
    heredoc runs on each worker as written."""
    assert helper.labelled("vb") == expected["vb"], helper.log


def test_exec_rank0_reads_a_multiline_heredoc(helper, expected):
    assert helper.labelled("r0hd") == expected["r0hd"], helper.log


def test_rank0_pid_and_wait_rank0_status(helper, expected):
    """$rank0_pid is empty before exec_rank0 and then the pid of the rank 0
    process; wait_rank0 exits (not returns) with rank 0's status, 7 or 0."""
    assert re.fullmatch(r"[1-9][0-9]*", rank0_pid(helper)), helper.log
    assert helper.labelled("r0pid") == expected["r0pid"], helper.log


def test_exec_all_without_arguments_reads_a_heredoc(helper, expected):
    assert helper.labelled("ah") == expected["ah"], helper.log


def test_exec_all_in_double_quotes_sends_the_head_values(helper, expected):
    assert helper.labelled("ad") == expected["ad"], helper.log


def test_exec_all_ends_with_the_status_of_rank0(helper, expected):
    assert helper.labelled("as") == expected["as"], helper.log


@pytest.mark.parametrize("how", ["args0", "argsN", "argsA"])
def test_arguments_arrive_byte_for_byte(helper, expected, how):
    """exec_rank0 -, exec_rankN - and exec_all - with ARGS: every node gets
    the same $# and the same bytes in every argument."""
    assert helper.labelled(how) == expected[how], helper.log


def test_every_line_appears_exactly_once(helper, expected):
    """Forwarding on: each node's lines are in the job log once, and nothing
    else is (no error message, no duplicate)."""
    want = collections.Counter(line for lines in expected.values() for line in lines)
    got = collections.Counter(helper.lines)
    assert got - want == collections.Counter(), "unexpected or duplicated:\n" + helper.log
    assert want - got == collections.Counter(), "missing:\n" + helper.log


def test_forwarded_lines_are_the_rank_logs(helper):
    """What a worker printed (its rank log) is what reached the job log."""
    for rank in WORKER_RANKS:
        name = "%s-%d" % (helper.job, rank)
        forwarded = sorted(line for line in helper.lines if (" on=%s " % name) in line + " ")
        assert forwarded, helper.log
        assert sorted(helper.rank_log(rank) or []) == forwarded, (rank, helper.log)


# -- command mode ---------------------------------------------------------------

@pytest.fixture(scope="module")
def command(jobs):
    run = jobs.get("quoting-cmd")
    assert run.rc == 0, run.output
    return run


def test_command_mode_expands_every_multinode_variable(command, head_ip):
    hosts = "quoting-cmd-0:2,quoting-cmd-1:2,quoting-cmd-2:2"
    noslots = "quoting-cmd-0,quoting-cmd-1,quoting-cmd-2"
    assert command.lines[:9] == [
        "arg [hostlist=%s]" % hosts,
        "arg [noslots=%s]" % noslots,
        "arg [noslots-unbraced=%s]" % noslots,
        "arg [total=6]",  # 3 nodes x procs-per-node 2 (not cores: 1)
        "arg [ip=%s]" % head_ip,
        "arg [ssh=%s]" % WRAPPER,
        "arg [rsh=%s]" % WRAPPER,
        "arg [adjacent=6x6.]",
        "arg [unknown=[][][]]",
    ], command.log


def test_command_mode_expands_without_a_shell(command):
    """Unknown names expand to nothing (an empty argument stays an argument),
    job env and rank variables expand, spaces stay inside one argument,
    $(...), `...`, globs and non-name $ stay literal; args are appended."""
    assert command.lines[9:16] == [
        "arg []",
        "arg [env=from the job env rank=0 host=quoting-cmd-0]",
        "arg [spaces=an argument with  two  spaces]",
        "arg [subst=$(echo executed) `echo executed`]",
        "arg [glob=* /*]",
        "arg [literal=$1 $@ ${} $]",
        "arg [from args: two  words]",
    ], command.log


def test_command_mode_has_the_variables_in_its_environment(command, head_ip):
    assert command.lines[16:] == [
        "env MULTINODE_HOSTLIST=quoting-cmd-0:2,quoting-cmd-1:2,quoting-cmd-2:2",
        "env MULTINODE_HOSTLIST_NOSLOTS=quoting-cmd-0,quoting-cmd-1,quoting-cmd-2",
        "env MULTINODE_NODE_IP=%s" % head_ip,
        "env MULTINODE_RSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_SSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_TOTAL_SLOTS=6",
    ], command.log


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
