"""Verifier of the busybox scenario: the generic helper and the SSH wrapper on
Alpine-like nodes, where /bin/sh is busybox sh (the spec's examples use
Alpine images), on a real 2-node container cluster.

converge.yml made /bin/sh busybox on every node (and put busybox's applets
first on PATH), then ran through run-job.yml, as a user runs it:
- the spec's three examples (examples/*.yml, unchanged): their `#!/bin/sh`
  scripts, the wrapper (a `#!/bin/sh` script that Open MPI and the scripts
  call) and the workers' `/bin/sh -c` all ran under busybox;
- busybox-helper (tests/fuzzfiles/busybox/helper.yml): the helper's four
  functions, its quoting rules and argument passing; every line
  it prints starts with a label and carries on=<host name of the node that
  printed it>, which the tests below compare with what the spec promises.
"""

import collections
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
from docker_network import network_address  # noqa: E402  (shared with molecule/quoting and scale)
from hostile_args import ARGS, ARGS_HEX  # noqa: E402  (shared with molecule/quoting)

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
LOGS = EPHEMERAL / "fuzz-logs"
NODES = ["fmn-busybox-node-1", "fmn-busybox-node-2"]
NETWORK = "fmn-busybox"
BUSYBOX = "/usr/bin/busybox"
WRAPPER = "/multinode/ssh-wrapper"
JOB = "busybox-helper"
RANKS = range(len(NODES))
WORKER_RANKS = range(1, len(NODES))

testinfra_hosts = NODES


def log_text(job):
    return (LOGS / (job + ".log")).read_text()


def log_lines(job):
    return log_text(job).splitlines()


def labelled(*labels):
    return sorted(line for line in log_lines(JOB) if line.split(" ", 1)[0] in labels)


def expected_lines():
    n = ["%s-%d" % (JOB, r) for r in RANKS]
    ip = network_address(NETWORK, NODES[0])  # rank 0's address
    hostlist = ",".join("%s:1" % name for name in n)
    head, env = "changed-on-head", "from-the-job-env"
    lines = {
        "shell": ["shell on=%s rank=0 exe=%s sh=%s hostname=%s wrapper=#!/bin/sh"
                  % (n[0], BUSYBOX, BUSYBOX, BUSYBOX)],
        "wsh": ["wsh on=%s rank=%d exe=%s sh=%s hostname=%s" % (n[r], r, BUSYBOX, BUSYBOX, BUSYBOX)
                for r in WORKER_RANKS],
        "sq": ["sq on=%s rank=0 host=%s myvar=%s ip=%s" % (n[0], n[0], head, ip)]
        + ["sq on=%s rank=%d host=%s myvar=%s ip=unset" % (n[r], r, n[r], env) for r in WORKER_RANKS],
        "dq": ["dq on=%s rank=0 host=%s myvar=%s ip=%s" % (n[r], n[0], head, ip) for r in WORKER_RANKS],
        "hq": ["hq on=%s rank=%d host=%s myvar=%s ip=unset" % (n[r], r, n[r], env) for r in WORKER_RANKS],
        "hu": ["hu on=%s rank=0 host=%s myvar=%s ip=%s" % (n[r], n[0], head, ip) for r in WORKER_RANKS],
        "r0hd": ["r0hd on=%s rank=0 ip=%s" % (n[0], ip), "r0hd second line myvar=%s" % head],
        "r0": ["r0 wait_rank0 status=7", "r0 wait_rank0 status-ok=0"],
        "ah": ["ah on=%s rank=%d host=%s myvar=%s n=0" % (n[r], r, n[r], head if r == 0 else env)
               for r in RANKS]
        + ["ah second line on=%s" % n[r] for r in RANKS] + ["ah status=0"],
        "model": ["model node %s loading model /models/my-model with batch size 32 head-addr %s on=%s"
                  % (n[r], ip, n[r]) for r in RANKS] + ["model status=0"],
        "aq": ["aq on=%s rank=%d myvar=%s" % (n[r], r, head if r == 0 else env) for r in RANKS]
        + ["aq status=0"],
        "ad": ["ad on=%s rank=0 hostlist=%s" % (n[r], hostlist) for r in RANKS] + ["ad status=0"],
        "as": ["as status=4"],
        "argsA": ["argsA on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in RANKS],
    }
    return {label: sorted(found) for label, found in lines.items()}


EXPECTED = expected_lines()


# -- the nodes are Alpine-like ----------------------------------------------------

def test_sh_is_busybox_on_every_node(host):
    """Still true after the jobs: /bin/sh is busybox, and the wrapper is a
    `#!/bin/sh` script, so every wrapper call ran under busybox sh."""
    assert host.check_output("readlink -f /bin/sh") == BUSYBOX
    assert host.check_output("/bin/sh -c 'readlink /proc/$$/exe'") == BUSYBOX
    assert host.check_output("head -n 1 %s" % WRAPPER) == "#!/bin/sh"


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
    """Open MPI starts its daemon on the worker through the wrapper (busybox
    sh) and the worker's /bin/sh -c (busybox sh)."""
    hello = re.compile(r"^Hello world from processor (\S+), rank (\d) out of 4 processors$")
    matches = [hello.match(line) for line in log_lines("generic-multinode")]
    assert all(matches), log_text("generic-multinode")
    assert sorted(int(m.group(2)) for m in matches) == [0, 1, 2, 3]
    assert {m.group(1) for m in matches} == {"generic-multinode-0", "generic-multinode-1"}


# -- the helper job ----------------------------------------------------------------

def test_busybox_runs_the_job_shell_and_every_worker_command():
    """The head's `#!/bin/sh` is busybox, workers run what they receive with
    busybox sh, the helper's `hostname` is busybox's applet, and the wrapper
    the helper calls is a `#!/bin/sh` script."""
    assert labelled("shell", "wsh") == sorted(EXPECTED["shell"] + EXPECTED["wsh"]), log_text(JOB)


def test_single_quotes_expand_on_each_node():
    assert labelled("sq") == EXPECTED["sq"], log_text(JOB)


def test_double_quotes_expand_on_the_head():
    assert labelled("dq") == EXPECTED["dq"], log_text(JOB)


def test_quoted_heredoc_expands_on_each_node_unquoted_on_the_head():
    assert labelled("hq", "hu") == sorted(EXPECTED["hq"] + EXPECTED["hu"]), log_text(JOB)


def test_exec_rank0_reads_a_multiline_heredoc():
    assert labelled("r0hd") == EXPECTED["r0hd"], log_text(JOB)


def test_wait_rank0_exits_with_the_status_of_rank0():
    assert labelled("r0") == EXPECTED["r0"], log_text(JOB)


def test_exec_all_without_arguments_reads_a_heredoc():
    assert labelled("ah") == EXPECTED["ah"], log_text(JOB)


def test_exec_all_dash_passes_positional_arguments_as_in_the_spec():
    assert labelled("model") == EXPECTED["model"], log_text(JOB)


def test_exec_all_in_single_and_double_quotes():
    assert labelled("aq", "ad") == sorted(EXPECTED["aq"] + EXPECTED["ad"]), log_text(JOB)


def test_exec_all_ends_with_the_status_of_rank0():
    assert labelled("as") == EXPECTED["as"], log_text(JOB)


def test_arguments_arrive_byte_for_byte_on_every_node():
    """exec_all - with arguments that need quoting: busybox sh on the head
    quotes them, busybox sh on each worker parses them back."""
    assert labelled("argsA") == EXPECTED["argsA"], log_text(JOB)


def test_every_line_appears_exactly_once():
    """Forwarding on: each node's lines are in the job log once, and nothing
    else is (no error message, no duplicate)."""
    want = collections.Counter(line for lines in EXPECTED.values() for line in lines)
    got = collections.Counter(log_lines(JOB))
    assert got - want == collections.Counter(), "unexpected or duplicated:\n" + log_text(JOB)
    assert want - got == collections.Counter(), "missing:\n" + log_text(JOB)


def test_forwarded_lines_are_the_rank_logs():
    """What a worker printed (its rank log) is what reached the job log."""
    for rank in WORKER_RANKS:
        name = "%s-%d" % (JOB, rank)
        forwarded = sorted(line for line in log_lines(JOB) if (" on=%s " % name) in line + " ")
        rank_log = (LOGS / JOB / ("rank-%d.log" % rank)).read_text().splitlines()
        assert forwarded, log_text(JOB)
        assert sorted(rank_log) == forwarded, (rank, log_text(JOB))


# -- nodes are left as they were --------------------------------------------------

def test_nothing_of_the_jobs_is_left_on_the_node(host):
    # procps' ps: busybox's applet (first on PATH here) has no -e.
    out = host.check_output("/usr/bin/ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"' || true")
    assert [line for line in out.splitlines() if line.strip()] == []
    assert "fuzz.multinode job" not in host.check_output("cat /etc/hosts")
    assert host.check_output("hostname") == host.backend.get_hostname()
