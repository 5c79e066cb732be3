"""Verifier of the workflow scenario: whole Fuzzfile workflows (job DAGs)
run through run-job.yml without -e job, exactly as a user runs them, on a
real 3-node container cluster.

What a user relies on: every job runs once, after the jobs it depends on;
independent jobs run at the same time, each on nodes of its own, as many as
the nodes allow (the workflow runner); a failed job stops exactly its
dependants, and the run fails naming the failed job and the jobs that were
not run; each job has its own log; no job process is left on any node.
"""

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

from concurrency import job_spans, most_at_once, task_records  # noqa: E402  (shared with tests/local)
from workflow_run import NO_PROCESSES, NODES, PROJECT, WorkflowRun, docker  # noqa: E402  (this scenario's runs)

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])


# -- the smallest workflow, run by converge.yml ------------------------------

def test_converge_ran_both_jobs_in_order_on_their_nodes():
    logs = EPHEMERAL / "fuzz-logs"
    assert (logs / "first.log").read_text() == "first on first-0\n"
    # The dependant ran on 3 nodes, after `first` (it would not run at all
    # had `first` not finished).
    assert (logs / "second.log").read_text() == "second on second-0 with 3 slots\n"


# -- a fan-out and fan-in with a failing branch ------------------------------

@pytest.fixture(scope="module")
def failing_branch(tmp_path_factory):
    return WorkflowRun("failing-branch.yml", tmp_path_factory.mktemp("failing-branch"))


def test_failing_branch_fails_the_run_naming_the_job_and_what_did_not_run(failing_branch):
    assert failing_branch.rc != 0
    assert failing_branch.failure() == (
        "workflow failed: left FAILED: rank 0 (left-0 on fmn-workflow-node-1) exited with "
        "status 3; join NOT_RUN: job join not run: it depends on left, which did not finish")


def test_failing_branch_runs_every_job_that_does_not_need_it(failing_branch):
    """Only `join` needs `left`; everything else runs, and once."""
    assert sorted(failing_branch.started()) == ["after-right", "left", "lone", "right", "start"]
    for job, line in [("start", "start ran on start-0"), ("right", "right ran"),
                      ("after-right", "after-right ran"), ("lone", "lone ran"),
                      ("left", "left is failing")]:
        assert failing_branch.log(job) == line + "\n", job
    assert not (failing_branch.logs / "join.log").exists()


def test_failing_branch_runs_jobs_after_their_dependencies(failing_branch):
    started = failing_branch.started()
    assert started.index("start") < started.index("left")
    assert started.index("start") < started.index("right")
    assert started.index("right") < started.index("after-right")


def test_failing_branch_shows_every_jobs_outcome(failing_branch):
    assert failing_branch.outcome_rows() == {
        "start": "FINISHED", "left": "FAILED", "right": "FINISHED", "join": "NOT_RUN",
        "after-right": "FINISHED", "lone": "FINISHED"}


def test_failing_branch_leaves_no_process(failing_branch):
    assert failing_branch.leftovers == NO_PROCESSES


# -- independent jobs at the same time -------------------------------------------

FAN = ["fan-1", "fan-2", "fan-3", "fan-4"]


@pytest.fixture(scope="module")
def fan_out(tmp_path_factory):
    return WorkflowRun("fan-out.yml", tmp_path_factory.mktemp("fan-out"))


def test_a_fan_out_runs_as_many_jobs_at_once_as_there_are_nodes(fan_out):
    """4 independent one-node jobs on 3 nodes: 3 at once, each on a node of
    its own (rank 0 first in inventory order), the 4th once one of them has
    ended, on the node it left; all in one run (one FB_WORKFLOW_ID). Judged
    from the jobs' own logs."""
    assert fan_out.rc == 0, fan_out.output
    spans = job_spans(fan_out.logs, FAN)
    assert most_at_once([spans[job][:2] for job in FAN]) == 3, spans
    assert len({run for _unused, _unused, run, _unused in spans.values()}) == 1, spans
    assert [fan_out.hosts(job) for job in FAN[:3]] == [[node] for node in NODES]
    # Each ran on the node it was given.
    assert {job: spans[job][3] for job in FAN} == {job: fan_out.hosts(job)[0] for job in FAN}, spans
    last_start, _unused, _unused, last_node = spans["fan-4"]
    before = [job for job in FAN[:3] if spans[job][3] == last_node]
    assert before and spans[before[0]][1] < last_start, spans


def test_a_fan_out_leaves_no_process(fan_out):
    assert fan_out.leftovers == NO_PROCESSES


# -- one job of a workflow ---------------------------------------------------

def test_naming_a_job_runs_only_that_job_and_says_its_dependencies_did_not_run(tmp_path):
    run = WorkflowRun("failing-branch.yml", tmp_path, job="right")
    assert run.rc == 0, run.output
    assert run.started() == ["right"]
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".log"] == ["right.log"]
    assert "jobs.right.depends-on: start not run first; -e job=right runs this one job only" in run.output


# -- task arrays -------------------------------------------------------------

@pytest.fixture(scope="module")
def task_array(tmp_path_factory):
    return WorkflowRun("task-array.yml", tmp_path_factory.mktemp("task-array"))


def test_task_array_runs_every_task_once_with_its_id_and_host_name(task_array):
    assert task_array.rc == 0, task_array.output
    records = task_records(task_array.logs / "sweep")
    assert sorted(records) == list(range(1, 9))
    for task_id, (hostname, env_hostname, _unused, _unused, _unused) in records.items():
        assert (hostname, env_hostname) == ("sweep-%d" % task_id,) * 2


def test_task_array_runs_at_most_concurrency_tasks_at_once(task_array):
    records = task_records(task_array.logs / "sweep").values()
    # 8 tasks of 2 s, 4 at a time: never more than 4, and they did overlap.
    assert most_at_once([(start, end) for _unused, _unused, _unused, start, end in records]) == 4


def test_task_array_spreads_tasks_over_the_nodes(task_array):
    """4 at a time on 3 nodes: every node runs tasks, none more than 2 at once."""
    records = task_records(task_array.logs / "sweep").values()
    for node in NODES:
        mine = [(start, end) for _unused, _unused, where, start, end in records if where == node]
        assert mine, "no task ran on %s" % node
        assert most_at_once(mine) <= 2, node


def test_task_array_job_log_tells_each_task_start_and_end(task_array):
    lines = task_array.log("sweep").splitlines()
    for task_id in range(1, 9):
        assert len([line for line in lines if re.match(
            r"fuzz.multinode: task sweep-%d started on fmn-workflow-node-\d$" % task_id, line)]) == 1
        assert lines.count("fuzz.multinode: task sweep-%d finished" % task_id) == 1


def test_task_array_leaves_no_process(task_array):
    assert task_array.leftovers == NO_PROCESSES


@pytest.fixture(scope="module")
def failing_tasks(tmp_path_factory):
    return WorkflowRun("task-array-failing.yml", tmp_path_factory.mktemp("task-array-failing"))


def test_failing_task_fails_the_job_after_the_started_tasks_finished(failing_tasks):
    assert failing_tasks.rc != 0
    assert ("all-at-once FAILED: task array all-at-once: 1 of 4 tasks failed: "
            "all-at-once-2 on fmn-workflow-node-2 (status 5)") in failing_tasks.failure()
    # Tasks 1, 3 and 4 had started; they ran to their end (3 s after task 2 failed).
    for task_id in (1, 3, 4):
        assert (failing_tasks.logs / "all-at-once" / ("task-%d.log" % task_id)).read_text() == (
            "task %d done\n" % task_id)


def test_failing_task_stops_new_tasks_from_starting(failing_tasks):
    assert ("one-at-a-time FAILED: task array one-at-a-time: 1 of 3 tasks failed: "
            "one-at-a-time-1 on fmn-workflow-node-1 (status 7); 2 not started") in failing_tasks.failure()
    assert sorted(p.name for p in (failing_tasks.logs / "one-at-a-time").iterdir()) == ["task-1.log"]
    assert "task one-at-a-time-2" not in failing_tasks.log("one-at-a-time")


def test_failing_tasks_leave_no_process(failing_tasks):
    assert failing_tasks.leftovers == NO_PROCESSES


# -- the bundled example: prepare -> 2-node Open MPI solve -> analyses -> report

@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    return WorkflowRun(PROJECT / "examples" / "pipeline.yml", tmp_path_factory.mktemp("pipeline"))


def test_pipeline_example_runs_every_stage_in_dependency_order(pipeline):
    assert pipeline.rc == 0, pipeline.output
    started = pipeline.started()
    assert started[:2] == ["prepare", "solve"]
    assert sorted(started[2:4]) == ["energy", "residual"]
    assert started[4:] == ["report"]
    assert pipeline.outcome_rows() == dict.fromkeys(started, "FINISHED")


def test_pipeline_example_stages_print_their_results(pipeline):
    # prepare and energy read the top-level file placed by the job's `files`.
    assert pipeline.log("prepare") == "settings ok\n"
    assert pipeline.log("energy") == "energy analysis on energy-0 with 2 settings\n"
    assert pipeline.log("residual") == "residual analysis done\n"
    assert pipeline.log("report") == "report written in /tmp\n"  # its cwd


def test_pipeline_example_solves_with_open_mpi_over_both_nodes(pipeline):
    """implementation: openmpi, nodes 2, cores 2: mpirun runs 4 ranks, two
    under each rank host name, and their output is in the job log."""
    lines = sorted(pipeline.log("solve").splitlines())
    assert lines == sorted("Hello world from processor solve-%d, rank %d out of 4 processors"
                           % (rank // 2, rank) for rank in range(4)), lines


def test_pipeline_example_leaves_no_process_and_no_job_file(pipeline):
    assert pipeline.leftovers == NO_PROCESSES
    for node in NODES:
        assert docker("exec", node, "test", "-e", "/tmp/solver.conf").returncode == 1, node


# -- resources ---------------------------------------------------------------

@pytest.fixture(scope="module")
def resources(tmp_path_factory):
    return WorkflowRun("resources.yml", tmp_path_factory.mktemp("resources"))


def cpu_list(text):
    """The CPUs of a kernel CPU list such as 0-3,6."""
    cpus = []
    for part in text.split(","):
        low, _unused, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def cpu_count(text):
    return len(cpu_list(text))


def test_each_rank_is_bound_to_its_cores(resources):
    lines = resources.log("bound").splitlines()
    found = dict(re.match(r"^(rank \d) Cpus_allowed_list:\s+(\S+)$", line).groups() for line in lines)
    assert sorted(found) == ["rank 0", "rank 1"], lines
    assert [cpu_count(found[rank]) for rank in sorted(found)] == [1, 1], found


def test_requests_larger_than_a_node_fail_the_job_before_it_starts(resources):
    """Each refused by the node the runner gave it (the jobs run at once,
    each on a node of its own)."""
    failure = resources.failure()
    assert re.search(
        r"too-many-cores FAILED: job too-many-cores cannot start on node %s: "
        r"jobs\.too-many-cores\.resource\.cpu\.cores: 4096 requested, but the node has \d+ CPUs"
        % resources.hosts("too-many-cores")[0], failure), failure
    assert re.search(
        r"too-much-memory FAILED: job too-much-memory cannot start on node %s: "
        r"jobs\.too-much-memory\.resource\.memory: 70368744177664 bytes requested, but the node "
        r"has \d+" % resources.hosts("too-much-memory")[0], failure), failure
    assert resources.outcome_rows()["bound"] == "FINISHED"
    for node in NODES:
        for job in ("too-many-cores", "too-much-memory"):
            assert docker("exec", node, "test", "-e", "/tmp/fmn-workflow-%s-ran" % job).returncode == 1
            assert not node_runtime.show(node, job)["registered"], (node, job)
    assert resources.leftovers == NO_PROCESSES


def test_memory_is_limited_to_the_request(resources):
    """64 MiB: 16 MiB fit; 256 MiB get the process killed by the kernel
    (SIGKILL: status 128 + 9), which fails the job."""
    assert resources.log("memory-fits") == "16 MiB used\n"
    assert resources.outcome_rows()["memory-fits"] == "FINISHED"
    assert ("memory-capped FAILED: rank 0 (memory-capped-0 on %s) exited with "
            "status 137" % resources.hosts("memory-capped")[0]) in resources.failure()
    assert "256 MiB used" not in resources.log("memory-capped")
    # The jobs' memory cgroups are removed at cleanup.
    for node in NODES:
        left = docker("exec", node, "find", node_runtime.registry.STATE_DIR, "-name", "memory-*-0").stdout
        assert left == "", (node, left)


def test_socket_affinity_takes_its_cores_from_one_socket(resources):
    cpus = re.match(r"^Cpus_allowed_list:\s+(\S+)\n\Z", resources.log("socket-bound")).group(1)
    chosen = sorted(cpu_list(cpus))
    assert len(chosen) == 2, cpus
    sockets = {docker("exec", NODES[0], "cat", "/sys/devices/system/cpu/cpu%d/topology/"
                      "physical_package_id" % cpu).stdout.strip() for cpu in chosen}
    assert len(sockets) == 1, sockets
