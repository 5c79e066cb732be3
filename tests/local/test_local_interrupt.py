"""Ctrl-C of a local run (the README's first command, on the user's own
machine): the job stops, its log says why, and nothing of it is left
behind, although no play comes to clean up after an interrupted one: no
process, no rank host names in /etc/hosts, no job directory (the job's spec,
secrets and pinned namespaces), and no ephemeral volume of its run (the
run ends with the job). The run's record says CANCELED, and why."""

import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

import local_jobs as lj

JOB = "local-interrupted"
FUZZFILE = """\
version: v4
volumes:
  scratch:
    use: ephemeral
jobs:
  %s:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    mounts:
      /scratch: scratch
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME" >"/scratch/$HOSTNAME"; echo "$HOSTNAME sleeps"; sleep 1000'
    multinode:
      nodes: 2
      implementation: generic
""" % JOB


def _ranks_running():
    """Both ranks' processes exist on this machine (the job has started,
    whatever the terminal has shown yet)."""
    names = " ".join(lj.job_processes([JOB])[JOB])
    return all("host name %s-%d" % (JOB, rank) in names for rank in (0, 1))


# When Ctrl-C comes: once the terminal has shown both ranks' output (the
# controller polls the job), or as soon as both ranks run, while the
# controller's start request is still waiting on the head for the job's end.
WHEN = {
    "after-output": lambda output: "[%s] %s-1 sleeps" % (JOB, JOB) in output,
    "at-start": lambda output: _ranks_running(),
}


@pytest.mark.parametrize("when", sorted(WHEN))
def test_ctrl_c_stops_the_job_and_leaves_nothing_of_it_on_this_machine(workdir, when):
    directory = workdir / ("interrupt-" + when)
    directory.mkdir()
    fuzzfile = directory / "interrupted.yml"
    fuzzfile.write_text(FUZZFILE)
    out_path = directory / "interrupted.out"
    volume_root = Path(tempfile.mkdtemp(prefix="fmn-local-interrupt-", dir="/var/tmp")) / "volumes"
    volume_root.parent.chmod(0o755)  # as test_local_volumes: a root the job user can reach
    proc = lj.start_playbook(fuzzfile, directory / "logs", out_path, {"fuzz_multinode_volume_root": volume_root})
    try:
        lj.wait_for_output(proc, out_path, WHEN[when], 180)
        assert os.path.exists(lj.registry.job_dir(JOB))  # what must go
        assert len(os.listdir(volume_root / "ephemeral")) == 1  # the run's
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
        rc = proc.wait(timeout=120)
        output = out_path.read_text()
        state = lj.machine_state([JOB])
        assert rc != 0, output[-6000:]
        assert state == lj.cleaned(state, [JOB]), output[-6000:]
        assert os.listdir(volume_root / "ephemeral") == [], output[-6000:]
        log = (directory / "logs" / (JOB + ".log")).read_text().splitlines()
        assert ("multinode-ssh-wrapper: job %s canceled by the controller: "
                "the playbook was interrupted (SIGINT)" % JOB) in log, log
        run = re.search(r"run (\d{8}T\d{6}Z-[0-9a-f]{6})", output).group(1)
        record = json.loads((lj.RUNS_DIR / run / "state.json").read_text())
        assert (record["state"], record["canceled_by"], record["jobs"][JOB]["state"]) == (
            "CANCELED", "the playbook was interrupted (SIGINT)", "CANCELED"), record
    finally:
        lj.end_playbook(proc, [JOB])
        shutil.rmtree(volume_root.parent, ignore_errors=True)
