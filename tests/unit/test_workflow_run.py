"""What run-job.yml runs from a workflow (select_run) and how a task array is
planned (plan_task_array): pure logic, no Ansible."""

import textwrap

import pytest
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    check_rank_names,
    not_executed_yet,
    parse_workflow,
    require_runnable,
    select_run,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import (
    plan_resources,
    plan_task_array,
)

OPTIONS = dict(user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10)


def workflow(jobs, services=""):
    return parse_workflow("version: v4\njobs:\n" + textwrap.indent(textwrap.dedent(jobs), "  ")
                          + services)


def nodes(count):
    return [{"node": "n%d" % i, "address": "10.0.0.%d" % i} for i in range(1, count + 1)]


FAN = """\
report: {image: {uri: docker://x}, command: ["true"], depends-on: [{name: left}, {name: right}]}
left: {image: {uri: docker://x}, command: ["true"], depends-on: [{name: start}]}
right: {image: {uri: docker://x}, command: ["true"], requires: [start]}
start: {image: {uri: docker://x}, command: ["true"]}
"""


# -- select_run ----------------------------------------------------------------

def test_without_a_name_every_job_runs_in_dependency_order():
    run = select_run(workflow(FAN))
    assert [job.name for job in run] == ["start", "left", "right", "report"]


def test_a_named_job_runs_alone_and_is_told_its_dependencies_do_not_run():
    run = select_run(workflow(FAN), "report")
    assert [job.name for job in run] == ["report"]
    assert not_executed_yet(run[0]) == [
        "jobs.report.depends-on: left, right not run first; -e job=report runs this one job only"]
    assert not_executed_yet(run[0], whole_workflow=True) == []


def test_an_unknown_job_name_is_refused_listing_the_jobs():
    with pytest.raises(FuzzfileError) as err:
        select_run(workflow(FAN), "solve")
    assert str(err.value) == "jobs: no job named 'solve'; jobs: report, left, right, start"


def test_a_job_depending_on_a_service_runs_after_it_with_the_whole_workflow():
    wf = workflow("app: {image: {uri: docker://x}, command: [\"true\"], "
                  "depends-on: [{name: db, status: RUNNING}]}\n",
                  "services:\n  db: {image: {uri: docker://x}, command: [\"true\"]}\n")
    run = select_run(wf)
    assert [(unit.name, unit.kind) for unit in run] == [("db", "service"), ("app", "job")]
    assert [not_executed_yet(unit, whole_workflow=True) for unit in run] == [[], []]
    # Named on its own, it runs (its dependencies never do), and is told so.
    assert [job.name for job in select_run(wf, "app")] == ["app"]
    assert not_executed_yet(wf.jobs["app"]) == [
        "jobs.app.depends-on: db not run first; -e job=app runs this one job only"]


def test_a_service_is_named_by_job_like_a_job():
    wf = workflow("app: {image: {uri: docker://x}, command: [\"true\"], "
                  "depends-on: [{name: db, status: RUNNING}]}\n",
                  "services:\n  db: {image: {uri: docker://x}, command: [\"true\"],"
                  " depends-on: [{name: app0}]}\n"
                  "  app0: {image: {uri: docker://x}, command: [\"true\"]}\n")
    run = select_run(wf, "db")
    assert [(unit.name, unit.kind) for unit in run] == [("db", "service")]
    assert not_executed_yet(run[0]) == [
        "services.db.depends-on: app0 not run first; -e job=db runs this one service only"]


def test_a_task_array_of_multinode_jobs_is_refused_for_its_clashing_names():
    wf = workflow("sweep: {image: {uri: docker://x}, command: [\"true\"], "
                  "task-array: {start: 0, end: 3}, "
                  "multinode: {nodes: 2, implementation: generic}}\n")
    expected = ("jobs.sweep: a task array of multinode jobs cannot run: task host names "
                "sweep-<task> and rank host names sweep-<rank> would be the same names; use a "
                "task array of single-node jobs, or one multinode job")
    for name in (None, "sweep"):
        # The gate the fuzzfile module applies to every job it would run.
        with pytest.raises(FuzzfileError) as err:
            require_runnable(select_run(wf, name)[0])
        assert str(err.value) == expected
    with pytest.raises(FuzzfileError) as err:  # and rank_plan, planning it anyway
        plan_task_array(wf.jobs["sweep"], nodes(1), **OPTIONS)
    assert str(err.value) == expected


# -- task arrays -------------------------------------------------------------

SWEEP = """\
sweep:
  image: {uri: docker://x}
  command: [/bin/sh, -c, "echo $FB_TASK_ID $HOSTNAME $A"]
  env: [A=1, FB_TASK_ID=99]
  task-array: {start: 3, end: 7, concurrency: 2}
"""


def sweep(jobs=SWEEP):
    return workflow(jobs).jobs["sweep"]


def test_each_task_expands_the_run_id_in_its_command():
    spec = plan_task_array(sweep(SWEEP.replace("$A", "$FB_WORKFLOW_ID")), nodes(2),
                           run="20261201T165012Z-a1b2c3", **OPTIONS)
    assert spec["ranks"][0]["argv"] == ["/bin/sh", "-c", "echo 3 sweep-3 20261201T165012Z-a1b2c3"]
    assert spec["run"] == "20261201T165012Z-a1b2c3"


def test_task_array_uses_at_most_concurrency_hosts():
    assert sweep().max_hosts == 2
    assert sweep(SWEEP.replace(", concurrency: 2", "")).max_hosts == 5  # one per task
    assert sweep(SWEEP.replace("concurrency: 2", "concurrency: 9")).max_hosts == 5
    assert workflow(FAN).jobs["start"].max_hosts == 1


def test_task_array_tasks_get_their_id_host_name_log_and_own_expansion():
    spec = plan_task_array(sweep(), nodes(2), **OPTIONS)
    assert spec["task_array"] == {"start": 3, "end": 7, "concurrency": 2}
    # The runtime names a task's log (registry.log_name).
    logs = [rank.log_name for rank in JobSpec.from_dict(spec).ranks]
    rows = [(t["rank"], t["task_id"], t["name"], t["node"], log) for t, log in zip(spec["ranks"], logs, strict=True)]
    assert rows == [
        (0, 3, "sweep-3", "n1", "task-3.log"),
        (1, 4, "sweep-4", "n2", "task-4.log"),
        (2, 5, "sweep-5", "n1", "task-5.log"),
        (3, 6, "sweep-6", "n2", "task-6.log"),
        (4, 7, "sweep-7", "n1", "task-7.log"),
    ]
    task = spec["ranks"][2]
    assert task["env"] == {"A": "1", "HOSTNAME": "sweep-5", "FB_TASK_ID": "5"}
    assert task["argv"] == ["/bin/sh", "-c", "echo 5 sweep-5 1"]
    assert spec["argv"] == []
    assert "jobs.sweep.env: FB_TASK_ID is set by the runtime; the job's value is ignored" in (
        spec["unsupported"])


def test_task_array_without_concurrency_runs_one_task_per_node_at_a_time():
    spec = plan_task_array(sweep(SWEEP.replace(", concurrency: 2", "")), nodes(3), **OPTIONS)
    assert spec["task_array"]["concurrency"] == 3


def test_task_array_script_mode_expands_args_per_task():
    job = sweep("sweep:\n  image: {uri: docker://x}\n  script: 'echo \"$1\"'\n"
                "  args: [$FB_TASK_ID]\n  task-array: {start: 0, end: 1}\n")
    spec = plan_task_array(job, nodes(1), **OPTIONS)
    assert spec["mode"] == "script"
    assert [t["argv"] for t in spec["ranks"]] == [["0"], ["1"]]
    assert [t["node"] for t in spec["ranks"]] == ["n1", "n1"]


@pytest.mark.parametrize("count", [0, 3])
def test_task_array_node_count_must_fit(count):
    with pytest.raises(FuzzfileError) as err:
        plan_task_array(sweep(), nodes(count), **OPTIONS)
    assert str(err.value) == (
        "nodes: task array 'sweep' runs on 1 to 2 node(s) (its tasks, at most "
        "task-array.concurrency), got %d" % count)


def test_task_host_names_must_fit_one_dns_label():
    name = "t" * 60
    job = workflow(SWEEP.replace("sweep:", name + ":").replace("end: 7", "end: 1000")).jobs[name]
    with pytest.raises(FuzzfileError) as err:
        check_rank_names(job)
    assert str(err.value) == (
        "jobs.%s: task host name '%s-1000' is longer than 63 characters; use a shorter job name"
        % (name, name))


# -- resources -----------------------------------------------------------------

def test_resources_per_rank_multiply_memory_by_cores_when_by_core():
    job = sweep("sweep:\n  image: {uri: docker://x}\n  command: [\"true\"]\n"
                "  resource: {cpu: {cores: 3}, memory: {size: 1GiB, by-core: true}}\n")
    assert plan_resources(job) == {"cores": 3, "affinity": None, "memory_bytes": 3 << 30,
                                   "devices": {}}
    job = sweep("sweep:\n  image: {uri: docker://x}\n  command: [\"true\"]\n"
                "  resource: {memory: {size: 512MiB}}\n")
    assert plan_resources(job) == {"cores": None, "affinity": None, "memory_bytes": 512 << 20,
                                   "devices": {}}


def test_resources_per_rank_carry_the_devices_each_rank_or_task_gets():
    job = sweep("sweep:\n  image: {uri: docker://x}\n  command: [\"true\"]\n"
                "  resource: {devices: {nvidia.com/gpu: 2, amd.com/gpu: 1}, exclusive: true}\n")
    assert plan_resources(job)["devices"] == {"nvidia.com/gpu": 2, "amd.com/gpu": 1}
