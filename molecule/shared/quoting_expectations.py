"""What the quoting jobs must print, for both tiers that run them: the
container cluster (molecule/quoting) and local mode
(tests/local/test_local_quoting.py). One definition, so that both tiers hold
the jobs to the same promise; what differs between the tiers (the head's
address, the shells, the number of ranks) is a parameter.

- helper.yml (tests/fuzzfiles/quoting): each line starts with a label, and
  `on=` names the node (rank) that printed it;
- command-mode.yml: the job's arguments, then its MULTINODE_* environment.
"""

import collections

from hostile_args import ARGS, ARGS_HEX

WRAPPER = "/multinode/ssh-wrapper"
UNSET6 = "|".join(["unset"] * 6)
HEAD_VALUE = "changed-on-head"  # MYVAR once the head script has changed it
ENV_VALUE = "from-the-job-env"  # MYVAR as the job's env sets it


def name(job, rank):
    """A rank's host name."""
    return "%s-%d" % (job, rank)


def names(job, ranks):
    return [name(job, r) for r in range(ranks)]


def hostlist(job, ranks, slots=1):
    return ",".join("%s:%d" % (n, slots) for n in names(job, ranks))


def head_multinode(job, ranks, ip):
    """The six runtime variables as the helper script prints them, joined by |."""
    return "|".join([hostlist(job, ranks), ",".join(names(job, ranks)), str(ranks), ip, WRAPPER, WRAPPER])


def helper_lines(job, *, ranks, ip, pid, head_shell, worker_shell):
    """Every line the helper job prints, by label, each list sorted.

    ip: rank 0's address; pid: what the script printed for $rank0_pid;
    head_shell: the executable running the script on the head (its
    shebang's); worker_shell: what /bin/sh is on a worker."""
    n = names(job, ranks)
    all_ranks, workers = range(ranks), range(1, ranks)
    head, env = HEAD_VALUE, ENV_VALUE
    mn = head_multinode(job, ranks, ip)
    hosts = hostlist(job, ranks)
    lines = {
        "shell": ["shell rank=0 exe=%s" % head_shell],
        "sq": ["sq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[0], n[0], head, mn)]
        + ["sq on=%s rank=%d host=%s myvar=%s mn=%s" % (n[r], r, n[r], env, UNSET6) for r in workers],
        "dq": ["dq on=%s rank=0 host=%s myvar=%s mn=%s" % (n[r], n[0], head, mn) for r in workers],
        "hq": ["hq on=%s rank=%d host=%s myvar=%s ip=unset" % (n[r], r, n[r], env) for r in workers],
        "hu": ["hu on=%s rank=0 host=%s myvar=%s ip=%s" % (n[r], n[0], head, ip) for r in workers],
        "pos": ["pos on=%s rank=%d n=2 1=%s 2=%s" % (n[r], r, hosts, ip) for r in workers],
        "vb": ["vb on=%s one line" % n[r] for r in workers]
        + ["vb on=%s inner rank=%d 'q' \"dq\" $literal" % (n[r], r) for r in workers],
        "wsh": ["wsh on=%s exe=%s" % (n[r], worker_shell) for r in workers],
        "r0hd": ["r0hd on=%s rank=0 ip=%s" % (n[0], ip), "r0hd second line myvar=%s" % head],
        "r0pid": ["r0pid before=[]", "r0pid set=%s" % pid, "r0pid self=%s" % pid,
                  "r0pid wait_rank0 status=7", "r0pid wait_rank0 status-ok=0"],
        "ah": ["ah on=%s rank=%d host=%s myvar=%s n=0" % (n[r], r, n[r], head if r == 0 else env) for r in all_ranks]
        + ["ah second line on=%s" % n[r] for r in all_ranks] + ["ah status=0"],
        "ad": ["ad on=%s rank=0 hostlist=%s ip=%s" % (n[r], hosts, ip) for r in all_ranks] + ["ad status=0"],
        "as": ["as status=4"],
        "args0": ["args0 on=%s rank=0 n=%d hex=%s" % (n[0], len(ARGS), ARGS_HEX)],
        "argsN": ["argsN on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in workers],
        "argsA": ["argsA on=%s rank=%d n=%d hex=%s" % (n[r], r, len(ARGS), ARGS_HEX) for r in all_ranks],
    }
    return {label: sorted(found) for label, found in lines.items()}


def labelled(lines, *labels):
    """The lines (sorted) whose first word is one of the labels."""
    return sorted(line for line in lines if line.split(" ", 1)[0] in labels)


def expected_labelled(expected, *labels):
    """What labelled() must return for these labels, from helper_lines()."""
    return sorted(line for label in labels for line in expected[label])


def rank0_pid(lines):
    """The pid the script printed for $rank0_pid (checked by its own test)."""
    return next((line.split("=", 1)[1] for line in lines if line.startswith("r0pid set=")), "<missing>")


def printed_on(lines, job, rank):
    """The lines (sorted) a rank printed: those naming its host with on=."""
    return sorted(line for line in lines if (" on=%s " % name(job, rank)) in line + " ")


def counted_difference(lines, expected):
    """(unexpected or duplicated, missing): the lines beyond those expected and
    the expected lines not printed, with their counts; both empty when every
    expected line is printed exactly once and nothing else is."""
    want = collections.Counter(line for found in expected.values() for line in found)
    got = collections.Counter(lines)
    return got - want, want - got


def command_mode_lines(ip):
    """What command-mode.yml's job prints, in order: 9 arguments holding the
    MULTINODE_* variables, 7 showing expansion without a shell, then its
    MULTINODE_* environment (6 lines)."""
    hosts = hostlist("quoting-cmd", 3, slots=2)  # 3 nodes, procs-per-node 2
    noslots = ",".join(names("quoting-cmd", 3))
    return [
        "arg [hostlist=%s]" % hosts,
        "arg [noslots=%s]" % noslots,
        "arg [noslots-unbraced=%s]" % noslots,
        "arg [total=6]",  # 3 nodes x procs-per-node 2 (not cores: 1)
        "arg [ip=%s]" % ip,
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
        "env MULTINODE_NODE_IP=%s" % ip,
        "env MULTINODE_RSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_SSH_WRAPPER=%s" % WRAPPER,
        "env MULTINODE_TOTAL_SLOTS=6",
    ]
