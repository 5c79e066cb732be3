"""A workflow's jobs at the same time, in local mode: every job runs on this
one machine, so every job whose dependencies have finished starts at once
(the workflow runner, plugins/action/workflow_jobs.py: each job in an
ansible-playbook of its own). What a user relies on, judged from the jobs'
own logs (when each started and ended), never from how long the run took:
independent jobs overlap, a job starts only after every job it depends on
ended, every job has the run's id, each live line is whole and names its
job; a failed branch stops its dependants only; fuzz_multinode_jobs_at_once
1 runs one job at a time; Ctrl-C in the middle of a parallel run cancels
every running job and leaves nothing of the run on this machine."""

import os
import re
import signal
import time

import pytest

import local_jobs as lj
from concurrency import all_overlap, job_spans, most_at_once, outcome_table, started_on, task_records

WORKFLOWS = lj.FUZZFILES / "workflow"
FAN = ["fan-1", "fan-2", "fan-3", "fan-4"]
SIDES = ["side-1", "side-2", "side-3"]
DIAMOND = ["top"] + SIDES + ["bottom"]
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")


def in_order(first, then):
    """Every span of `first` ended before any span of `then` started."""
    return max(end for _unused, end in first) < min(start for start, _unused in then)


@pytest.fixture(scope="module")
def parallel(workdir):
    """The fan-out and the diamond, as one workflow (9 jobs, 5 of them ready
    at once), run whole."""
    directory = workdir / "parallel"
    directory.mkdir()
    fuzzfile = lj.combine(directory / "parallel.yml", [(WORKFLOWS / "fan-out.yml", None),
                                                       (WORKFLOWS / "diamond.yml", None)])
    return lj.run_job(fuzzfile, directory / "logs")


def test_a_parallel_workflow_finishes(parallel):
    assert parallel.rc == 0, parallel
    assert outcome_table(parallel.output).keys() == set(FAN + DIAMOND), parallel
    assert {status for status, _unused, _unused in outcome_table(parallel.output).values()} == {"FINISHED"}, parallel


def test_independent_jobs_run_at_the_same_time(parallel):
    spans = job_spans(parallel.logs, FAN + DIAMOND)
    assert all_overlap([spans[job][:2] for job in FAN + ["top"]]), spans


def test_a_diamond_runs_its_sides_together_after_its_top_and_its_bottom_after_every_side(parallel):
    spans = job_spans(parallel.logs, DIAMOND)
    sides = [spans[job][:2] for job in SIDES]
    assert in_order([spans["top"][:2]], sides), spans
    assert all_overlap(sides), spans
    assert in_order(sides, [spans["bottom"][:2]]), spans


def test_every_job_has_the_runs_id(parallel):
    runs = {run for _unused, _unused, run, _unused in job_spans(parallel.logs, FAN + DIAMOND).values()}
    assert len(runs) == 1 and RUN_ID.fullmatch(runs.pop()), runs


def test_the_output_says_when_each_job_started_where_and_when_it_ended(parallel):
    started = started_on(parallel.output)
    assert sorted(started) == sorted((job, ["localhost"]) for job in FAN + DIAMOND), parallel
    jobs = [job for job, _unused in started]
    assert jobs.index("bottom") > max(jobs.index(side) for side in SIDES) > min(jobs.index(side) for side in SIDES) \
        > jobs.index("top"), jobs
    rows = outcome_table(parallel.output)
    for _unused, start, end in rows.values():
        assert re.fullmatch(r"\d\d:\d\d:\d\d", start) and re.fullmatch(r"\d\d:\d\d:\d\d", end), rows
    # The sides started once the top had ended, the bottom once they all had.
    assert min(rows[side][1] for side in SIDES) >= rows["top"][2], rows
    assert rows["bottom"][1] >= max(rows[side][2] for side in SIDES), rows


def test_each_live_line_is_shown_whole_with_its_jobs_name(parallel):
    shown = parallel.output.splitlines()
    for job in FAN + DIAMOND:
        for line in parallel.lines(job):
            assert shown.count("[%s] %s" % (job, line)) == 1, (job, line)
    # No line holds pieces of two jobs' lines.
    assert not [line for line in shown if len(re.findall(r"(?:start|end) \d+\.\d+", line)) > 1]
    # Whatever a job's playbook prints (its warnings too) names the job.
    runner = parallel.output[parallel.output.index("TASK [fuzz.multinode.workflow : Run the workflow's jobs"):]
    runner = runner[:runner.index("\nTASK [")].splitlines()[1:]
    jobs = "|".join(re.escape(job) for job in FAN + DIAMOND)
    assert runner[0].startswith("workflow run ") and runner[-1].startswith("changed: "), runner
    assert [line for line in runner[1:-1] if not re.match(r"\[(%s)\] " % jobs, line)] == [], runner
    assert [line for line in runner if re.match(r"\[(%s)\] \[WARNING\]: " % jobs, line)], runner


def test_a_parallel_workflow_leaves_nothing(parallel):
    assert parallel.state == lj.cleaned(parallel.state, FAN + DIAMOND), parallel


# -- a failing branch, run in parallel -----------------------------------------------

@pytest.fixture(scope="module")
def failing_branch(workdir):
    directory = workdir / "failing-branch"
    directory.mkdir()
    fuzzfile = lj.combine(directory / "failing-branch.yml", [(WORKFLOWS / "failing-branch.yml", None)])
    return lj.run_job(fuzzfile, directory / "logs")


def test_a_failed_job_stops_its_dependants_and_fails_the_run_naming_every_unfinished_job(failing_branch):
    assert failing_branch.rc != 0, failing_branch
    assert failing_branch.failure() == (
        "workflow failed: left FAILED: rank 0 (left-0 on localhost) exited with status 3; "
        "join NOT_RUN: job join not run: it depends on left, which did not finish"), failing_branch
    assert not (failing_branch.logs / "join.log").exists()
    assert "join" not in [job for job, _unused in started_on(failing_branch.output)]


def test_the_other_branches_of_a_failed_job_still_run(failing_branch):
    for job, line in [("start", "start ran on start-0"), ("right", "right ran"), ("after-right", "after-right ran"),
                      ("lone", "lone ran"), ("left", "left is failing")]:
        assert failing_branch.log(job) == line + "\n", job
    # lone needs nothing: it started with start, not after it.
    jobs = [job for job, _unused in started_on(failing_branch.output)]
    assert sorted(jobs[:2]) == ["lone", "start"], jobs
    assert failing_branch.state == lj.cleaned(failing_branch.state, failing_branch.jobs), failing_branch


# -- one at a time ------------------------------------------------------------------------

def test_jobs_at_once_1_runs_the_jobs_one_at_a_time_in_order(workdir):
    directory = workdir / "one-at-a-time"
    directory.mkdir()
    fuzzfile = lj.combine(directory / "fan-out.yml", [(WORKFLOWS / "fan-out.yml", None)],
                          replace={"sleep 8": "sleep 1"})
    run = lj.run_job(fuzzfile, directory / "logs", {"fuzz_multinode_jobs_at_once": 1})
    assert run.rc == 0, run
    spans = job_spans(run.logs, FAN)
    assert most_at_once([spans[job][:2] for job in FAN]) == 1, spans
    assert sorted(FAN, key=lambda job: spans[job][0]) == FAN, spans


# -- Ctrl-C in the middle of a parallel run -----------------------------------------

SLEEPERS = ["sleeper-a", "sleeper-b"]
INTERRUPTED = """\
version: v4
volumes:
  scratch:
    reference: volume://user/ephemeral
jobs:
%s
  after:
    image: {uri: docker://alpine:3.20}
    command: [/bin/sh, -c, "echo after ran"]
    depends-on: [{name: sleeper-a}, {name: sleeper-b}]
""" % "".join("""\
  %s:
    image: {uri: docker://alpine:3.20}
    env: [MULTINODE_WRAPPER_FORWARD_STREAMS=1]
    mounts:
      /scratch: {volume: scratch}
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME sleeps in run $FB_WORKFLOW_ID"; sleep 1000'
    multinode: {nodes: 2, implementation: generic}
""" % job for job in SLEEPERS)
VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"  # the job role's default


# How the run is stopped: Ctrl-C (the terminal signals the whole foreground
# process group), SIGTERM to the ansible-playbook process (a service
# manager, `kill`), or the ansible-playbook process killed outright. After
# the last two it is gone at once, and the jobs are canceled without it.
STOPS = {"ctrl-c": (signal.SIGINT, True), "sigterm": (signal.SIGTERM, False), "killed": (signal.SIGKILL, False)}


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_stopping_a_parallel_run_cancels_every_running_job_and_leaves_nothing(workdir, stop):
    signum, group = STOPS[stop]
    directory = workdir / ("parallel-" + stop)
    directory.mkdir()
    fuzzfile = directory / "interrupted.yml"
    fuzzfile.write_text(INTERRUPTED)
    jobs = SLEEPERS + ["after"]
    out_path = directory / "interrupted.out"
    proc = lj.start_playbook(fuzzfile, directory / "logs", out_path)
    try:
        lj.wait_for_output(proc, out_path,
                           lambda output: all("[%s] %s-1 sleeps" % (job, job) in output for job in SLEEPERS), 240)
        run = re.search(r"sleeps in run (\S+)", out_path.read_text()).group(1)
        volumes = os.path.join(VOLUME_ROOT, "ephemeral", run)
        assert os.path.isdir(volumes)  # what must go, with the jobs
        if group:
            os.killpg(proc.pid, signum)  # as a terminal sends Ctrl-C
        else:
            os.kill(proc.pid, signum)
        rc = proc.wait(timeout=240)
        assert rc != 0, out_path.read_text()[-6000:]
        # Without the playbook, its runner cancels the jobs on its own.
        deadline = time.monotonic() + 180
        while lj.machine_state(jobs) != lj.cleaned(lj.machine_state(jobs), jobs) or os.path.exists(volumes):
            assert time.monotonic() < deadline, (lj.machine_state(jobs), out_path.read_text()[-6000:])
            time.sleep(0.5)
        output = out_path.read_text()
        for job in SLEEPERS:
            log = (directory / "logs" / (job + ".log")).read_text().splitlines()
            # Each job's own playbook is interrupted as by Ctrl-C.
            assert ("multinode-ssh-wrapper: job %s canceled by the controller: "
                    "the playbook was interrupted (SIGINT)" % job) in log, log
        assert not (directory / "logs" / "after.log").exists()
        if group:
            # After Ansible's own "User interrupted execution", what became of each job.
            summary = output[output.index("[ERROR]: User interrupted execution"):]
            assert "workflow canceled: the playbook was interrupted (SIGINT)" in summary, output[-6000:]
            for job, status in [("sleeper-a", "CANCELED"), ("sleeper-b", "CANCELED"), ("after", "NOT_RUN")]:
                assert re.search(r"^%s +%s " % (job, status), summary, re.M), summary
    finally:
        lj.end_playbook(proc, jobs)


# -- a task array beside another job ---------------------------------------------------

@pytest.fixture(scope="module")
def task_array_beside(workdir):
    """The workflow scenario's task array (8 tasks of 2 s, 4 at a time) and
    a fan-out job that needs nothing: both start at once through the runner."""
    directory = workdir / "task-array-beside"
    directory.mkdir()
    fuzzfile = lj.combine(directory / "task-array-beside.yml", [(WORKFLOWS / "task-array.yml", None),
                                                                (WORKFLOWS / "fan-out.yml", ["fan-1"])])
    return lj.run_job(fuzzfile, directory / "logs")


def test_a_task_array_runs_through_the_runner_beside_another_job(task_array_beside):
    run = task_array_beside
    assert run.rc == 0, run
    assert {job: row[0] for job, row in outcome_table(run.output).items()} == \
        {"sweep": "FINISHED", "fan-1": "FINISHED"}, run
    assert sorted(job for job, _unused in started_on(run.output)) == ["fan-1", "sweep"], run
    tasks = task_records(run.logs / "sweep")
    assert sorted(tasks) == list(range(1, 9)), tasks
    assert {task[0] for task in tasks.values()} == {"sweep-%d" % task for task in range(1, 9)}, tasks
    fan_start, fan_end, _unused, _unused = job_spans(run.logs, ["fan-1"])["fan-1"]
    # The array's tasks ran while fan-1 ran: the two jobs overlapped.
    assert any(start < fan_end and end > fan_start for *_unused, start, end in tasks.values()), (tasks, fan_start)
    assert run.state == lj.cleaned(run.state, run.jobs), run
