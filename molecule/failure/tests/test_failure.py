"""Verifier of the failure scenario: jobs that fail, or are stopped, in every
way the runtime must handle, run through run-job.yml exactly as a user runs
it, on a real 3-node container cluster.

For each way a job can end badly it checks what a user relies on: the job
fails (the playbook exits non-zero) promptly, the message names the rank,
host name, node and status that failed it, and no process of the job is left
on any node. Node processes are checked with docker exec the moment the
playbook returns (the state the user is left with), so every test judges its
own job, whatever order the tests run in.

Times: containers share the host's clock, so a `date +%s.%N` written by a job
command on a node compares with the verifier's time.time().
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

# On the path since node_runtime's import: the checkout as the collection.
from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of  # noqa: E402

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "failure"
NODES = ("fmn-failure-node-1", "fmn-failure-node-2", "fmn-failure-node-3")
HEAD, WORKER, THIRD = NODES  # rank 0, rank 1, rank 2 of a 3-node job
NO_PROCESSES = {name: [] for name in NODES}

# What a user relies on, in seconds.
WORKER_FAILURE_STOPS_HEAD_WITHIN = 2  # worker exits non-zero -> head told to stop
LOST_NODE_FAILS_JOB_WITHIN = 30  # keepalives: 5 s x 3, plus the teardown
INTERRUPT_STOPS_JOB_WITHIN = 30  # playbook interrupted -> no job process left


# -- running the playbook like a user ------------------------------------------

def playbook(fuzzfile, logs, job=None, extra_vars=None, args=()):
    return user_playbook.playbook(FUZZFILES / fuzzfile, logs, job, extra_vars, args)


# interrupted.yml's secret, as a user passes a dict on the command line.
SECRET_ARGS = ("-e", json.dumps({"fuzz_multinode_secrets": {"user/fmn-interrupted-token": "fmn-s3cret"}}))


def run_job(fuzzfile, logs, job=None, extra_vars=None):
    rc, output, seconds = user_playbook.run_job(FUZZFILES / fuzzfile, logs, job, extra_vars)
    returned_at = time.time()
    # leftovers: the job user's processes on every node the moment it returned.
    run = user_playbook.JobRun(job or Path(fuzzfile).stem, logs, rc, output, seconds,
                               processes_on_all_nodes())
    run.returned_at = returned_at  # the controller's clock, which the containers share
    return run


def seconds_from_head_start(run):
    """From the head's start (`head starts at <time>` in the job log) to the
    playbook's return: the job and everything the play does after it. The
    play's preparation before it, which a loaded machine slows most, is not
    counted."""
    return run.returned_at - timestamp(run.log(), "head starts at")


class StartedJob:
    """run-job.yml started in the background, in its own process group (as a
    shell runs a foreground command), output to a file."""

    def __init__(self, fuzzfile, logs, job=None, extra_vars=None, args=()):
        argv, env = playbook(fuzzfile, logs, job, extra_vars, args)
        self.job, self.logs = job or Path(fuzzfile).stem, logs
        self.out_path = logs / "ansible-playbook.out"
        with open(self.out_path, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return self.out_path.read_text()

    def log(self):
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    def wait_until_running(self, nodes, timeout=240):
        """Until the job user runs `sleep` on every node in `nodes`."""
        deadline = time.monotonic() + timeout
        while not all(sleeping(node) for node in nodes):
            if self.proc.poll() is not None:
                pytest.fail("the playbook ended before the job ran on %s:\n%s"
                            % (", ".join(nodes), self.output()[-6000:]))
            if time.monotonic() > deadline:
                pytest.fail("the job did not start on %s within %d s:\n%s"
                            % (", ".join(nodes), timeout, self.output()[-6000:]))
            time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# -- looking at the nodes -------------------------------------------------------

def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, check=False)


def job_processes(node):
    """Processes of the job user on a node (the job runs as user fuzz),
    zombies included: ps lists every process, also ones that called setsid."""
    done = docker("exec", node, "sh", "-c", "ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"'")
    if done.returncode != 0:
        return ["(cannot look: %s)" % done.stderr.strip()]
    return [line for line in done.stdout.splitlines() if line.strip()]


def processes_on_all_nodes(nodes=NODES):
    return {node: job_processes(node) for node in nodes}


def sleeping(node):
    return docker("exec", node, "pgrep", "-u", "fuzz", "-x", "sleep").returncode == 0


def unregister(job, nodes=NODES):
    """Restore the nodes after a run whose play could not clean up: the
    runtime's own cleanup, as the play runs it."""
    for node in nodes:
        docker("exec", node, *node_runtime.runtime_argv("cleanup", job), timeout=120)


# A function too: some tests read the output of a run that is no JobRun.
failure_message = user_playbook.failure_message


def timestamp(text, label):
    found = re.findall(r"^%s (\d+\.\d+)$" % re.escape(label), text, re.M)
    assert len(found) == 1, "expected one line %r <time> in:\n%s" % (label, text)
    return float(found[0])


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    """Runs each Fuzzfile job once for all the tests that look at it."""
    runs = {}

    def get(fuzzfile, job=None, extra_vars=None):
        if (fuzzfile, job) not in runs:
            runs[fuzzfile, job] = run_job(fuzzfile, tmp_path_factory.mktemp("logs"), job, extra_vars)
        return runs[fuzzfile, job]
    return get


# -- a worker exits non-zero ------------------------------------------------------

WORKER_FAILURES = pytest.mark.parametrize("dispatch", ["rankn", "all", "bare"],
                                          ids=["exec_rankN", "exec_all", "bare-wrapper"])


@WORKER_FAILURES
def test_failing_worker_fails_the_job_naming_it(job_run, dispatch):
    run = job_run("worker-fails-%s.yml" % dispatch)
    assert run.rc != 0, run
    assert ("rank 1 (worker-fails-%s-1 on %s) exited with status 3" % (dispatch, WORKER)
            in failure_message(run.output)), run
    # The head had 120 s of work left; the job stopped it.
    assert "head starts" in run.log(), run
    assert "head after sleep" not in run.log(), run
    assert seconds_from_head_start(run) < 100, run


def rank0_start(runs):
    """Rank 0's start as the run's record has it (state.json, to the
    millisecond, cut down): the job's start that its deadline counts from.
    The head's own first line comes later, by its shell's start."""
    (state_file,) = runs.glob("*/state.json")
    (entry,) = json.loads(state_file.read_text())["jobs"].values()
    (start,) = [rank["start"] for rank in entry["ranks"] if rank["rank"] == 0]
    return seconds_of(start)


def test_execute_timeout_stops_the_job_at_its_deadline(job_run, tmp_path_factory):
    """policy.timeout.execute: at the deadline (counted from rank 0's start)
    every rank's processes are stopped and the job fails with a timeout
    message."""
    runs = tmp_path_factory.mktemp("runs")
    run = job_run("timeout-exceeded.yml", extra_vars={"fuzz_multinode_runs_dir": runs})
    assert run.rc != 0, run
    assert ("job timeout-exceeded timed out: it ran longer than its policy.timeout.execute (5s)"
            in failure_message(run.output)), run
    started = rank0_start(runs)
    assert started <= timestamp(run.log(), "head starts at"), run
    stopped = timestamp(run.log(), "head terminated at")
    assert 5 <= stopped - started < 10, (stopped - started, run)
    assert "head after sleep" not in run.log(), run
    assert run.leftovers == NO_PROCESSES, run


def test_wrapper_call_to_an_unknown_host_fails_the_job_naming_it(job_run):
    """A wrapper call that cannot even be made (no such rank) fails the job
    like a failing worker command: a launcher waiting for it would hang."""
    run = job_run("wrapper-unknown-host.yml")
    assert run.rc != 0, run
    assert ("a wrapper call on wrapper-unknown-host-0 failed: unknown host 'no-such-rank'"
            in failure_message(run.output)), run
    assert "head after sleep" not in run.log(), run
    assert seconds_from_head_start(run) < 100, run
    assert run.leftovers == NO_PROCESSES, run


@WORKER_FAILURES
def test_failing_worker_stops_the_head_within_2_seconds(job_run, dispatch):
    run = job_run("worker-fails-%s.yml" % dispatch)
    worker_exit = timestamp(run.rank_log(1), "worker exits at")
    head_stopped = timestamp(run.log(), "head terminated at")
    print("worker exited at %.3f, head got SIGTERM %.3f s later" % (worker_exit, head_stopped - worker_exit))
    assert 0 <= head_stopped - worker_exit < WORKER_FAILURE_STOPS_HEAD_WITHIN, (
        "worker exited at %.3f, head got SIGTERM at %.3f (%.3f s later)"
        % (worker_exit, head_stopped, head_stopped - worker_exit))


@WORKER_FAILURES
def test_failing_worker_leaves_no_process(job_run, dispatch):
    run = job_run("worker-fails-%s.yml" % dispatch)
    assert run.leftovers == NO_PROCESSES, run


# -- the head exits non-zero --------------------------------------------------------

def test_wait_rank0_passes_the_head_status_through(job_run):
    run = job_run("head-fails.yml")
    assert run.rc != 0, run
    assert "rank 0 (head-fails-0 on %s) exited with status 7" % HEAD in failure_message(run.output), run
    assert "head fails" in run.log(), run
    assert "not reached" not in run.log(), run
    assert "worker is busy" in run.rank_log(1), run


def test_failing_head_leaves_no_process(job_run):
    run = job_run("head-fails.yml")
    assert run.leftovers == NO_PROCESSES, run


# -- commands that ignore SIGTERM -----------------------------------------------------

# The kill grace period (seconds from SIGTERM to SIGKILL) of these runs:
# short, so that the processes ignoring SIGTERM do not take the default
# 10 s at each teardown (tests/local does the same).
TERM_IGNORED = {"fuzz_multinode_kill_grace": 2}


def test_term_ignoring_processes_are_gone_when_the_job_ends(job_run):
    run = job_run("term-ignored-ends.yml", extra_vars=TERM_IGNORED)
    assert run.rc == 0, run
    # They did run, and ignored TERM ...
    assert "term-ignored-ends-0 ignores TERM" in run.log(), run
    assert "term-ignored-ends-1 ignores TERM" in run.rank_log(1), run
    # ... and are gone after the grace period (SIGKILL).
    assert run.leftovers == NO_PROCESSES, run


def test_term_ignoring_processes_are_gone_when_the_job_fails(job_run):
    run = job_run("term-ignored-fails.yml", extra_vars=TERM_IGNORED)
    assert run.rc != 0, run
    assert ("rank 1 (term-ignored-fails-1 on %s) exited with status 4" % WORKER
            in failure_message(run.output)), run
    assert "term-ignored-fails-0 ignores TERM" in run.log(), run
    assert "term-ignored-fails-1 ignores TERM" in run.rank_log(1), run
    assert run.leftovers == NO_PROCESSES, run


# -- the playbook itself is interrupted ---------------------------------------------------

def head_job_log(job):
    """The job log on the head, which an interrupted play never fetches."""
    return node_runtime.show(HEAD, job)["job_log"] or ""


def nodes_holding_secrets(job):
    """The nodes that hold the job's secret values (the runtime keeps them
    in the job's directory, root only)."""
    return [node for node in NODES if node_runtime.show(node, job)["secrets"]]


EPHEMERAL_VOLUMES = "/var/lib/fuzz-multinode/volumes/ephemeral"  # each node's own (the role's default root)


def ephemeral_volumes():
    """{node: [run/volume]} of the ephemeral volumes each node holds, nodes
    with none left out."""
    found = {node: docker("exec", node, "sh", "-c", "cd %s 2>/dev/null && ls -d -- */* 2>/dev/null; true"
                          % EPHEMERAL_VOLUMES).stdout.split() for node in NODES}
    return {node: volumes for node, volumes in found.items() if volumes}


def nodes_where_registered(job):
    """The nodes where anything of the job's registration is left: its
    directory (spec, secrets, pinned namespaces) or its rank host names."""
    held = {node: node_runtime.show(node, job) for node in NODES}
    return [node for node in NODES if held[node]["registered"] or held[node]["hosts_block"]]


def wait_for_no_processes(within):
    """Job processes left on the nodes, polled until none are or `within`
    seconds passed; returns (what is left, seconds it took)."""
    started = time.monotonic()
    left = processes_on_all_nodes()
    while left != NO_PROCESSES and time.monotonic() - started < within:
        time.sleep(1)
        left = processes_on_all_nodes()
    return left, time.monotonic() - started


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_playbook_stops_the_job_on_every_node(tmp_path, how):
    """Ctrl-C (SIGINT to the playbook's process group, as a terminal sends
    it), `kill` (SIGTERM to the ansible-playbook process) or `kill -9` (the
    ansible-playbook process dies at once) while a job runs: no process of
    the job may remain on any node soon after, and the job says why it
    stopped. (Well before the controller timeout: the play asks the head to
    cancel the job.) The controller's job log keeps what the job printed
    before the interrupt, and the line saying why it ended: at once when
    ansible-playbook returns after Ctrl-C, soon after for the others
    (ansible-playbook ends at once; its worker process finishes the log).
    The job's secrets, its registration and the run's ephemeral volume,
    which each node keeps on its own storage, are gone too."""
    job = "interrupted-" + how.lower()
    volumes_before = ephemeral_volumes()
    started = StartedJob("interrupted.yml", tmp_path, job, args=SECRET_ARGS)
    try:
        started.wait_until_running([HEAD, WORKER])
        assert nodes_holding_secrets(job) == [HEAD, WORKER]  # a 2-node job
        assert nodes_where_registered(job) == [HEAD, WORKER]
        made = {node: new for node, new in ((node, sorted(set(volumes) - set(volumes_before.get(node, []))))
                                            for node, volumes in ephemeral_volumes().items()) if new}
        # The run's volume, on each node's own storage.
        assert len(made.get(HEAD, [])) == 1 and made == {HEAD: made[HEAD], WORKER: made[HEAD]}, made
        shown = "[%s] %s-1 sleeps" % (job, job)  # the worker's line, on the terminal
        deadline = time.monotonic() + 30
        while shown not in started.output() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert shown in started.output(), started.output()[-3000:]
        if how == "SIGINT":
            os.killpg(started.proc.pid, signal.SIGINT)
        else:
            started.proc.send_signal(getattr(signal, how))
        left, seconds = wait_for_no_processes(INTERRUPT_STOPS_JOB_WITHIN)
        print("%s: job processes left on the nodes %.1f s after the signal: %s" % (how, seconds, left))
        try:
            started.proc.wait(timeout=max(1, INTERRUPT_STOPS_JOB_WITHIN - seconds))
        except subprocess.TimeoutExpired:
            pass
        assert left == NO_PROCESSES, "%d s after %s to ansible-playbook (%s):\n%s" % (
            INTERRUPT_STOPS_JOB_WITHIN, how,
            "still running" if started.proc.poll() is None else "exited %d" % started.proc.returncode,
            started.output()[-3000:])
        assert started.proc.poll() is not None, "ansible-playbook still runs %d s after %s" % (
            INTERRUPT_STOPS_JOB_WITHIN, how)
        assert started.proc.returncode != 0, started.output()
        reason = ("the playbook process ended" if how == "SIGKILL"
                  else "the playbook was interrupted (%s)" % how)
        canceled = "job %s canceled by the controller: %s" % (job, reason)
        head_log = head_job_log(job)
        assert canceled in head_log, "job log on the head:\n%s\n--- playbook output ---\n%s" % (
            head_log, started.output()[-3000:])
        controller_log = tmp_path / (job + ".log")
        deadline = time.monotonic() + (0 if how == "SIGINT" else INTERRUPT_STOPS_JOB_WITHIN)
        while canceled not in started.log() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert controller_log.is_file(), started.output()[-3000:]
        kept = started.log().splitlines()
        for line in ["%s-0 sleeps" % job, "%s-1 left a sleeper" % job, "%s-1 sleeps" % job]:
            assert line in kept, kept
        assert "multinode-ssh-wrapper: " + canceled in kept, kept
        # No play cleans up after an interrupted one: the job's secret
        # values, and then its whole registration, must go all the same.
        deadline = time.monotonic() + INTERRUPT_STOPS_JOB_WITHIN
        while nodes_where_registered(job) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert nodes_holding_secrets(job) == []
        assert nodes_where_registered(job) == []
        # The run ended with the job, and no later task will remove its
        # ephemeral volume: on either node.
        assert ephemeral_volumes() == volumes_before
    finally:
        started.stop()
        unregister(job)


def descendants(pid):
    """pid and every process below it (Ansible's workers run in sessions of
    their own, but are still its children)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        found.append(parent)
        for task in Path("/proc/%d/task" % parent).glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def test_frozen_controller_gets_the_job_canceled(tmp_path):
    """A controller that can no longer act (frozen here with SIGSTOP; a
    crash or a cut network look the same to the head): after
    fuzz_multinode_controller_timeout seconds without a poll the head
    cancels the job on every node by itself."""
    job = "interrupted-sigint"
    timeout = 10
    started = StartedJob("interrupted.yml", tmp_path, job, args=SECRET_ARGS,
                         extra_vars={"fuzz_multinode_controller_timeout": timeout})
    frozen = []
    try:
        started.wait_until_running([HEAD, WORKER])
        frozen = descendants(started.proc.pid)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        left, seconds = wait_for_no_processes(timeout + INTERRUPT_STOPS_JOB_WITHIN)
        print("frozen controller: job processes left %.1f s after the freeze: %s" % (seconds, left))
        assert left == NO_PROCESSES
        assert seconds >= timeout - 1, "canceled before the controller timeout"
        assert ("job %s canceled by the controller: it stopped polling the job" % job) in head_job_log(job)
        for pid in frozen:  # the thawed play reports the cancellation
            os.kill(pid, signal.SIGCONT)
        frozen = []
        started.proc.wait(timeout=120)
        assert started.proc.returncode != 0
        assert "stopped polling the job" in failure_message(started.output())
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        started.stop()
        unregister(job)


# -- what the controller shows while and after a job runs ----------------------------------

LIVE_LINE_AHEAD = 3  # a line must be on the terminal this long before the job ends (6 s later)
LIVE_LINES = ["live first line from live-0", "live worker line from live-1", "live last line from live-2"]


class WatchedRun:
    """run-job.yml run once for live.yml with its output read as it comes:
    when each line arrived, and the controller's job log the moment the
    job's first line was on the terminal."""

    def __init__(self, logs):
        argv, env = playbook("live.yml", logs, extra_vars={"fuzz_multinode_progress_every": 2})
        self.logs = logs
        self.job_log = logs / "live.log"
        self.started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.arrived, output, self.log_when_shown = {}, [], None
        try:
            for line in proc.stdout:
                output.append(line)
                self.arrived.setdefault(line.rstrip("\n"), time.monotonic())
                if self.log_when_shown is None and line.startswith("[live] " + LIVE_LINES[0]):
                    self.log_when_shown = self.job_log.read_text() if self.job_log.exists() else ""
            proc.wait(timeout=240)
        finally:
            proc.kill()
        self.ended = time.monotonic()
        self.rc, self.output = proc.returncode, "".join(output)

    def __repr__(self):  # shown by pytest when an assertion fails
        return "WatchedRun(live, rc=%s)\n--- output ---\n%s" % (self.rc, self.output[-6000:])


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    return WatchedRun(tmp_path_factory.mktemp("logs"))


def test_job_output_reaches_the_terminal_and_the_controller_log_while_the_job_runs(live_run):
    """The job log streams to the controller while the job runs: the lines
    printed before its 6 s of silence (rank 0's and a forwarded worker's)
    are on ansible-playbook's stdout as `[live] line`, and in the
    controller's live.log, while the job still runs (its last line, which
    ends it, comes 6 s later); the silence shows the elapsed time (every 2 s
    here, 30 s by default). Each line is shown once: the result carries no
    copy of the log."""
    run = live_run
    for line in LIVE_LINES:
        assert run.output.count(line) == 1, "%r shown %d times: %r" % (line, run.output.count(line), run)
    job_ended = run.arrived.get("[live] " + LIVE_LINES[2])
    assert job_ended is not None, run
    for line in LIVE_LINES[:2]:
        shown = run.arrived.get("[live] " + line)
        assert shown is not None, run
        print("%r on the terminal %.1f s after the start, %.1f s before the job's last line, "
              "%.1f s before ansible-playbook ended" % (
                  line, shown - run.started, job_ended - shown, run.ended - shown))
        assert job_ended - shown >= LIVE_LINE_AHEAD, run
    # Written before it is shown, while the job still waits for its last line.
    assert run.log_when_shown is not None and LIVE_LINES[0] + "\n" in run.log_when_shown, run.log_when_shown
    assert LIVE_LINES[2] not in run.log_when_shown, run.log_when_shown
    progress = [at for text, at in run.arrived.items() if text.startswith("[live] still running, ")]
    assert progress and run.arrived["[live] " + LIVE_LINES[1]] < min(progress) < job_ended, run
    assert sorted(run.job_log.read_text().splitlines()) == sorted(LIVE_LINES), run.job_log.read_text()


def summary_rows(output):
    """The rows of a job's summary table in the play's output, by the first
    column: {rank: [host name, inventory host, exit status, duration, log]};
    and its title line."""
    start = output.index("TASK [fuzz.multinode.job : Show how the job's ranks ran]")
    shown = [line.strip()[2:].strip("'") for line in output[start:].split("\n\n", 1)[0].splitlines()
             if line.strip().startswith("- ")]
    header = re.split(r" {2,}", shown[1])
    assert header == ["rank", "host name", "inventory host", "exit status", "duration", "log"], shown
    return {row[0]: row[1:] for row in (re.split(r" {2,}", line) for line in shown[2:])}, shown[0]


def test_summary_shows_how_each_rank_of_a_failed_job_ended(live_run):
    """At the end of a job, a table with a row per rank: its host name, the
    inventory host, how it ended (rank 2 exited 5 and failed the job, rank 1
    had finished with 0, rank 0 was killed at the teardown), how long it
    ran, and its log file on the controller, which exists."""
    run = live_run
    assert run.rc != 0, run
    assert "rank 2 (live-2 on %s) exited with status 5" % THIRD in failure_message(run.output), run
    rows, title = summary_rows(run.output)
    assert title.startswith("job live FAILED after "), run
    assert {rank: row[:3] for rank, row in rows.items()} == {
        "0": ["live-0", HEAD, "killed"],
        "1": ["live-1", WORKER, "0"],
        "2": ["live-2", THIRD, "5"],
    }, run
    assert [row[4] for row in rows.values()] == [
        str(run.logs / "live.log"), str(run.logs / "live" / "rank-1.log"),
        str(run.logs / "live" / "rank-2.log")], run
    for rank, row in rows.items():
        assert re.fullmatch(r"\d+\.\d s", row[3]), (rank, row)
        assert Path(row[4]).is_file(), (rank, row)
    # Rank 2 ran its 6 s; rank 1 only an echo.
    assert float(rows["2"][3].split()[0]) >= 5.5 > float(rows["1"][3].split()[0]), rows
    assert LIVE_LINES[2] in (run.logs / "live" / "rank-2.log").read_text(), run


# -- a worker node is lost ----------------------------------------------------------------
# A frozen node (docker pause: its kernel still answers TCP, its sshd does
# not) is noticed only by the ssh keepalives. A killed node (docker kill) is
# noticed at once: the kernel closes its connections as its processes die.
# Last: they take a node away. The node comes back afterwards, and the final
# test shows that the playbook brings it back into service.

FREEZE_WITHIN = 60  # seconds a loaded machine's freezer may take to pause or unpause a node


def set_paused(node, paused):
    """docker pause (or unpause) a node and wait until the container really
    is paused (or running again). On a loaded machine the kernel's freezer
    may not stop every task in time ("OCI runtime pause failed: unable to
    freeze"; runc then thaws the container again): the command is retried
    until the container's state is the one asked for. Returns a docker result
    whose status is 0 once it is, with the failed attempts' messages."""
    action = "pause" if paused else "unpause"
    deadline = time.monotonic() + FREEZE_WITHIN
    errors = []
    while True:
        done = docker(action, node)
        if done.returncode != 0:
            errors.append(done.stderr.strip())
        state = docker("inspect", "--format", "{{.State.Paused}}", node)
        if state.stdout.strip() == ("true" if paused else "false"):
            return subprocess.CompletedProcess(done.args, 0, done.stdout, "\n".join(errors))
        if time.monotonic() > deadline:
            return subprocess.CompletedProcess(done.args, done.returncode or 1, done.stdout, "\n".join(
                errors + ["%s is still %s %d s later" % (node, "running" if paused else "paused", FREEZE_WITHIN)]))
        time.sleep(1)


@pytest.fixture
def unpause_worker():
    yield
    set_paused(WORKER, False)


def test_hung_worker_node_fails_the_job_naming_it(tmp_path, unpause_worker):
    started = StartedJob("lost-node.yml", tmp_path, "hung-node")
    try:
        started.wait_until_running(NODES)
        paused = set_paused(WORKER, True)
        paused_at, paused_mono = time.time(), time.monotonic()
        assert paused.returncode == 0, paused.stderr
        try:
            rc = started.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail("ansible-playbook still runs 180 s after %s was frozen:\n%s"
                        % (WORKER, started.output()[-6000:]))
        ended_after = time.monotonic() - paused_mono
        leftovers = processes_on_all_nodes([HEAD, THIRD])
        output = started.output()
    finally:
        started.stop()
    # When the node thaws, what it still runs of the job must stop by itself:
    # its ssh session from the head is gone.
    assert set_paused(WORKER, False).returncode == 0
    thawed = time.monotonic()
    left_on_thawed = job_processes(WORKER)
    while left_on_thawed and time.monotonic() < thawed + INTERRUPT_STOPS_JOB_WITHIN:
        time.sleep(1)
        left_on_thawed = job_processes(WORKER)
    head_stopped = timestamp(started.log(), "head terminated at")
    print("node frozen at %.3f; head got SIGTERM %.1f s later; ansible-playbook returned %.1f s later; "
          "node thawed, its job processes gone %.1f s later"
          % (paused_at, head_stopped - paused_at, ended_after, time.monotonic() - thawed))
    assert rc != 0, output
    assert "lost connection to rank 1 (hung-node-1 on %s)" % WORKER in failure_message(output), output
    assert "head after sleep" not in started.log(), started.log()
    assert head_stopped - paused_at < LOST_NODE_FAILS_JOB_WITHIN, (
        "head stopped %.1f s after the node froze" % (head_stopped - paused_at))
    assert ended_after < LOST_NODE_FAILS_JOB_WITHIN, (
        "ansible-playbook returned %.1f s after the node froze:\n%s" % (ended_after, output))
    assert leftovers == {HEAD: [], THIRD: []}, output
    assert left_on_thawed == [], "job processes on %s %d s after it thawed" % (
        WORKER, INTERRUPT_STOPS_JOB_WITHIN)


def task_results(output, task):
    """{host: its status (ok, changed, skipping, failed...)} of a task of
    the play's output, by the task's name."""
    block = output.split("TASK [fuzz.multinode.job : %s]" % task, 1)[1].split("TASK [", 1)[0]
    return {host: status for status, host in re.findall(r"^(\w+): \[([^\]]+)\]", block, re.M)}


@pytest.fixture
def worker_sshd_restarted():
    yield
    docker("exec", WORKER, "/usr/sbin/sshd")


def test_a_worker_that_takes_no_new_connections_is_torn_down_over_the_job_s_own(
        tmp_path, worker_sshd_restarted):
    """The head asks the workers for the job's teardown over the
    connections the job holds: a worker whose sshd takes no new connection
    once the job runs is still left with nothing of the job by it, and the
    play has nothing to clean up there (nor on the head, which launch_job
    cleaned up itself: the cleanup task is skipped, once)."""
    started = StartedJob("no-new-connections.yml", tmp_path)
    try:
        started.wait_until_running([HEAD, WORKER])
        stopped = docker("exec", WORKER, "sh", "-c", 'kill "$(cat /run/sshd.pid)"')
        assert stopped.returncode == 0, stopped.stderr
        rc = started.proc.wait(timeout=120)
        output = started.output()
    finally:
        started.stop()
    assert rc == 0, output
    assert "no-new-connections-1 done" in started.log(), started.log()
    cleanup = task_results(output, "Stop every process of the job and unregister it")
    assert set(cleanup.values()) == {"skipping"}, output
    assert nodes_where_registered("no-new-connections") == []
    assert processes_on_all_nodes() == NO_PROCESSES


@pytest.fixture
def unpause_head():
    yield
    set_paused(HEAD, False)


HEAD_HICCUP = 5  # seconds the head does not answer the controller's polls


def test_head_that_does_not_answer_for_a_while_keeps_the_job(tmp_path, unpause_head):
    """The head does not answer the controller for a few seconds (frozen
    here; a loaded head or a network blip look the same to the controller):
    the polls that fail meanwhile must not end the job. It goes on, finishes,
    and the play says it finished."""
    started = StartedJob("head-hiccup.yml", tmp_path, "head-hiccup")
    try:
        started.wait_until_running([HEAD, WORKER])
        assert set_paused(HEAD, True).returncode == 0
        try:
            time.sleep(HEAD_HICCUP)
            # What the controller's polls meet meanwhile.
            assert docker("exec", HEAD, "true").returncode != 0
        finally:
            assert set_paused(HEAD, False).returncode == 0
        try:
            rc = started.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail("ansible-playbook still runs 180 s after the head thawed:\n%s"
                        % started.output()[-6000:])
        output = started.output()
    finally:
        started.stop()
    assert rc == 0, output
    kept = started.log().splitlines()
    for line in ["head-hiccup-0 done", "head-hiccup-1 done"]:
        assert line in kept, (kept, output[-6000:])
    assert processes_on_all_nodes() == NO_PROCESSES, output


@pytest.fixture
def restart_worker():
    yield
    docker("start", WORKER)


def test_lost_worker_node_fails_the_job_naming_it(tmp_path, restart_worker):
    started = StartedJob("lost-node.yml", tmp_path, "lost-node")
    try:
        started.wait_until_running(NODES)
        killed = docker("kill", WORKER)
        killed_at, killed_mono = time.time(), time.monotonic()
        assert killed.returncode == 0, killed.stderr
        try:
            rc = started.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail("ansible-playbook still runs 180 s after %s was killed:\n%s"
                        % (WORKER, started.output()[-6000:]))
        ended_after = time.monotonic() - killed_mono
        leftovers = processes_on_all_nodes([HEAD, THIRD])
        output = started.output()
    finally:
        started.stop()
    print("node killed at %.3f; head got SIGTERM %.1f s later; ansible-playbook returned %.1f s later"
          % (killed_at, timestamp(started.log(), "head terminated at") - killed_at, ended_after))
    assert rc != 0, output
    assert "lost connection to rank 1 (lost-node-1 on %s)" % WORKER in failure_message(output), output
    assert "head after sleep" not in started.log(), started.log()
    head_stopped = timestamp(started.log(), "head terminated at")
    assert head_stopped - killed_at < LOST_NODE_FAILS_JOB_WITHIN, (
        "head stopped %.1f s after the node was killed" % (head_stopped - killed_at))
    assert ended_after < LOST_NODE_FAILS_JOB_WITHIN, (
        "ansible-playbook returned %.1f s after the node was killed:\n%s" % (ended_after, output))
    assert leftovers == {HEAD: [], THIRD: []}, output


def test_restarted_node_runs_jobs_again(job_run):
    started = docker("start", WORKER)
    assert started.returncode == 0, started.stderr
    run = job_run("hello.yml")
    assert run.rc == 0, run
    assert sorted(run.log().splitlines()) == ["hello-%d is up" % r for r in range(3)], run
    assert run.leftovers == NO_PROCESSES, run


# -- two runs of the same job at once ---------------------------------------------

RUN_ID = r"\d{8}T\d{6}Z-[0-9a-f]{6}"


def shown_run_id(output):
    """The run id a playbook showed (in the name of the task registering the job)."""
    found = set(re.findall(r"Register the job on its nodes for run (%s)\]" % RUN_ID, output))
    assert len(found) == 1, output[-6000:]
    return found.pop()


def check_refused_and_left_alone(first, second, second_logs):
    """A second run of first's 3-node job, after `go` was put where first's
    ranks wait for it: refused on every node, naming first's run, before it
    wrote anything; first finishes with every rank's lines (`<job>-<rank>
    run=<run id>`, `<job>-<rank> done`) and leaves nothing behind."""
    job = first.job
    first_id = shown_run_id(first.output())
    second_id = shown_run_id(second.output)
    assert second.rc != 0, second
    message = " ".join(second.failure_message().split())
    for node in NODES:
        assert ("job %s is already running on %s as run %s; run %s does not start it again "
                "(wait for that run to end)" % (job, node, first_id, second_id)) in message, second
    assert second.log() == "" and not (second_logs / job).exists(), second
    assert first.proc.wait(timeout=240) == 0, first.output()[-6000:]
    log = first.log().splitlines()
    for rank in range(3):
        assert "%s-%d run=%s" % (job, rank, first_id) in log, first.log()
        assert "%s-%d done" % (job, rank) in log, first.log()
    assert "job %s FINISHED" % job in " ".join(first.output().split())
    assert processes_on_all_nodes() == NO_PROCESSES
    assert nodes_where_registered(job) == []


def end_and_unregister(first, go, nodes):
    """Whatever failed: first's job ends (`go` on `nodes`), and nothing of it
    stays, so later tests judge their own jobs."""
    for node in nodes:
        docker("exec", node, "touch", go)
    if first.proc.poll() is None:
        try:
            first.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass
    first.stop()
    unregister(first.job)
    for node in nodes:
        docker("exec", node, "rm", "-f", go)


def test_the_same_job_started_twice_at_once_runs_once_and_refuses_the_second(tmp_path):
    """As a user would: the same Fuzzfile again while it runs. The first run
    keeps its workers, its output and its result; the second is refused on
    every node before it touches anything there, naming the first run, and
    its cleanup leaves the first run's job alone."""
    go = "/tmp/fmn-twice-go"  # the first run's ranks end when it is on their node
    for node in NODES:
        docker("exec", node, "rm", "-f", go)
    (tmp_path / "first").mkdir()
    first = StartedJob("twice.yml", tmp_path / "first")
    try:
        first.wait_until_running(NODES)
        second = run_job("twice.yml", tmp_path / "second")
        assert first.proc.poll() is None, first.output()[-6000:]  # still running
        for node in NODES:
            docker("exec", node, "touch", go)
        check_refused_and_left_alone(first, second, tmp_path / "second")
    finally:
        end_and_unregister(first, go, NODES)  # whatever failed above


# Both runs of the lease test set a short claim lease (the default is 120 s):
# the test waits it out for real, as a user's long job would outlast any.
SHORT_LEASE = {"fuzz_multinode_claim_lease": 15}


def test_a_run_keeps_its_idle_workers_longer_than_the_claim_lease(tmp_path):
    """A long job whose workers run nothing for longer than a claim's lease
    (only the head supervisor's lifeline is there): a second run started
    after the lease has passed is still refused on every node, and the first
    run's wrapper calls afterwards still reach its workers, so it finishes
    with its complete log. (About the lease of wall time: it is waited out
    for real.)"""
    go = "/tmp/fmn-lease-go"  # the first run's rank 0 goes on when it is on the head
    docker("exec", HEAD, "rm", "-f", go)
    (tmp_path / "first").mkdir()
    first = StartedJob("lease.yml", tmp_path / "first", extra_vars=SHORT_LEASE)
    try:
        first.wait_until_running([HEAD])  # its first wrapper calls are done
        assert {node: node_runtime.show(node, "lease")["claim_lease"] for node in NODES} == dict.fromkeys(
            NODES, SHORT_LEASE["fuzz_multinode_claim_lease"])  # the setting reached every node's claim
        # The claims on the workers were written (prepare) before the head
        # ran: from now on, the lease and a margin take them past it.
        idle_until = time.monotonic() + SHORT_LEASE["fuzz_multinode_claim_lease"] + 5
        while time.monotonic() < idle_until:
            assert processes_on_all_nodes([WORKER, THIRD]) == {WORKER: [], THIRD: []}  # idle
            assert first.proc.poll() is None, first.output()[-6000:]
            time.sleep(min(10, max(0, idle_until - time.monotonic())))
        second = run_job("lease.yml", tmp_path / "second", extra_vars=SHORT_LEASE)
        assert first.proc.poll() is None, first.output()[-6000:]  # still running
        docker("exec", HEAD, "touch", go)
        check_refused_and_left_alone(first, second, tmp_path / "second")
    finally:
        end_and_unregister(first, go, [HEAD])  # whatever failed above
