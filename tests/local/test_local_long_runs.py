"""Long runs (README "Long runs"): every run leaves a record; a detached
run survives the end of the terminal and of the playbook that submitted
it; the collection's playbooks runs, status, logs and cancel look at it
and stop it; a run whose controller process was killed is LOST and
`resume` runs only what did not finish. Tiny workflows with short sleeps."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import local_jobs as lj

CHAIN = """\
version: v4
jobs:
  long-a:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME starts"; sleep 6; echo "$HOSTNAME ends"'
    multinode:
      nodes: 2
      implementation: generic
  long-b:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    depends-on:
      - name: long-a
        status: FINISHED
    command: [/bin/sh, -c, "echo long-b after long-a"]
"""

HELD = """\
version: v4
jobs:
  long-held:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME sleeps"; sleep 1000'
    multinode:
      nodes: 2
      implementation: generic
"""

# count-b waits forever the first time it runs, and finishes the second:
# the counter in the persistent volume says how often each job ran.
COUNTED = """\
version: v4
volumes:
  keep:
    reference: volume://user/persistent/fmn-local-resume
jobs:
  count-a:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    mounts:
      /keep: keep
    command: [/bin/sh, -c, "echo a >>/keep/counter; echo count-a counted"]
  count-b:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    depends-on:
      - name: count-a
        status: FINISHED
    mounts:
      /keep: keep
    command:
      - /bin/sh
      - -c
      - echo b >>/keep/counter; echo count-b runs; [ $(grep -c b /keep/counter) -ge 2 ] || exec sleep 1000
"""


@pytest.fixture(scope="module")
def runs_dir(workdir):
    """The tier's run records (every run of it: local_jobs.playbook)."""
    return lj.RUNS_DIR


def collection_playbook(name, runs_dir, extra=(), timeout=240):
    """ansible-playbook fuzz.multinode.NAME, as a user runs it from the
    checkout: (rc, output)."""
    argv, env = lj.playbook("-", "-")
    argv = [argv[0], "fuzz.multinode." + name, "-e", "fuzz_multinode_runs_dir=%s" % runs_dir] + list(extra)
    done = subprocess.run(argv, cwd=lj.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, check=False)
    return done.returncode, done.stdout


def submit(fuzzfile, logs, runs_dir, out_path, extra=None):
    """run-job.yml -e fuzz_multinode_detach=true, in a session of its own
    (a terminal's); (the process, its run id) once it printed the id."""
    variables = {"fuzz_multinode_detach": "true", "fuzz_multinode_runs_dir": runs_dir}
    variables.update(extra or {})
    proc = lj.start_playbook(fuzzfile, logs, out_path, variables)
    lj.wait_for_output(proc, out_path, lambda text: "submitted in the background" in text or proc.poll() is not None,
                       60)
    found = re.search(r"run (\S+) submitted in the background", out_path.read_text())
    assert found, out_path.read_text()[-6000:]
    return proc, found.group(1)


def state_of(runs_dir, run):
    return json.loads((Path(runs_dir) / run / "state.json").read_text())


def wait_for(what, within, every=0.3):
    deadline = time.monotonic() + within
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


def owners_alive(runs_dir, run):
    from ansible_collections.fuzz.multinode.plugins.module_utils import run_processes

    return [entry for entry in state_of(runs_dir, run)["owner"] if run_processes.process_alive(entry)]


def stop_background(runs_dir, run, jobs):
    """After a test: kill what is left of a background run (a test that
    failed halfway), and restore this machine."""
    for entry in owners_alive(runs_dir, run):
        try:
            os.killpg(os.getpgid(entry["pid"]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    lj.unregister(jobs)


def test_a_foreground_run_leaves_its_record(finishing, runs_dir):
    """The tier's big foreground workflow (the workflow runner's path):
    FINISHED, every job with its ranks (a task array's tasks), its logs."""
    run = re.search(r"workflow run (\S+):", finishing.output).group(1)
    record = runs_dir / run
    assert oct(record.stat().st_mode & 0o777) == "0o700"
    assert all(oct(path.stat().st_mode & 0o777) == "0o600" for path in record.iterdir() if path.is_file())
    state = state_of(runs_dir, run)
    assert state["state"] == "FINISHED", state
    assert sorted(state["jobs"]) == sorted(finishing.jobs)
    assert {entry["state"] for entry in state["jobs"].values()} == {"FINISHED"}
    ranks = state["jobs"]["ranks"]["ranks"]
    assert [(rank["rank"], rank["name"], rank["state"], rank["status"]) for rank in ranks] == [
        (number, "ranks-%d" % number, "exited", 0) for number in range(4)]
    assert state["jobs"]["ranks"]["log"] == str(finishing.logs / "ranks.log")
    assert (record / "fuzzfile.yml").read_bytes() == finishing.fuzzfile.read_bytes()
    tasks = state["jobs"]["sweep"]["ranks"]  # task-array.yml's task array
    assert state["jobs"]["sweep"]["task_array"] and tasks and all(task["task_id"] for task in tasks), tasks


def test_a_detached_run_outlives_its_terminal_and_shows_its_progress(workdir, runs_dir):
    directory = workdir / "detached"
    directory.mkdir()
    fuzzfile = directory / "chain.yml"
    fuzzfile.write_text(CHAIN)
    started = time.monotonic()
    proc, run = submit(fuzzfile, directory / "logs", runs_dir, directory / "submit.out")
    # The terminal goes: SIGHUP to its session's process group, then kill.
    for signum in (signal.SIGHUP, signal.SIGKILL):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
    proc.wait()
    assert time.monotonic() - started < 30
    assert wait_for(lambda: state_of(runs_dir, run)["jobs"].get("long-a", {}).get("state") == "RUNNING", 120), \
        state_of(runs_dir, run)
    rc, status = collection_playbook("status", runs_dir, ["-e", "run=" + run])
    assert rc == 0 and "run %s (chain): RUNNING" % run in status, status
    assert re.search(r"^long-a +RUNNING ", status, re.M) and re.search(r"^long-b +WAITING ", status, re.M), status
    rc, followed = collection_playbook("logs", runs_dir, ["-e", "run=" + run, "-e", "job=long-a", "-e", "follow=true"])
    assert rc == 0, followed
    assert wait_for(lambda: state_of(runs_dir, run)["state"] != "RUNNING", 120)
    rc, status = collection_playbook("status", runs_dir, ["-e", "run=" + run])
    assert rc == 0 and "run %s (chain): FINISHED" % run in status, status
    assert re.search(r"^long-a +FINISHED ", status, re.M) and re.search(r"^long-b +FINISHED ", status, re.M), status
    assert re.search(r"^  1 +long-a-1 +localhost +0 ", status, re.M), status
    # What logs showed, following the job, is what the run itself printed
    # of it (its ansible-runner stdout), line for line.
    stdout = next((runs_dir / run / "runner" / "artifacts").glob("*/stdout")).read_text()
    printed = [line for line in stdout.splitlines() if line.startswith("[long-a] ")]
    shown = [line for line in followed.splitlines() if line.startswith("[long-a] ")]
    assert shown == printed and "[long-a] long-a-0 ends" in shown, (shown, printed)
    rc, listed = collection_playbook("runs", runs_dir)
    assert re.search(r"^%s +chain +FINISHED " % re.escape(run), listed, re.M), listed
    assert wait_for(lambda: owners_alive(runs_dir, run) == [], 30), owners_alive(runs_dir, run)


def test_cancel_stops_a_detached_run_and_leaves_nothing(workdir, runs_dir):
    directory = workdir / "canceled"
    directory.mkdir()
    fuzzfile = directory / "held.yml"
    fuzzfile.write_text(HELD)
    proc, run = submit(fuzzfile, directory / "logs", runs_dir, directory / "submit.out")
    try:
        assert proc.wait(30) == 0
        assert wait_for(lambda: all("host name long-held-%d" % rank in " ".join(lj.job_processes(["long-held"])[
            "long-held"]) for rank in (0, 1)), 120), state_of(runs_dir, run)
        started = time.monotonic()
        rc, output = collection_playbook("cancel", runs_dir, ["-e", "run=" + run])
        assert rc == 0, output
        assert time.monotonic() - started < 60
        state = state_of(runs_dir, run)
        assert state["state"] == "CANCELED" and state["canceled_by"].startswith("root@"), state
        assert state["jobs"]["long-held"]["state"] == "CANCELED", state
        machine = lj.machine_state(["long-held"])
        assert machine == lj.cleaned(machine, ["long-held"]), output
        assert owners_alive(runs_dir, run) == []
        rc, output = collection_playbook("cancel", runs_dir, ["-e", "run=" + run])
        assert rc != 0 and "run %s is CANCELED since" % run in output and "nothing to cancel" in output, output
        assert "Traceback" not in output
    finally:
        lj.end_playbook(proc, ["long-held"])
        stop_background(runs_dir, run, ["long-held"])


def test_a_killed_run_is_lost_and_resume_runs_only_what_did_not_finish(workdir, runs_dir):
    directory = workdir / "resumed"
    directory.mkdir()
    fuzzfile = directory / "counted.yml"
    fuzzfile.write_text(COUNTED)
    base = Path(tempfile.mkdtemp(prefix="fmn-local-resume-", dir="/var/tmp"))
    base.chmod(0o755)  # a volume root the job user can reach
    counter = base / "volumes" / "persistent" / "fmn-local-resume" / "counter"
    settings = {"fuzz_multinode_volume_root": str(base / "volumes"), "fuzz_multinode_controller_timeout": 10}
    proc, run = submit(fuzzfile, directory / "logs", runs_dir, directory / "submit.out", settings)
    try:
        assert wait_for(lambda: lj.job_processes(["count-b"])["count-b"], 120), state_of(runs_dir, run)
        # The controller dies: kill -9 of the background runner and of its playbook.
        for entry in state_of(runs_dir, run)["owner"]:
            try:
                os.killpg(os.getpgid(entry["pid"]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc, status = collection_playbook("status", runs_dir, ["-e", "run=" + run])
        assert rc == 0 and "run %s (counted): LOST" % run in status, status
        assert re.search(r"^count-a +FINISHED ", status, re.M) and re.search(r"^count-b +LOST ", status, re.M), status
        # The head cancels the job once the controller is gone for the timeout.

        def clean():
            machine = lj.machine_state(["count-b"])
            return machine == lj.cleaned(machine, ["count-b"])
        assert wait_for(clean, 90), lj.machine_state(["count-b"])
        changed = directory / "changed.yml"
        changed.write_text(COUNTED.replace("echo count-b runs", "echo count-b runs again"))
        resume = ["-e", "run=" + run, "-e", "fuzz_multinode_execution=host", "-e", "log_dir=%s" % (directory / "logs2")]
        resume += [word for item in settings.items() for word in ("-e", "%s=%s" % item)]
        rc, output = collection_playbook("resume", runs_dir, resume + ["-e", "fuzzfile=%s" % changed])
        assert rc != 0 and "cannot be resumed with this Fuzzfile: job count-b changed since the run" in output, output
        assert "Traceback" not in output
        rc, output = collection_playbook("resume", runs_dir, resume)
        assert rc == 0, output
        assert counter.read_text() == "a\nb\nb\n"  # count-a once, count-b twice
        state = state_of(runs_dir, run)
        assert state["state"] == "FINISHED" and len(state["resumed"]) == 1, state
        assert state["jobs"]["count-a"]["state"] == "SKIPPED" and state["jobs"]["count-b"]["state"] == "FINISHED"
        assert (directory / "logs2" / "count-b.log").read_text() == "count-b runs\n"
        assert not (directory / "logs2" / "count-a.log").exists()
    finally:
        lj.end_playbook(proc, ["count-a", "count-b"])
        stop_background(runs_dir, run, ["count-a", "count-b"])
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("name, extra, message", [
    ("status", ["-e", "run=20260101T000000Z-000000"],
     "no run 20260101T000000Z-000000 in RUNS (`ansible-playbook fuzz.multinode.runs` lists the runs)"),
    ("logs", ["-e", "run=../etc"], "'../etc' is not a run id"),
    ("cancel", [], "which run? -e run=ID"),
    ("status", ["-e", "run=20260101T000000Z-c0ffee"], "run 20260101T000000Z-c0ffee: its record is corrupt"),
])
def test_bad_input_gets_a_clear_message(runs_dir, name, extra, message):
    corrupt = runs_dir / "20260101T000000Z-c0ffee"
    corrupt.mkdir(parents=True, exist_ok=True)
    (corrupt / "state.json").write_text("{\"state\": ")
    rc, output = collection_playbook(name, runs_dir, extra)
    assert rc != 0 and message.replace("RUNS", str(runs_dir)) in " ".join(output.split()), output
    assert "Traceback" not in output
