"""Detached runs on the cluster (README "Long runs"): submitted with
-e fuzz_multinode_detach=true a run returns at once and runs in the
background, a 2-node job and a 1-node job at the same time (the workflow
runner, each job in a playbook of its own); `fuzz.multinode.cancel` stops
it as Ctrl-C would: its record says CANCELED and by whom, and nothing of
it is left on any node. A detached run outlives its terminal (SIGHUP,
then kill), two at once stay apart; a run whose controller process is
killed (kill -9) is LOST, the nodes cancel its job on their own, and
`fuzz.multinode.resume` runs only what did not finish, its logs shown by
`fuzz.multinode.logs` as the resume printed them."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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


# Three jobs; count-b (2 nodes) waits forever the first time it runs and
# finishes the second: the counter in the persistent volume says how often
# each job ran.
COUNTED = """\
version: v4
volumes:
  keep:
    reference: volume://user/persistent/fmn-cluster-resume
jobs:
  count-a:
    image: {uri: docker://alpine:3.20}
    mounts: {/keep: keep}
    command: [/bin/sh, -c, "echo a >>/keep/counter; echo count-a counted"]
  count-b:
    image: {uri: docker://alpine:3.20}
    depends-on: [{name: count-a, status: FINISHED}]
    mounts: {/keep: keep}
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      echo b >>/keep/counter
      if [ "$(grep -c b /keep/counter)" -ge 2 ]; then
        exec_all 'echo "$HOSTNAME counts"'
      else
        exec_all 'echo "$HOSTNAME waits"; exec sleep 1000'
      fi
    multinode: {nodes: 2, implementation: generic}
  count-c:
    image: {uri: docker://alpine:3.20}
    depends-on: [{name: count-b, status: FINISHED}]
    mounts: {/keep: keep}
    command: [/bin/sh, -c, "echo c >>/keep/counter; echo count-c counted"]
"""
# A run beside it, at the same time: its rank sees none of the other run's
# processes (each run has a PID namespace of its own on a node).
APART = """\
version: v4
jobs:
  apart:
    image: {uri: docker://alpine:3.20}
    command: [/bin/sh, -c, 'sleep 2; echo "apart in $FB_WORKFLOW_ID sees $(ps -o comm | grep -c sleep) sleeps"']
"""
# Where the nodes' shared volume root is on this machine (molecule.yml).
VOLUMES = Path("/var/tmp/fmn-workflow-volumes")
SETTINGS = {"fuzz_multinode_controller_timeout": 10}


def submit(tmp_path, name, text, runs):
    """run-job.yml -e fuzz_multinode_detach=true from a terminal of its
    own, which goes (SIGHUP to its session, then kill) as soon as the run
    id is printed: (run id, argv, environment)."""
    fuzzfile = tmp_path / (name + ".yml")
    fuzzfile.write_text(text)
    argv, env = user_playbook.playbook(fuzzfile, tmp_path / name, extra_vars=dict(
        SETTINGS, fuzz_multinode_detach="true", fuzz_multinode_runs_dir=runs))
    printed = tmp_path / (name + ".out")
    with printed.open("w") as out:
        terminal = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: "submitted in the background" in printed.read_text() or terminal.poll() is not None, 120)
    for signum in (signal.SIGHUP, signal.SIGKILL):
        try:
            os.killpg(terminal.pid, signum)
        except ProcessLookupError:
            pass
    terminal.wait()
    found = re.search(r"run (\S+) submitted in the background", printed.read_text())
    assert found, printed.read_text()[-6000:]
    return found.group(1), argv, env


def state_of(runs, run):
    return json.loads((runs / run / "state.json").read_text())


def job_states(runs, run):
    return {name: entry["state"] for name, entry in state_of(runs, run)["jobs"].items()}


def wait_for(what, within):
    deadline = time.monotonic() + within
    while not what():
        assert time.monotonic() < deadline, "not within %d s" % within
        time.sleep(0.5)


def collection_playbook(argv, env, name, *extra):
    done = subprocess.run([argv[0], "fuzz.multinode." + name] + list(extra), cwd=PROJECT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=400, check=False)
    return done.returncode, done.stdout


def test_two_detached_runs_at_once_stay_apart_and_a_killed_one_is_lost_then_resumed(tmp_path):
    shutil.rmtree(VOLUMES / "persistent" / "fmn-cluster-resume", ignore_errors=True)
    runs = tmp_path / "runs"
    counted, argv, env = submit(tmp_path, "counted", COUNTED, runs)
    in_runs = ("-e", "run=" + counted, "-e", "fuzz_multinode_runs_dir=%s" % runs)
    try:
        log = tmp_path / "counted" / "count-b.log"
        # Its terminal is gone; the run goes on.
        wait_for(lambda: (job_states(runs, counted).get("count-b") == "RUNNING" and log.exists()
                          and log.read_text(errors="replace").count(" waits") == 2), 240)
        rc, status = collection_playbook(argv, env, "status", *in_runs)
        assert rc == 0 and "run %s (counted): RUNNING" % counted in status, status
        assert re.search(r"^count-a +FINISHED ", status, re.M) and re.search(r"^count-b +RUNNING ", status, re.M) \
            and re.search(r"^count-c +WAITING ", status, re.M), status
        apart, _unused, _unused = submit(tmp_path, "apart", APART, runs)
        wait_for(lambda: state_of(runs, apart)["state"] != "RUNNING", 240)
        assert state_of(runs, apart)["state"] == "FINISHED", state_of(runs, apart)
        assert (tmp_path / "apart" / "apart.log").read_text() == "apart in %s sees 0 sleeps\n" % apart
        assert job_states(runs, counted)["count-b"] == "RUNNING"  # untouched by the other run
        # The controller dies: kill -9 of the background runner and its playbook.
        for entry in state_of(runs, counted)["owner"]:
            try:
                os.killpg(os.getpgid(entry["pid"]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc, status = collection_playbook(argv, env, "status", *in_runs)
        assert rc == 0 and "run %s (counted): LOST" % counted in status, status
        # The head cancels the job once the controller is gone for its timeout.
        wait_for(lambda: processes_on_all_nodes() == NO_PROCESSES and registered_anywhere() == {}, 120)
        resume = ["-i", os.environ["MOLECULE_INVENTORY_FILE"], "-e", "log_dir=%s" % (tmp_path / "resumed")]
        resume += [word for item in SETTINGS.items() for word in ("-e", "%s=%s" % item)]
        rc, resumed = collection_playbook(argv, env, "resume", *(list(in_runs) + resume))
        assert rc == 0, resumed[-6000:]
        assert (VOLUMES / "persistent" / "fmn-cluster-resume" / "counter").read_text() == "a\nb\nb\nc\n"
        assert job_states(runs, counted) == {"count-a": "SKIPPED", "count-b": "FINISHED", "count-c": "FINISHED"}
        assert state_of(runs, counted)["state"] == "FINISHED"
        assert sorted(path.name for path in (tmp_path / "resumed").glob("*.*")) == [
            "count-b.log", "count-c.log", "report.html"]
        # logs shows each job as the run printed it: count-a's from its first
        # run, count-b's from the resumed one, which printed it here.
        rc, shown = collection_playbook(argv, env, "logs", *in_runs)
        assert rc == 0, shown
        assert "count-a counted" in shown and "count-c counted" in shown, shown
        printed = [line for line in resumed.splitlines() if line.startswith("[count-b] ")]
        assert sorted(line for line in shown.splitlines() if line.startswith("[count-b] ")) == sorted(printed)
        assert sorted(printed) == ["[count-b] count-b-0 counts", "[count-b] count-b-1 counts"], resumed[-6000:]
        assert processes_on_all_nodes() == NO_PROCESSES
        assert registered_anywhere() == {}
    finally:  # a test that failed halfway leaves nothing running for the next ones
        if state_of(runs, counted)["state"] == "RUNNING":
            collection_playbook(argv, env, "cancel", *in_runs)
