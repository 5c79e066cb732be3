"""openmpi/ompi and mpich jobs: rank 0 runs the job's command (or script)
under the MPI launcher that rank_plan put in the spec, found on the job's
PATH like any command (fuzzfile-reference.md section 3).

The spec comes from the real plan_job, and the runtime's Supervisor really
starts rank 0; only the launcher is a stand-in `mpirun`/`mpiexec` on the
job's PATH that writes the argv it got, so each test sees exactly what the
real launcher would be given (the Molecule scenario mpi runs the real Open
MPI and MPICH)."""

import os
import pwd
from pathlib import Path

import pytest
from multinode_runtime import registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.sandbox import place_job, remove_sandbox
from multinode_runtime.spec import JobSpec
from multinode_runtime.supervisor import Supervisor

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import Job
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_job

WRAPPER = "/multinode/ssh-wrapper"
USER = pwd.getpwuid(os.getuid()).pw_name
# Prints its argv ($0 included), one word per line, framed by markers.
STAND_IN = '#!/bin/sh\necho "argv0=$0"\nfor word in "$@"; do echo "arg=$word"; done\n'


@pytest.fixture
def head(tmp_path, runtime_state):
    """Runs rank 0 of a job the way `multinode-runtime head` does, in a
    job directory under tmp_path; returns (argv rank 0 ran, bin dir)."""
    bindir = tmp_path / "mpi" / "bin"
    bindir.mkdir(parents=True)
    for name in ("mpirun", "mpiexec"):
        (bindir / name).write_text(STAND_IN)
        (bindir / name).chmod(0o755)

    def run(path=None, **fields):
        base = dict(name="hello", image_uri="docker://alpine", nodes=2,
                    env=[("PATH", "%s:/usr/bin:/bin" % bindir if path is None else path)])
        base.update(fields)
        spec = plan_job(Job(**base), [{"node": "n%d" % i, "address": "10.0.0.%d" % i}
                                      for i in range(1, base["nodes"] + 1)],
                        user=USER, wrapper_path=WRAPPER, kill_grace=1, execution="host")
        directory = Path(registry.job_dir(spec["job"]))
        directory.mkdir(parents=True)
        if spec["mode"] == "script":  # as `prepare` writes it on every node
            registry.write_file(str(directory / "script"), spec["script"], 0o755)
        place_job(JobSpec.from_dict(spec), "n1")  # the run's sandbox, as `prepare` makes it
        log = tmp_path / "job.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            supervisor = Supervisor(JobSpec.from_dict(spec))
            child = supervisor.start_rank0(fd)
            assert child.wait(timeout=30) == 0
            supervisor.rank0_output.finish()  # rank 0's lines are in the log
        finally:
            os.close(fd)
            remove_sandbox(spec["job"])
        lines = log.read_text().splitlines()
        return [lines[0][len("argv0="):]] + [line[len("arg="):] for line in lines[1:]]

    return run, bindir


def openmpi(hostlist, total):
    return ["-H", hostlist, "--mca", "plm_rsh_agent", WRAPPER, "-np", str(total)]


def mpich(hostlist, total):
    return ["-hosts", hostlist, "-launcher", "ssh", "-launcher-exec", WRAPPER, "-n", str(total)]


@pytest.mark.parametrize("implementation", ["openmpi", "ompi"])
def test_openmpi_command_runs_under_mpirun_from_the_job_path(head, implementation):
    run, bindir = head
    argv = run(implementation=implementation, procs_per_node=2,
               command=["/bin/sh", "-c", "mpi_hello_world"], args=["$RANK", "a b"])
    assert argv == [str(bindir / "mpirun")] + openmpi("hello-0:2,hello-1:2", 4) + [
        "/bin/sh", "-c", "mpi_hello_world", "0", "a b"]


def test_mpich_command_runs_under_mpiexec_from_the_job_path(head):
    run, bindir = head
    argv = run(implementation="mpich", nodes=3, cores=2, command=["mpi_hello_world"])
    assert argv == [str(bindir / "mpiexec")] + mpich("hello-0:2,hello-1:2,hello-2:2", 6) + [
        "mpi_hello_world"]


@pytest.mark.parametrize("implementation, program, options", [
    ("openmpi", "mpirun", openmpi("hello-0:1,hello-1:1", 2)),
    ("mpich", "mpiexec", mpich("hello-0:1,hello-1:1", 2)),
])
def test_script_with_interpreter_line_runs_by_its_path(head, tmp_path, implementation, program,
                                                       options):
    """The launcher executes the script file (the same path on every node)
    with the args."""
    run, bindir = head
    argv = run(implementation=implementation, script="#!/bin/sh\nmpi_hello_world\n",
               args=["$MULTINODE_TOTAL_SLOTS", "x"])
    script = str(tmp_path / "run" / "jobs" / "hello" / "script")
    assert argv == [str(bindir / program)] + options + [script, "2", "x"]


def test_script_without_interpreter_line_runs_with_sh(head, tmp_path):
    """A script without `#!` is a /bin/sh script (the Fuzzfile reference)."""
    run, bindir = head
    argv = run(implementation="openmpi", script="mpi_hello_world\n", args=["x"])
    script = str(tmp_path / "run" / "jobs" / "hello" / "script")
    assert argv == [str(bindir / "mpirun")] + openmpi("hello-0:1,hello-1:1", 2) + [
        "/bin/sh", script, "x"]


def test_generic_jobs_run_their_command_as_given(head, tmp_path):
    run, bindir = head
    (bindir / "hello").write_text(STAND_IN)
    (bindir / "hello").chmod(0o755)
    argv = run(implementation="generic", command=["hello", "$RANK"])
    assert argv == [str(bindir / "hello"), "0"]


@pytest.mark.parametrize("implementation, program, mpi", [
    ("openmpi", "mpirun", "Open MPI"), ("ompi", "mpirun", "Open MPI"),
    ("mpich", "mpiexec", "MPICH")])
def test_a_missing_launcher_fails_the_job_naming_the_implementation(head, implementation,
                                                                    program, mpi):
    run, bindir = head
    with pytest.raises(RuntimeFailure) as info:
        run(path=str(bindir / "empty"), implementation=implementation, command=["mpi_hello_world"])
    assert str(info.value) == (
        "rank 0 (hello-0): command not found: %s (multinode.implementation %s runs the job "
        "with %s: put %s's bin directory on PATH in the job's env)"
        % (program, implementation, program, mpi))
