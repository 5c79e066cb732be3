"""The same job started twice at once on this machine: runs are isolated.
Exactly one run runs the job, to its end, with its own complete log and
every rank seeing that run's id as FB_WORKFLOW_ID; the other is refused
before it touches anything, naming the run in its way, fetches no log and
leaves the first run's job alone. (The claim logic: tests/unit/test_runs.py;
on a real cluster: molecule/failure.)"""

import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import local_jobs as lj

JOB = "local-twice"
# Each rank runs until the test puts the file GO there (at most 200 s), so
# the run that runs the job is sure to run while the other one starts.
FUZZFILE = """\
version: v4
jobs:
  %s:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME run=$FB_WORKFLOW_ID"
        i=0; while [ ! -e GO ] && [ $i -lt 1000 ]; do sleep 0.2; i=$((i + 1)); done
        echo "$HOSTNAME done"'
    multinode:
      nodes: 2
      implementation: generic
"""
RUN_ID = r"\d{8}T\d{6}Z-[0-9a-f]{6}"


def run_id(output):
    """The run id the playbook showed (in the name of the task registering the job)."""
    found = set(re.findall(r"Register the job on its nodes for run (%s)\]" % RUN_ID, output))
    assert len(found) == 1, output[-6000:]
    return found.pop()


def test_the_same_job_started_twice_at_once_runs_once_and_refuses_the_second(workdir):
    go = Path(tempfile.mkdtemp(prefix="fmn-twice-", dir="/var/tmp"))
    go.chmod(0o755)
    started, runs = [], []
    try:
        for name in ("first", "second"):
            directory = workdir / ("twice-" + name)
            directory.mkdir()
            fuzzfile = directory / "twice.yml"
            fuzzfile.write_text(FUZZFILE.replace("GO", str(go / "go")) % JOB)
            argv, env = lj.playbook(fuzzfile, directory / "logs")
            out = open(directory / "twice.out", "w+")
            proc = subprocess.Popen(argv, cwd=lj.REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            started.append((fuzzfile, directory / "logs", proc, out, time.monotonic()))
        # The refused run ends first; then the other may end too.
        deadline = time.monotonic() + lj.PLAYBOOK_TIMEOUT
        while all(proc.poll() is None for _unused, _unused, proc, *_rest in started) and time.monotonic() < deadline:
            time.sleep(0.5)
        (go / "go").touch()
        for fuzzfile, logs, proc, out, began in started:
            rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
            out.seek(0)
            runs.append(lj.Run(fuzzfile, logs, rc, out.read(), time.monotonic() - began,
                               socket.gethostname()))
    finally:
        (go / "go").touch()
        for _unused, _unused, proc, out, _unused in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            out.close()
        (go / "go").unlink()
        go.rmdir()
    finished = [run for run in runs if run.rc == 0]
    refused = [run for run in runs if run.rc != 0]
    assert len(finished) == 1 and len(refused) == 1, runs
    (ran,), (other,) = finished, refused
    ran_id, other_id = run_id(ran.output), run_id(other.output)
    assert ran_id != other_id
    assert other.failure() == (
        "job %s is already running on localhost as run %s; run %s does not start it again "
        "(wait for that run to end)" % (JOB, ran_id, other_id)), other
    # The run that ran: its whole log, both ranks, the run's id everywhere.
    log = ran.lines(JOB)
    for rank in (0, 1):
        assert "%s-%d run=%s" % (JOB, rank, ran_id) in log, ran
        assert "%s-%d done" % (JOB, rank) in log, ran
    assert "job %s FINISHED" % JOB in " ".join(ran.output.split()), ran
    # The refused run fetched nothing of the other's.
    assert other.log(JOB) == "" and other.rank_log(JOB, 1) is None, other
    state = lj.machine_state([JOB])
    assert state == lj.cleaned(state, [JOB])
