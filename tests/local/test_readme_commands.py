"""The README's first command, exactly as a new user types it at the top of
the checkout: `scripts/run-example examples/generic-multinode-helper.yml`
sets up what it needs and runs the example in local mode, showing the job's
lines as they come and the summary, and saving the log in ./fuzz-logs."""

import os
import subprocess

import local_jobs as lj

LINES = ["generic-multinode-helper-0 is the head node", "generic-multinode-helper-1 is a worker node"]
BARE_HOST = ("fuzz.multinode: job generic-multinode-helper runs on the bare host: this machine "
             "has no Podman (/usr/bin/podman), so image docker://mirror.gcr.io/library/alpine:3.16 "
             "is not used")


def test_run_example_runs_the_helper_example_locally():
    log = lj.REPO / "fuzz-logs" / "generic-multinode-helper.log"
    if log.exists():
        log.unlink()  # a log of an earlier run must not pass for this one's
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "MOLECULE_", "PY_COLORS", "FUZZ_MULTINODE_"))}
    env["ANSIBLE_NOCOLOR"] = "1"
    proc = subprocess.run(["scripts/run-example", "examples/generic-multinode-helper.yml"],
                          cwd=lj.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=lj.PLAYBOOK_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-8000:]
    # A machine without Podman (a fresh one) runs the example on the bare
    # host, and the job log's first line says so; with Podman it runs in
    # the example's image.
    expected = LINES
    if not os.access("/usr/bin/podman", os.X_OK):
        expected = [BARE_HOST] + LINES
    assert log.read_text().splitlines() == expected
    for line in LINES:
        assert "[generic-multinode-helper] " + line in proc.stdout, proc.stdout[-8000:]
    assert "job generic-multinode-helper FINISHED after" in proc.stdout, proc.stdout[-8000:]
