"""A detached run on the cluster (README "Long runs"): submitted with
-e fuzz_multinode_detach=true it returns at once and runs in the
background, a 2-node job and a 1-node job at the same time (the workflow
runner, each job in a playbook of its own); `fuzz.multinode.cancel` stops
it as Ctrl-C would: its record says CANCELED and by whom, and nothing of
it is left on any node."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from workflow_run import NO_PROCESSES, NODES, PROJECT, processes_on_all_nodes  # noqa: E402

HELD = """\
version: v4
jobs:
  held-pair:
    image: {uri: docker://alpine:3.20}
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME holds"; sleep 1000'
    multinode:
      nodes: 2
      implementation: generic
  held-one:
    image: {uri: docker://alpine:3.20}
    command: [/bin/sh, -c, 'echo "held-one holds"; sleep 1000']
"""


def registered_anywhere():
    return {node: jobs for node, jobs in ((node, node_runtime.show(node)["jobs"]) for node in NODES) if jobs}


def test_a_detached_run_is_canceled_and_leaves_nothing_on_any_node(tmp_path):
    fuzzfile = tmp_path / "held.yml"
    fuzzfile.write_text(HELD)
    runs = tmp_path / "runs"
    argv, env = user_playbook.playbook(fuzzfile, tmp_path / "logs",
                                       extra_vars={"fuzz_multinode_detach": "true", "fuzz_multinode_runs_dir": runs})
    started = time.monotonic()
    submitted = subprocess.run(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=120, check=False)
    assert submitted.returncode == 0 and time.monotonic() - started < 60, submitted.stdout[-6000:]
    run = re.search(r"run (\S+) submitted in the background", submitted.stdout).group(1)
    state_file = runs / run / "state.json"
    deadline = time.monotonic() + 240
    while {entry["state"] for entry in json.loads(state_file.read_text())["jobs"].values()} != {"RUNNING"} \
            or "holds" not in "".join(path.read_text() for path in (tmp_path / "logs").glob("*.log")):
        assert time.monotonic() < deadline, json.loads(state_file.read_text())
        time.sleep(0.5)
    canceled = subprocess.run([argv[0], "fuzz.multinode.cancel", "-e", "run=" + run,
                               "-e", "fuzz_multinode_runs_dir=%s" % runs], cwd=PROJECT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
    assert canceled.returncode == 0, canceled.stdout[-6000:]
    state = json.loads(state_file.read_text())
    assert state["state"] == "CANCELED" and "@" in state["canceled_by"], state
    assert {name: entry["state"] for name, entry in state["jobs"].items()} == {
        "held-pair": "CANCELED", "held-one": "CANCELED"}, state
    assert processes_on_all_nodes() == NO_PROCESSES
    assert registered_anywhere() == {}
