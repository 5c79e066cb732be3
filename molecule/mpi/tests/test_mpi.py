"""Verifier of the mpi scenario: real MPI jobs through the wrapper on a real
4-node container cluster, run through run-job.yml exactly as a user runs it.

- the spec's Open MPI example, unchanged (converge.yml runs it on 2 nodes);
- Open MPI on 4 nodes, 2 ranks each, with a program whose ranks communicate
  (a token around a ring, then an allreduce; every rank checks the results);
- Open MPI's tree spawn: daemons on workers call the wrapper themselves;
- MPICH's Hydra on 4 nodes, the wrapper as its ssh launcher (a hello world);
- MPI runs that fail (a rank exits non-zero, a program that does not exist);
- Open MPI with root as the job user (last: it prepares the nodes for root).

After every job no process of it may be left on any node. The check does not
go by user (a root job's processes are root's): every process on a node that
is not the node's own (its init, init's sleep, the sshd listener) counts, so
leftover ranks, daemons, wrappers, launchers and ssh sessions all show up.
Tests run in file order; each judges its own job.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "mpi"
CONVERGE_LOGS = EPHEMERAL / "fuzz-logs"
NODES = ["fmn-mpi-node-1", "fmn-mpi-node-2", "fmn-mpi-node-3", "fmn-mpi-node-4"]
NO_PROCESSES = {name: [] for name in NODES}
# A run takes one to four minutes even on a heavily loaded 2-core machine
# (preparing the nodes included); an MPI run that hangs must not hang the
# scenario.
PLAYBOOK_TIMEOUT = 600


# -- looking at the nodes -------------------------------------------------------

def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def foreign_processes(node):
    """Every process on the node, zombies included, except the node's own:
    init (PID 1), init's sleep, the sshd listener, and this ps."""
    done = docker("exec", node, "ps", "-e", "-o", "pid=,ppid=,user=,stat=,args=")
    if done.returncode != 0:
        return ["(cannot look: %s)" % done.stderr.strip()]
    left = []
    for line in done.stdout.splitlines():
        pid, ppid, user, stat, args = (line.split(None, 4) + [""])[:5]
        if pid == "1" or args.startswith("ps -e -o "):
            continue
        if ppid == "1" and (args == "sleep 10000" or "[listener]" in args
                            or args.startswith("/usr/sbin/sshd")):
            continue
        left.append(line.strip())
    return left


def processes_on_all_nodes():
    return {node: foreign_processes(node) for node in NODES}


# -- running jobs like a user ----------------------------------------------------

class JobRun:
    """One finished run of run-job.yml: exit status, output, the logs it
    fetched, and what was left on every node the moment it returned."""

    def __init__(self, job, logs, rc, output, seconds):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds
        self.leftovers = processes_on_all_nodes()

    def log(self):
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    def lines(self):
        return self.log().splitlines()

    def rank_log(self, rank):
        path = self.logs / self.job / ("rank-%d.log" % rank)
        return path.read_text() if path.exists() else ""

    def failure_message(self):
        """What the play reports as the job's failure (its last task)."""
        marker = "TASK [fuzz.multinode.job : Report the job's result]"
        return self.output[self.output.rfind(marker):] if marker in self.output else ""

    def __repr__(self):  # shown by pytest when an assertion fails
        return "JobRun(%s, rc=%s, %.1f s)\n--- output ---\n%s\n--- job log ---\n%s" % (
            self.job, self.rc, self.seconds, self.output[-6000:], self.log())


def run_playbook(fuzzfile, logs, extra_vars=None):
    """run-job.yml to the end, like fuzz_playbook.run_job, but a job that
    hangs (an MPI run that never ends) fails its tests instead of the whole
    scenario: after PLAYBOOK_TIMEOUT the playbook gets Ctrl-C, as a user
    would give it, which cancels the job on every node."""
    argv, env = user_playbook.playbook(fuzzfile, logs, extra_vars=extra_vars)
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=PLAYBOOK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        output = "(interrupted after %d s)\n%s" % (PLAYBOOK_TIMEOUT, output)
    return proc.returncode, output, time.monotonic() - started


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    """Runs each Fuzzfile once for all the tests that look at it."""
    runs = {}

    def get(fuzzfile, extra_vars=None):
        key = (fuzzfile, tuple(sorted((extra_vars or {}).items())))
        if key not in runs:
            logs = tmp_path_factory.mktemp("logs")
            rc, output, seconds = run_playbook(FUZZFILES / fuzzfile, logs, extra_vars)
            runs[key] = JobRun(Path(fuzzfile).stem, logs, rc, output, seconds)
        return runs[key]
    return get


# -- what MPI programs print -------------------------------------------------------

HELLO = re.compile(r"^Hello world from processor (\S+), rank (\d+) out of (\d+) processors$")
ALLREDUCE = re.compile(r"^allreduce rank (\d+) of (\d+) on (\S+): "
                       r"sum (\d+) \(expected (\d+)\), ring (\d+) \(expected (\d+)\): (\S+)$")


def hello_ranks(lines):
    """{MPI rank: processor name} from the hello world's lines."""
    found = [HELLO.match(line) for line in lines if line.startswith("Hello world")]
    assert all(found), lines
    return {int(m.group(2)): (m.group(1), int(m.group(3))) for m in found}


def allreduce_results(lines):
    """[(rank, size, processor name, sum, ring, verdict)] of mpi_allreduce."""
    found = [ALLREDUCE.match(line) for line in lines if line.startswith("allreduce rank")]
    assert all(found), lines
    return sorted((int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)),
                   int(m.group(6)), m.group(8)) for m in found)


def communicated(job, nodes, per_node):
    """What every rank of mpi_allreduce prints when all went well: ranks
    placed per_node at a time on the job's rank host names, the allreduce
    of rank + 1 and the ring's sum of ranks right on every rank."""
    size = nodes * per_node
    return [(r, size, "%s-%d" % (job, r // per_node), size * (size + 1) // 2,
             size * (size - 1) // 2, "ok") for r in range(size)]


# -- the spec's Open MPI example (run by converge.yml) -------------------------------

def test_spec_example_runs_four_ranks_over_both_nodes():
    """examples/generic-multinode.yml verbatim: 4 ranks over the first 2 of
    the 4 hosts, each on its rank host name."""
    lines = (CONVERGE_LOGS / "generic-multinode.log").read_text().splitlines()
    assert len(lines) == 4 and hello_ranks(lines) == {
        0: ("generic-multinode-0", 4), 1: ("generic-multinode-0", 4),
        2: ("generic-multinode-1", 4), 3: ("generic-multinode-1", 4)}, lines


def test_spec_example_leaves_no_process():
    # Nothing has run since converge.yml's job: this is the state it left.
    assert processes_on_all_nodes() == NO_PROCESSES


# -- Open MPI on 4 nodes -------------------------------------------------------------

def test_openmpi_ranks_communicate_across_four_nodes(job_run):
    """mpirun -H $MULTINODE_HOSTLIST --mca plm_rsh_agent $MULTINODE_SSH_WRAPPER
    -np $MULTINODE_TOTAL_SLOTS with 2 procs per node: 8 ranks, 2 on each
    node's rank host name, every one of them got the right sum and ring."""
    run = job_run("openmpi-allreduce.yml")
    assert run.rc == 0, run
    assert allreduce_results(run.lines()) == communicated("openmpi-allreduce", 4, 2), run
    assert len(run.lines()) == 8, run


def test_openmpi_run_leaves_no_process(job_run):
    run = job_run("openmpi-allreduce.yml")
    assert run.leftovers == NO_PROCESSES, run


# -- Open MPI's tree spawn: workers call the wrapper -------------------------------------

def test_openmpi_daemons_on_workers_launch_through_the_wrapper(job_run):
    """With routed_radix 1 mpirun starts only rank 1's daemon; that daemon
    starts rank 2's and rank 2's starts rank 3's, each by calling
    $MULTINODE_SSH_WRAPPER on its own node. Every rank still runs and
    communicates."""
    run = job_run("openmpi-tree-spawn.yml")
    assert run.rc == 0, run
    assert allreduce_results(run.lines()) == communicated("openmpi-tree-spawn", 4, 1), run
    for rank in (1, 2):  # the daemons that launch the next one (rank 3's is the leaf)
        log = run.rank_log(rank)
        assert re.search(r"^\[openmpi-tree-spawn-%d:\d+\] .* plm:rsh: final template argv:\n"
                         r"\s+/multinode/ssh-wrapper <template> " % rank, log, re.M), (rank, log, run)


def test_openmpi_tree_spawn_leaves_no_process(job_run):
    run = job_run("openmpi-tree-spawn.yml")
    assert run.leftovers == NO_PROCESSES, run


# -- MPICH's Hydra, the wrapper as its ssh launcher ------------------------------------
# Only a hello world: MPICH 4.0.2 (the image's, Debian bookworm, ch4:ucx) often
# hangs in MPI_Finalize after ranks on different nodes have communicated over
# TCP (a rank waits in the PMI barrier while a peer still needs it to progress
# its UCX disconnect; fixed upstream in pmodels/mpich#6596), whatever launches it.

def test_mpich_hydra_starts_ranks_on_every_node(job_run):
    """mpiexec.hydra -launcher ssh -launcher-exec $MULTINODE_SSH_WRAPPER
    -hosts $MULTINODE_HOSTLIST: Hydra's proxies start on the workers through
    the wrapper, connect back to mpiexec on the head, and place 2 ranks on
    each node."""
    run = job_run("mpich-hydra.yml")
    assert run.rc == 0, run
    assert len(run.lines()) == 8 and hello_ranks(run.lines()) == {
        r: ("mpich-hydra-%d" % (r // 2), 8) for r in range(8)}, run


def test_mpich_hydra_run_leaves_no_process(job_run):
    run = job_run("mpich-hydra.yml")
    assert run.leftovers == NO_PROCESSES, run


# -- MPI runs that fail ------------------------------------------------------------------

def test_failing_mpi_rank_fails_the_job(job_run):
    """One MPI rank (5, on the third node) exits 3 before MPI_Init: mpirun
    aborts the run and passes the status on; the job fails with it and
    says why in the job log."""
    run = job_run("openmpi-rank-fails.yml")
    assert run.rc != 0, run
    assert ("rank 0 (openmpi-rank-fails-0 on %s) exited with status 3" % NODES[0]
            in run.failure_message()), run
    assert "MPI rank 5 on openmpi-rank-fails-2 fails" in run.lines(), run
    assert "1 process returned\na non-zero exit code" in run.log(), run
    # The other ranks could not finish: the ring needs rank 5.
    assert "allreduce rank" not in run.log(), run


def test_failing_mpi_rank_leaves_no_process(job_run):
    run = job_run("openmpi-rank-fails.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_missing_mpi_program_fails_the_job(job_run):
    """Hydra cannot start the program on any node: the job fails, names a
    rank and a non-zero status, and the job log says what was missing."""
    run = job_run("mpich-missing-program.yml")
    assert run.rc != 0, run
    assert re.search(r"rank \d \(mpich-missing-program-\d on fmn-mpi-node-\d\) exited with status [1-9]\d*",
                     run.failure_message()), run
    assert re.search(r"execvp error on file /usr/lib64/mpich/bin/no-such-program "
                     r"\(No such file or directory\)", run.log()), run


def test_missing_mpi_program_leaves_no_process(job_run):
    run = job_run("mpich-missing-program.yml")
    assert run.leftovers == NO_PROCESSES, run


# -- Open MPI with root as the job user (last: the nodes are prepared for root) -------------

AS_ROOT = {"fuzz_multinode_job_user": "root"}


def test_openmpi_runs_across_nodes_as_root(job_run):
    """With fuzz_multinode_job_user=root every rank runs as root, and mpirun,
    which refuses root unless OMPI_ALLOW_RUN_AS_ROOT and
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM are set, runs across all 4 nodes."""
    run = job_run("openmpi-root.yml", AS_ROOT)
    assert run.rc == 0, run
    lines = run.lines()
    assert "head runs as root" in lines, run
    assert sorted(line for line in lines if line.startswith("MPI rank")) == [
        "MPI rank %d on openmpi-root-%d runs as root" % (r, r) for r in range(4)], run
    assert allreduce_results(lines) == communicated("openmpi-root", 4, 1), run


def test_openmpi_run_as_root_leaves_no_process(job_run):
    run = job_run("openmpi-root.yml", AS_ROOT)
    assert run.leftovers == NO_PROCESSES, run
