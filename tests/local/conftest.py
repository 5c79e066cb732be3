"""The local-mode tier: the conformance scenarios' behaviour checks, run on
this machine by run-job.yml with no inventory (every rank in its own UTS
namespace), as root. Each session fixture below runs one workflow once, on
first use, for every test that looks at it (local_jobs.py says how)."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import local_jobs as lj


@pytest.fixture(scope="session", autouse=True)
def as_root():
    """Local mode needs root (UTS namespaces, /etc/hosts, the job user)."""
    if os.geteuid() != 0:
        pytest.fail("tests/local runs jobs on this machine and must run as root", pytrace=False)


@pytest.fixture(scope="session")
def workdir(request):
    """The session's Fuzzfiles, playbook outputs (<name>.out) and fetched
    logs: a directory of its own (pytest's basetemp is shared with every
    other pytest run of root on the machine, which prunes all but the
    newest three), removed at the end unless a test failed."""
    directory = Path(tempfile.mkdtemp(prefix="fmn-local-tests-"))
    lj.RUNS_DIR = directory / "runs"
    yield directory
    if request.session.testsfailed or os.environ.get("FMN_LOCAL_KEEP"):
        print("\ntests/local: the runs' Fuzzfiles, outputs and logs are kept in %s" % directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def combined(workdir, name, sources, replace=None):
    directory = workdir / name
    directory.mkdir()
    return lj.combine(directory / (name + ".yml"), sources, replace), directory / "logs"


@pytest.fixture(scope="session")
def mpi_bin():
    """Open MPI programs of the node image, compiled with this machine's
    mpicc into a directory the job user can read and execute (pytest's own
    temporary directories are private to root)."""
    directory = Path(tempfile.mkdtemp(prefix="fmn-local-mpi-", dir="/var/tmp"))
    try:
        directory.chmod(0o755)
        for program in ("mpi_hello_world", "mpi_allreduce"):
            subprocess.run(["mpicc", "-O2", "-o", str(directory / program),
                            str(lj.REPO / "scripts" / "node-image" / (program + ".c"))], check=True)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# Each run-job.yml run costs some 10 s of Ansible before its first job and
# about 5 s per job, so the tier makes two workflow runs (plus the held job
# of test_local_security.py): one of jobs that must all finish, one with the
# jobs that must fail. Each test module looks at its own share of a run.
BASICS = [  # the spec's helper and script examples, rank names on 4 ranks, a task array
    (lj.EXAMPLES / "generic-multinode-helper.yml", None),
    (lj.EXAMPLES / "generic-multinode-script.yml", None),
    (lj.LOCAL_FUZZFILES / "ranks.yml", None),
    (lj.FUZZFILES / "workflow" / "task-array.yml", None),
]
QUOTING = [  # molecule/quoting's jobs (3 ranks), molecule/streams' edges jobs (5 ranks)
    # quoting-dash only: its twin quoting-busybox differs in the head's
    # shell, which tests/unit checks the helper under; the transport is the same.
    (lj.FUZZFILES / "quoting" / "helper.yml", ["quoting-dash"]),
    (lj.FUZZFILES / "quoting" / "command-mode.yml", None),
    (lj.FUZZFILES / "streams" / "edges.yml", None),
]
FAILURES = [  # molecule/failure's failing jobs and those that leave processes behind
    (lj.FUZZFILES / "failure" / "worker-fails-rankn.yml", None),
    (lj.FUZZFILES / "failure" / "worker-fails-bare.yml", None),
    (lj.FUZZFILES / "failure" / "head-fails.yml", None),
    (lj.FUZZFILES / "failure" / "wrapper-unknown-host.yml", None),
    (lj.FUZZFILES / "failure" / "term-ignored-ends.yml", None),
    (lj.FUZZFILES / "failure" / "term-ignored-fails.yml", None),
]
MPI = [  # the spec's Open MPI example, and Open MPI jobs for this machine
    (lj.EXAMPLES / "generic-multinode.yml", None),
    (lj.LOCAL_FUZZFILES / "mpi.yml", None),
]

# The kill grace period (seconds from SIGTERM to SIGKILL) of the failing
# run: short, so that the processes ignoring SIGTERM do not take 10 s each.
FAILURE_KILL_GRACE = 2


def jobs_of(sources):
    return [job for path, names in sources for job in (names or lj.job_names(path))]


@pytest.fixture(scope="session")
def finishing(workdir):
    """The jobs that must all finish, as one workflow."""
    fuzzfile, logs = combined(workdir, "finishing", BASICS + QUOTING)
    return lj.run_job(fuzzfile, logs)


@pytest.fixture(scope="session")
def failing(workdir, mpi_bin):
    """The failing jobs and the MPI jobs (one fails), as one workflow: every
    job runs, each fails or finishes on its own. The MPI programs are the
    ones compiled on this machine, where the node image has its own."""
    fuzzfile, logs = combined(workdir, "failing", FAILURES + MPI,
                              replace={"/usr/lib64/openmpi/bin": str(mpi_bin), "/fmn-local/mpi-bin": str(mpi_bin)})
    return lj.run_job(fuzzfile, logs, {"fuzz_multinode_kill_grace": FAILURE_KILL_GRACE})


@pytest.fixture(scope="session")
def basics(finishing):
    return lj.Part(finishing, jobs_of(BASICS))


@pytest.fixture(scope="session")
def quoting(finishing):
    return lj.Part(finishing, jobs_of(QUOTING))


@pytest.fixture(scope="session")
def failures(failing):
    return lj.Part(failing, jobs_of(FAILURES))


@pytest.fixture(scope="session")
def mpi(failing):
    return lj.Part(failing, jobs_of(MPI))
