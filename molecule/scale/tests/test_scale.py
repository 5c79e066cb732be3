"""Verifier of the scale scenario: jobs on a 5-node inventory, run through
run-job.yml exactly as a user runs them.

Three jobs (tests/fuzzfiles/scale/):
- scale-cores (cores.yml, run by converge.yml, which also prepares the
  nodes): five ranks, command mode, cpu.cores 2 and no procs-per-node;
  prints its expanded arguments and MULTINODE_* variables, then runs mpirun
  with them;
- scale (ranks.yml): five ranks, script mode, procs-per-node 3, forwarding
  on; every rank prints labelled lines (the label is the first word) about
  who and where it is, from exec_rankN and from exec_all, on stdout and
  stderr;
- scale-subset (subset.yml): three ranks on the five-node inventory, held
  running until the verifier has looked at the two nodes it must not use.

The job user's processes on every node are recorded the moment each
playbook returns (by converge.yml for scale-cores, with docker exec here for
the others), so every test judges its own job.
"""

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
from node_runtime import registry, show  # noqa: E402  (what a node's runtime holds, and its paths)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from docker_network import network_address  # noqa: E402  (shared with molecule/busybox and quoting)
from job_logs import JobLogs  # noqa: E402  (shared with molecule/quoting)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "scale"
NODES = ["fmn-scale-node-%d" % n for n in range(1, 6)]  # inventory order
NETWORK = "fmn-scale"
WRAPPER = "/multinode/ssh-wrapper"
RANKS = range(5)
WORKER_RANKS = range(1, 5)
NO_PROCESSES = {node: [] for node in NODES}
SUBSET_NODES, UNUSED_NODES = NODES[:3], NODES[3:]  # scale-subset: 3 of 5
RELEASE = "/tmp/scale-subset.release"  # subset.yml's ranks wait for it


# -- looking at the nodes -----------------------------------------------------------

def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, check=False)


def on_node(node, script):
    """Output of a shell script run as root on a node; fails the test if it fails."""
    done = docker("exec", node, "sh", "-c", script)
    assert done.returncode == 0, "%s on %s: %s" % (script, node, done.stderr)
    return done.stdout


def job_processes(node):
    """Processes of the job user on a node (every job runs as user fuzz),
    zombies included: ps lists every process, also ones that called setsid."""
    out = on_node(node, "ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"'")
    return [line for line in out.splitlines() if line.strip()]


def processes_on_all_nodes(nodes=NODES):
    return {node: job_processes(node) for node in nodes}


def node_state(node):
    """What the collection keeps on a node: its files (path, type, size,
    modification time, checksum), /etc/hosts and the job registrations. Any
    write by a play or a job changes it."""
    return on_node(node, r"""
        for path in /etc/fuzz-multinode /opt/fuzz-multinode /multinode /root/.ssh \
                    /home/fuzz STATE_DIR LOG_DIR /etc/hosts; do
            [ -e "$path" ] || { echo "absent $path"; continue; }
            find "$path" -printf '%p %y %s %T@\n'
            find "$path" -type f -exec md5sum {} +
        done | LC_ALL=C sort
        """.replace("STATE_DIR", registry.STATE_DIR).replace("LOG_DIR", registry.LOG_DIR))


@pytest.fixture(scope="session")
def addresses():
    """Each node's address on the scenario network, as Docker assigned it."""
    return [network_address(NETWORK, node) for node in NODES]


# -- running jobs like a user -----------------------------------------------------

class JobRun(JobLogs):
    """One finished run of run-job.yml: exit status, output, duration, the
    logs it fetched (read through JobLogs), and the job user's processes on
    every node the moment it returned."""

    def __init__(self, job, logs, rc, output, seconds, leftovers=None):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds
        self.leftovers = processes_on_all_nodes() if leftovers is None else leftovers

    def __repr__(self):  # shown by pytest when an assertion fails
        return "JobRun(%s, rc=%s, %.1f s)\n--- output ---\n%s\n--- job log ---\n%s" % (
            self.job, self.rc, self.seconds, self.output[-6000:], self.log)


def run_job(fuzzfile, job, logs):
    rc, output, seconds = user_playbook.run_job(FUZZFILES / fuzzfile, logs, job)
    run = JobRun(job, logs, rc, output, seconds)
    print("%s: run-job.yml took %.1f s" % (job, seconds))
    if rc != 0:  # pytest shortens the repr in assertion messages; this is shown whole
        print(repr(run))
    return run


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    run = run_job("ranks.yml", "scale", tmp_path_factory.mktemp("scale"))
    assert run.rc == 0, run
    return run


@pytest.fixture(scope="module")
def cores():
    """converge.yml ran scale-cores (it failed if the job failed) and saved
    the job user's processes on every node right after it."""
    logs = EPHEMERAL / "fuzz-logs"
    leftovers = json.loads((logs / "scale-cores.leftovers.json").read_text())
    return JobRun("scale-cores", logs, 0, "(run by converge.yml)", 0.0, leftovers)


def names(job, count=5):
    return ["%s-%d" % (job, r) for r in range(count)]


# -- scale-cores: five ranks, command mode, cpu.cores 2 ------------------------------------

def test_multinode_variables_with_cores_in_command_mode(cores, addresses):
    """No procs-per-node: cpu.cores 2 gives 2 slots per name, 10 in total,
    both in the expanded arguments and in the environment."""
    n = names("scale-cores")
    hostlist = ",".join(name + ":2" for name in n)
    assert cores.lines[:10] == [
        "arg [%s]" % hostlist,
        "arg [%s]" % ",".join(n),
        "arg [10]",
        "arg [%s]" % WRAPPER,
        "env MULTINODE_HOSTLIST=" + hostlist,
        "env MULTINODE_HOSTLIST_NOSLOTS=" + ",".join(n),
        "env MULTINODE_NODE_IP=" + addresses[0],
        "env MULTINODE_RSH_WRAPPER=" + WRAPPER,
        "env MULTINODE_SSH_WRAPPER=" + WRAPPER,
        "env MULTINODE_TOTAL_SLOTS=10",
    ], cores


def test_mpirun_with_the_variables_runs_two_processes_on_each_rank(cores):
    """mpirun -H $MULTINODE_HOSTLIST -np $MULTINODE_TOTAL_SLOTS over the
    wrapper: 10 MPI processes, two on each of the five rank names."""
    hello = re.compile(r"^Hello world from processor (\S+), rank (\d+) out of 10 processors$")
    matches = [hello.match(line) for line in cores.lines[10:]]
    assert matches and all(matches), cores
    assert sorted(int(m.group(2)) for m in matches) == list(range(10)), cores
    assert collections.Counter(m.group(1) for m in matches) == {name: 2 for name in names("scale-cores")}, cores


def test_scale_cores_job_leaves_no_process(cores):
    assert cores.leftovers == NO_PROCESSES, cores


# -- scale: five ranks, script mode, procs-per-node 3 ----------------------------------

def ranks_expected(addresses):
    """Every line the scale job must print, by label."""
    n = names("scale")
    lines = {
        "env": [
            "env MULTINODE_HOSTLIST=" + ",".join(name + ":3" for name in n),
            "env MULTINODE_HOSTLIST_NOSLOTS=" + ",".join(n),
            "env MULTINODE_NODE_IP=" + addresses[0],
            "env MULTINODE_RSH_WRAPPER=" + WRAPPER,
            "env MULTINODE_SSH_WRAPPER=" + WRAPPER,
            "env MULTINODE_TOTAL_SLOTS=15",
            "env MULTINODE_WRAPPER_FORWARD_STREAMS=1",
        ],
        "args": ["args n=2 1=%s 2=15" % ",".join(name + ":3" for name in n)],
        "id": ["id rank=%d hostname=%s HOSTNAME=%s node=%s user=fuzz" % (r, n[r], n[r], NODES[r])
               for r in RANKS],
        "resolve": ["resolve rank=%d name=%s address=%s" % (r, n[other], addresses[other])
                    for r in RANKS for other in RANKS],
        "rankN": ["rankN %s=%d rank=%d on=%s" % (stream, i, r, n[r])
                  for r in WORKER_RANKS for stream in ("out", "err") for i in (1, 2, 3)],
        "all": ["all %s=%d rank=%d on=%s" % (stream, i, r, n[r])
                for r in RANKS for stream in ("out", "err") for i in (1, 2, 3)],
    }
    return {label: sorted(found) for label, found in lines.items()}


def test_rank_r_runs_on_the_rth_inventory_host_named_job_r(ranks, addresses):
    """Rank r runs on the r-th host of the inventory group (node-1 is rank
    0), as the job user, and both hostname and $HOSTNAME say <job>-r."""
    assert ranks.labelled("id") == ranks_expected(addresses)["id"], ranks


def test_every_rank_resolves_every_rank_name_to_its_node(ranks, addresses):
    assert ranks.labelled("resolve") == ranks_expected(addresses)["resolve"], ranks


def test_multinode_variables_with_procs_per_node(ranks, addresses):
    """procs-per-node 3 gives 3 slots on each of the five names, in rank
    order, 15 in total (cpu.cores 2 does not count); the same values are
    expanded in the script's args."""
    expected = ranks_expected(addresses)
    assert ranks.labelled("env") == expected["env"], ranks
    assert ranks.labelled("args") == expected["args"], ranks


def test_exec_rankN_reaches_every_worker_and_only_them(ranks, addresses):
    assert ranks.labelled("rankN") == ranks_expected(addresses)["rankN"], ranks


def test_exec_all_reaches_every_rank(ranks, addresses):
    assert ranks.labelled("all") == ranks_expected(addresses)["all"], ranks


def test_every_rank_line_is_in_the_job_log_exactly_once(ranks, addresses):
    """Forwarding on: each of the 5 ranks' stdout and stderr lines is in the
    job log once, and nothing else is (no duplicate, no error message)."""
    want = collections.Counter(line for lines in ranks_expected(addresses).values() for line in lines)
    got = collections.Counter(ranks.lines)
    assert got - want == collections.Counter(), "unexpected or duplicated:\n%r" % ranks
    assert want - got == collections.Counter(), "missing:\n%r" % ranks


def test_forwarded_lines_are_the_workers_rank_logs(ranks):
    """What each worker printed (its rank log, fetched from its node) is
    what reached the job log."""
    for rank in WORKER_RANKS:
        forwarded = sorted(line for line in ranks.lines if re.search(r"\brank=%d\b" % rank, line))
        assert len(forwarded) == 1 + 5 + 6 + 6, ranks  # id, resolve, rankN, all
        assert sorted(ranks.rank_log(rank) or []) == forwarded, (rank, ranks)


def test_scale_job_leaves_no_process(ranks):
    assert ranks.leftovers == NO_PROCESSES, ranks


# -- scale-subset: three ranks on the five-node inventory (last: the role
# prepares nodes for the set of hosts a play uses, so this re-prepares 1-3) --------

class SubsetRun(JobRun):
    def __init__(self, job, logs, rc, output, seconds, during, before, after):
        super().__init__(job, logs, rc, output, seconds)
        self.during, self.before, self.after = during, before, after


def wait_for(condition, proc, out_path, what, timeout=420):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail("the playbook ended before %s:\n%s" % (what, out_path.read_text()[-6000:]))
        if time.monotonic() > deadline:
            pytest.fail("not %s within %d s:\n%s" % (what, timeout, out_path.read_text()[-6000:]))
        time.sleep(0.5)


def subset_started():
    """The job is claimed on the head by this run (after its registration
    emptied the job's logs there) and all three ranks printed their first
    line (in the head's job log)."""
    held = show(NODES[0], "scale-subset")
    return bool(held["run"]) and held["job_log"] is not None and all(
        re.search(r"^rank=%d hostname=" % r, held["job_log"], re.M) for r in range(3))


def registration(node):
    """The jobs registered on the node, and whether its /etc/hosts lists
    scale-subset's rank names."""
    return {"jobs": show(node)["jobs"], "hosts_block": show(node, "scale-subset")["hosts_block"]}


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    """Runs scale-subset in the background; while its three ranks run,
    records the job user's processes and the job's registration on every
    node; then releases the ranks and waits for the playbook."""
    logs = tmp_path_factory.mktemp("scale-subset")
    for node in NODES:
        on_node(node, "rm -f " + RELEASE)
    before = {node: node_state(node) for node in UNUSED_NODES}
    argv, env = user_playbook.playbook(FUZZFILES / "subset.yml", logs)
    out_path = logs / "ansible-playbook.out"
    started = time.monotonic()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for(subset_started, proc, out_path, "all three ranks of scale-subset ran")
        during = {node: {
            "processes": job_processes(node),
            "registered": registration(node),
        } for node in NODES}
        for node in SUBSET_NODES:
            on_node(node, "touch " + RELEASE)
        try:
            rc = proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail("the playbook still runs 240 s after the ranks were released:\n%s"
                        % out_path.read_text()[-6000:])
        seconds = time.monotonic() - started
        print("scale-subset: run-job.yml took %.1f s" % seconds)
        return SubsetRun("scale-subset", logs, rc, out_path.read_text(), seconds, during, before,
                         {node: node_state(node) for node in UNUSED_NODES})
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for node in NODES:
            docker("exec", node, "rm", "-f", RELEASE)


def test_job_with_fewer_nodes_runs_on_the_first_hosts(subset):
    """nodes: 3 on a 5-host inventory: ranks 0-2 on the first three hosts,
    three names in the variables, and only those three names exist."""
    assert subset.rc == 0, subset
    n = names("scale-subset", 3)
    assert subset.lines[0] == "head hostlist=%s noslots=%s total=3" % (
        ",".join(name + ":1" for name in n), ",".join(n)), subset
    assert sorted(subset.lines[1:]) == sorted(
        ["rank=%d hostname=%s node=%s resolves=3" % (r, n[r], NODES[r]) for r in range(3)]
        + ["rank=%d released" % r for r in range(3)]), subset


def test_job_with_fewer_nodes_leaves_the_other_hosts_alone(subset):
    """While the job runs, the three hosts run its processes and know it;
    the two others run nothing of it and do not know it. The play never
    connects to them, and nothing the collection keeps there changes."""
    for node in SUBSET_NODES:
        assert subset.during[node]["processes"], (node, subset.during)
        assert subset.during[node]["registered"] == {"jobs": ["scale-subset"], "hosts_block": True}, (
            node, subset.during)
    for node in UNUSED_NODES:
        assert subset.during[node] == {"processes": [], "registered": {"jobs": [], "hosts_block": False}}, (
            node, subset.during)
        assert node not in subset.output, subset
        assert subset.after[node] == subset.before[node], node


def test_scale_subset_job_leaves_no_process(subset):
    assert subset.leftovers == NO_PROCESSES, subset
