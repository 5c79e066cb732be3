"""Local mode, Open MPI over the wrapper (the `mpi` share of conftest.py's
failing workflow: the spec's example and tests/fuzzfiles/local/mpi.yml, with mpi_hello_world and
mpi_allreduce compiled by this machine's mpicc): mpirun started by the job
(generic) or by the runtime (implementation openmpi) places its ranks on
every rank host name through $MULTINODE_SSH_WRAPPER, the ranks
communicate, a failing MPI rank fails the job, and nothing is left."""

import sys

import local_jobs as lj

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from mpi_checks import allreduce_results, communicated, hello_ranks  # noqa: E402  (shared with molecule/mpi)

FAILING = {"mpi-rank-fails": "rank 0 (mpi-rank-fails-0 on localhost) exited with status 3"}


def test_only_the_failing_mpi_job_fails(mpi):
    assert mpi.failed_jobs() == FAILING, mpi


def test_spec_example_runs_four_ranks_two_on_each_rank_name(mpi):
    """examples/generic-multinode.yml (cores 2, 2 nodes): mpirun -H
    $MULTINODE_HOSTLIST --mca plm_rsh_agent $MULTINODE_SSH_WRAPPER -np
    $MULTINODE_TOTAL_SLOTS: 4 processes, 2 per rank host name."""
    lines = mpi.lines("generic-multinode")
    assert len(lines) == 4 and hello_ranks(lines) == {
        0: ("generic-multinode-0", 4), 1: ("generic-multinode-0", 4),
        2: ("generic-multinode-1", 4), 3: ("generic-multinode-1", 4)}, mpi


def test_generic_mpirun_ranks_communicate_across_rank_names(mpi):
    """2 rank names x 2 slots: a ring and an allreduce right on every rank.
    MPI ranks 2 and 3 name mpi-allreduce-1 as their processor: Open MPI's
    daemon for that host ran in rank 1's UTS namespace, which only a launch
    through the wrapper (and the head's launch socket) gives it."""
    assert allreduce_results(mpi.lines("mpi-allreduce")) == communicated("mpi-allreduce", 2, 2), mpi
    assert len(mpi.lines("mpi-allreduce")) == 4, mpi


def test_openmpi_implementation_runs_the_program_under_mpirun(mpi):
    """implementation openmpi, the vendor's way: the runtime puts mpirun in
    front of the per-rank program; the ranks communicate."""
    assert allreduce_results(mpi.lines("mpi-vendor")) == communicated("mpi-vendor", 2, 2), mpi
    assert len(mpi.lines("mpi-vendor")) == 4, mpi


def test_failing_mpi_rank_fails_the_job(mpi):
    """MPI rank 3 exits 3 before MPI_Init: mpirun aborts the run and passes
    the status on; the job fails with it, Open MPI's explanation in the log."""
    log = mpi.log("mpi-rank-fails")
    assert "MPI rank 3 on mpi-rank-fails-1 fails" in log.splitlines(), mpi
    assert "1 process returned\na non-zero exit code" in log, mpi
    assert "allreduce rank" not in log, mpi


def test_no_mpi_process_is_left(mpi):
    """No rank, orted, mpirun, wrapper or launcher of any MPI job."""
    assert mpi.state == lj.cleaned(mpi.state, mpi.jobs), mpi.state
