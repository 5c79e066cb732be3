"""The README's first command, exactly as a new user types it at the top of
the checkout: `scripts/run-example examples/generic-multinode-helper.yml`
sets up what it needs and runs the example in local mode, showing the job's
lines as they come and the summary, and saving the log in ./fuzz-logs."""

import os
import re
import subprocess

import local_jobs as lj

LINES = ["generic-multinode-helper-0 is the head node", "generic-multinode-helper-1 is a worker node"]


def test_run_example_runs_the_helper_example_locally():
    log = lj.REPO / "fuzz-logs" / "generic-multinode-helper.log"
    if log.exists():
        log.unlink()  # a log of an earlier run must not pass for this one's
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "MOLECULE_", "PY_COLORS", "FUZZ_MULTINODE_"))}
    env["ANSIBLE_NOCOLOR"] = "1"
    proc = subprocess.run(["scripts/run-example", "examples/generic-multinode-helper.yml"],
                          cwd=lj.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=lj.PLAYBOOK_TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert log.read_text().splitlines() == LINES
    for line in LINES:
        assert "[generic-multinode-helper] " + line in proc.stdout, proc.stdout[-8000:]
    assert "job generic-multinode-helper FINISHED after" in proc.stdout, proc.stdout[-8000:]
    # No registry serves the example's image here: it says it runs on this
    # machine's own software, and the summary says where it ran.
    assert "run-example: running examples/generic-multinode-helper.yml on this machine's own software" \
        in proc.stdout, proc.stdout[-8000:]
    assert re.search(r"job generic-multinode-helper FINISHED after [0-9.]+ s, on the bare host", proc.stdout), \
        proc.stdout[-8000:]
