"""The quoting scenario's held job (tests/fuzzfiles/quoting/held.yml),
started with run-job.yml as a user starts it and kept running while a test
module makes calls inside it; shared by the modules that need it
(test_round_trip.py, test_wrapper_paths.py)."""

import contextlib
import os
import subprocess
import time
from pathlib import Path

import fuzz_playbook

JOB = "quoting-held"
PIDFILE = "/tmp/quoting-held.pid"    # held.yml's rank 0 writes its pid here
STOPFILE = "/tmp/quoting-held.stop"  # and ends when this exists


def _docker_exec(*argv):
    return subprocess.run(["docker", "exec", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)


def _rank0_pid(head, playbook, timeout):
    """The pid held.yml's rank 0 wrote on the head (a whole line), or None
    when it did not within `timeout` seconds or the playbook ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and playbook.poll() is None:
        found = _docker_exec(head, "cat", PIDFILE).stdout.decode(errors="replace")
        if found.endswith("\n") and found.strip():
            return found.strip()
        time.sleep(0.2)
    return None


@contextlib.contextmanager
def held_run(nodes, logs, timeout=120):
    """Run the held job on `nodes` (the first is the head), its logs fetched
    into `logs`; yields the pid of its rank 0 script on the head once it
    runs. On exit it releases the job and checks that the run ended well:
    exit status 0 and "released" at the end of the job log."""
    for node in nodes:
        _docker_exec(node, "rm", "-f", PIDFILE, STOPFILE)
    project = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
    argv, env = fuzz_playbook.playbook(project / "tests" / "fuzzfiles" / "quoting" / "held.yml", logs)
    playbook = subprocess.Popen(argv, cwd=project, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid = _rank0_pid(nodes[0], playbook, timeout)
    try:
        assert pid, "%s did not start:\n%s" % (JOB, playbook.stdout.read() if playbook.poll() is not None else "")
        yield pid
    finally:
        _docker_exec(nodes[0], "touch", STOPFILE)
        output, _unused = playbook.communicate(timeout=120)
        assert playbook.returncode == 0, output
        assert (logs / (JOB + ".log")).read_text().endswith("released\n")
