"""Verifier of the mpi scenario: real MPI jobs through the wrapper on a real
4-node container cluster, run through run-job.yml exactly as a user runs it.

- the spec's Open MPI example, unchanged (converge.yml runs it on 2 nodes);
- Open MPI on 4 nodes, 2 ranks each, with a program whose ranks communicate
  (a token around a ring, then an allreduce; every rank checks the results);
- Open MPI's tree spawn: daemons on workers call the wrapper themselves;
- MPICH's Hydra on 4 nodes, the wrapper as its ssh launcher (a hello world);
- MPI runs that fail (a rank exits non-zero, a program that does not exist);
- Fuzzball's own way (implementation openmpi/ompi, mpich): the Fuzzfile names
  only the per-rank program and the runtime runs it under mpirun/mpiexec
  (hello worlds, a ring and allreduce, script mode, a failing rank), and
  gasnet refused before any node is touched;
- Open MPI with root as the job user (last: it prepares the nodes for root).

After every job no process of it may be left on any node. The check does not
go by user (a root job's processes are root's): every process on a node that
is not the node's own (its init, init's sleep, the sshd listener) counts, so
leftover ranks, daemons, wrappers, launchers and ssh sessions all show up.
Tests run in file order; each judges its own job.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from mpi_checks import allreduce_results, communicated, hello_ranks  # noqa: E402  (shared with tests/local)

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
                          text=True, timeout=timeout, check=False)


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

def run_playbook(fuzzfile, logs, extra_vars=None):
    """run-job.yml to the end, like fuzz_playbook.run_job, but a job that
    hangs (an MPI run that never ends) fails its tests instead of the whole
    scenario: after PLAYBOOK_TIMEOUT the playbook gets Ctrl-C, as a user
    would give it, which cancels the job on every node (SIGKILL 120 s on)."""
    argv, env = user_playbook.playbook(fuzzfile, logs, extra_vars=extra_vars)
    return user_playbook.run_with_timeout(argv, env, PROJECT, PLAYBOOK_TIMEOUT, grace=120)


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    """Runs each Fuzzfile once for all the tests that look at it."""
    runs = {}

    def get(fuzzfile, extra_vars=None):
        key = (fuzzfile, tuple(sorted((extra_vars or {}).items())))
        if key not in runs:
            logs = tmp_path_factory.mktemp("logs")
            rc, output, seconds = run_playbook(FUZZFILES / fuzzfile, logs, extra_vars)
            # What is left on the nodes the moment the playbook returned.
            runs[key] = user_playbook.JobRun(Path(fuzzfile).stem, logs, rc, output, seconds,
                                             processes_on_all_nodes())
        return runs[key]
    return get


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


# -- Fuzzball's way: implementation openmpi/ompi and mpich ------------------------------------
# The Fuzzfiles are written as the vendor's examples are: the per-rank program
# only (`command: [/bin/sh, -c, mpi_hello_world]`), the MPI's bin directory
# first on PATH in env; the runtime wraps the launcher around it.

def test_openmpi_implementation_runs_the_program_on_every_rank(job_run):
    """implementation openmpi, nodes 4: mpirun is put in front of the
    command, so the job log holds exactly one hello line per rank, ranks
    0-3 of 4, each from its own rank host name."""
    run = job_run("openmpi-hello.yml")
    assert run.rc == 0, run
    assert len(run.lines()) == 4 and hello_ranks(run.lines()) == {
        r: ("openmpi-hello-%d" % r, 4) for r in range(4)}, run


def test_openmpi_implementation_leaves_no_process(job_run):
    run = job_run("openmpi-hello.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_openmpi_implementation_ranks_communicate(job_run):
    """4 nodes x 2 slots (procs-per-node): mpirun gets -np 8 and 2 slots per
    rank name, places 2 ranks on each node, and the ring and allreduce
    results are right on every rank."""
    run = job_run("openmpi-ring.yml")
    assert run.rc == 0, run
    assert allreduce_results(run.lines()) == communicated("openmpi-ring", 4, 2), run
    assert len(run.lines()) == 8, run


def test_openmpi_implementation_ring_leaves_no_process(job_run):
    run = job_run("openmpi-ring.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_mpich_implementation_runs_ranks_through_hydra(job_run):
    """implementation mpich, 4 nodes, procs-per-node 2: mpiexec starts 8
    ranks, 2 on each rank name, and they form one MPI job of 8. The program
    and mpiexec the job's PATH finds are MPICH's (linked to libmpich) and
    Hydra; an MPICH program started by Open MPI's mpirun, or by a launcher
    not told the slots, would be 8 jobs of 1 or placed round-robin.
    (MPIR_CVAR_DEBUG_SUMMARY would make MPICH's library say so in the log,
    but mpiexec forwards its partial lines unsynchronized, gluing another
    rank's hello line to it.)"""
    run = job_run("mpich-hello.yml")
    assert run.rc == 0, run
    assert len(run.lines()) == 8 and hello_ranks(run.lines()) == {
        r: ("mpich-hello-%d" % (r // 2), 8) for r in range(8)}, run
    for node in NODES:
        found = docker("exec", node, "sh", "-c",
                       "PATH=/usr/lib64/mpich/bin:/usr/local/bin:/usr/bin:/bin; "
                       "readlink -f \"$(command -v mpiexec)\"; ldd \"$(command -v mpi_hello_world)\"")
        assert found.stdout.startswith("/usr/bin/mpiexec.hydra\n"), (node, found)
        assert re.search(r"^\s+libmpich\.so\.\d+ => ", found.stdout, re.M), (node, found)
        assert "libmpi.so" not in found.stdout, (node, found)  # Open MPI's library


def test_mpich_implementation_leaves_no_process(job_run):
    run = job_run("mpich-hello.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_script_runs_as_every_rank_under_the_launcher(job_run):
    """Script mode, implementation ompi: the script, written at the same
    path on every node, runs as each MPI rank on that rank's node as the job
    user (so it is readable and executable there), with the job's args
    (expanded, one word each), and the ranks communicate."""
    run = job_run("ompi-script.yml")
    assert run.rc == 0, run
    said = sorted(line for line in run.lines() if line.startswith("script on"))
    assert said == [
        "script on ompi-script-%d as fuzz: MPI rank %d of 4, 2 args: [4] [two words]" % (r, r)
        for r in range(4)], run
    assert allreduce_results(run.lines()) == communicated("ompi-script", 4, 1), run


def test_script_under_the_launcher_leaves_no_process(job_run):
    run = job_run("ompi-script.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_failing_rank_fails_an_openmpi_implementation_job(job_run):
    """MPI rank 5 (third node) exits 3 before MPI_Init: mpirun aborts the
    run and exits 3, and the job fails with that status, Open MPI's
    explanation in the job log."""
    run = job_run("openmpi-fails.yml")
    assert run.rc != 0, run
    assert ("rank 0 (openmpi-fails-0 on %s) exited with status 3" % NODES[0]
            in run.failure_message()), run
    assert "MPI rank 5 on openmpi-fails-2 fails" in run.lines(), run
    assert "1 process returned\na non-zero exit code" in run.log(), run
    assert "allreduce rank" not in run.log(), run


def test_failing_openmpi_implementation_job_leaves_no_process(job_run):
    run = job_run("openmpi-fails.yml")
    assert run.leftovers == NO_PROCESSES, run


def test_gasnet_is_refused_before_any_node_is_touched(job_run):
    """The fuzzfile module, run-job.yml's first task, refuses gasnet with
    the reason and the way out; no task runs on any node, and no node has
    the job registered or its rank names in /etc/hosts."""
    run = job_run("gasnet.yml")
    assert run.rc != 0, run
    assert ("jobs.chapel-hello.multinode.implementation: 'gasnet' is not supported: "
            "fuzz.multinode has no GASNet launcher" in run.output), run
    assert "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER" in run.output, run
    assert "fmn-mpi-node" not in run.output, run
    for node in NODES:
        held = node_runtime.show(node, "chapel-hello")
        assert not held["registered"] and held["run"] is None, (node, held)
        untouched = docker("exec", node, "sh", "-c", "! grep -q chapel-hello /etc/hosts")
        assert untouched.returncode == 0, (node, untouched)


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
