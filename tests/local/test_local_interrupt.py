"""Ctrl-C of a local run (the README's first command, on the user's own
machine): the job stops, its log says why, and nothing of it is left
behind, although no play comes to clean up after an interrupted one: no
process, no rank host names in /etc/hosts, no job directory (the job's spec,
secrets and pinned namespaces)."""

import os
import signal
import subprocess
import time

import local_jobs as lj

JOB = "local-interrupted"
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
      exec_all 'echo "$HOSTNAME sleeps"; sleep 1000'
    multinode:
      nodes: 2
      implementation: generic
""" % JOB


def test_ctrl_c_stops_the_job_and_leaves_nothing_of_it_on_this_machine(workdir):
    directory = workdir / "interrupt"
    directory.mkdir()
    fuzzfile = directory / "interrupted.yml"
    fuzzfile.write_text(FUZZFILE)
    argv, env = lj.playbook(fuzzfile, directory / "logs")
    out_path = directory / "interrupted.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=lj.REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        shown = "[%s] %s-1 sleeps" % (JOB, JOB)  # both ranks run
        deadline = time.monotonic() + 180
        while shown not in out_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
            time.sleep(0.5)
        assert lj.machine_state([JOB])["job_dirs"] == [JOB]  # what must go
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
        rc = proc.wait(timeout=120)
        output = out_path.read_text()
        state = lj.machine_state([JOB])
        assert rc != 0, output[-6000:]
        assert state == lj.cleaned(state, [JOB]), output[-6000:]
        log = (directory / "logs" / (JOB + ".log")).read_text().splitlines()
        assert ("multinode-ssh-wrapper: job %s canceled by the controller: "
                "the playbook was interrupted (SIGINT)" % JOB) in log, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        lj.unregister([JOB])
