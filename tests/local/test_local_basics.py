"""Local mode, the basics (the `basics` share of conftest.py's finishing
workflow, run without an inventory as a user does): the spec's
helper and script examples print the documented lines, every rank of a
4-rank job has its own host name, environment and loopback address, a task
array runs every task with its id and host name, and the machine is left as
it was."""

import sys

import local_jobs as lj

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from concurrency import most_at_once, task_records  # noqa: E402  (shared with molecule/workflow)

HELPER = "generic-multinode-helper"
SCRIPT = "generic-multinode-script"
RANKS = range(4)


def test_the_workflow_runs(basics):
    assert basics.rc == 0, basics
    assert basics.failure() == "", basics


# -- the spec's examples ---------------------------------------------------------

def test_helper_example_prints_the_documented_lines(basics):
    """examples/generic-multinode-helper.yml: exec_rank0 on the head,
    exec_rankN on the worker (forwarded), wait_rank0."""
    assert basics.lines(HELPER) == [
        "generic-multinode-helper-0 is the head node",
        "generic-multinode-helper-1 is a worker node",
    ], basics


def test_script_example_prints_the_documented_lines(basics):
    """examples/generic-multinode-script.yml, with its tab, the IFS loop
    over MULTINODE_HOSTLIST_NOSLOTS and a bare wrapper call."""
    assert basics.lines(SCRIPT) == [
        "generic-multinode-script-0 is the head node",
        "generic-multinode-script-1 is a worker node",
    ], basics


def test_worker_output_is_in_the_worker_rank_log(basics):
    assert basics.rank_log(HELPER, 1) == "generic-multinode-helper-1 is a worker node\n", basics


# -- rank names and environment (tests/fuzzfiles/local/ranks.yml) ------------------

def ranks_lines(run, rank):
    return [line for line in run.lines("ranks") if line.startswith("rank=%d " % rank)]


def test_every_rank_has_its_host_name_rank_user_and_job_env(basics):
    """`hostname` and $HOSTNAME are <job>-<r> on every rank, RANK is r,
    every rank runs as the job user and has the job's env."""
    for rank in RANKS:
        assert ("rank=%d hostname=ranks-%d HOSTNAME=ranks-%d user=fuzz greeting=hello from the job env"
                % (rank, rank, rank)) in ranks_lines(basics, rank), basics.log("ranks")


def test_multinode_variables_are_set_on_rank0_only(basics):
    """The six MULTINODE_* variables on the head, none on a worker (the job
    env's MULTINODE_WRAPPER_FORWARD_STREAMS is everywhere); the head's
    values: 4 rank names of 1 slot, the head at 127.0.0.1."""
    six = "MULTINODE_HOSTLIST MULTINODE_HOSTLIST_NOSLOTS MULTINODE_NODE_IP MULTINODE_RSH_WRAPPER " \
          "MULTINODE_SSH_WRAPPER MULTINODE_TOTAL_SLOTS "
    assert "rank=0 mn=%sMULTINODE_WRAPPER_FORWARD_STREAMS " % six in ranks_lines(basics, 0), basics.log("ranks")
    assert ("rank=0 hostlist=ranks-0:1,ranks-1:1,ranks-2:1,ranks-3:1 noslots=ranks-0,ranks-1,ranks-2,ranks-3 "
            "total=4 ip=127.0.0.1") in ranks_lines(basics, 0), basics.log("ranks")
    for rank in RANKS[1:]:
        assert "rank=%d mn=MULTINODE_WRAPPER_FORWARD_STREAMS " % rank in ranks_lines(basics, rank), \
            basics.log("ranks")
        assert "rank=%d hostlist=unset noslots=unset total=unset ip=unset" % rank in ranks_lines(basics, rank)


def test_every_rank_name_resolves_on_every_rank_to_its_own_loopback_address(basics):
    """Rank r is 127.0.0.(r+1), and every rank resolves every rank name."""
    resolves = "resolves=" + "".join("ranks-%d=127.0.0.%d " % (r, r + 1) for r in RANKS)
    for rank in RANKS:
        assert "rank=%d %s" % (rank, resolves) in ranks_lines(basics, rank), basics.log("ranks")


def test_every_line_of_every_rank_is_in_the_job_log_once(basics):
    assert len(basics.lines("ranks")) == 4 * len(RANKS), basics.log("ranks")
    for rank in RANKS[1:]:  # and the workers' lines are their rank logs'
        assert sorted(basics.rank_log("ranks", rank).splitlines()) == sorted(ranks_lines(basics, rank))


# -- a task array (tests/fuzzfiles/workflow/task-array.yml) ----------------------

def test_task_array_runs_every_task_once_with_its_id_and_host_name(basics):
    """8 tasks, each once, FB_TASK_ID 1-8, host name and HOSTNAME sweep-<id>,
    each its own log task-<id>.log."""
    records = task_records(basics.logs / "sweep")
    assert sorted(records) == list(range(1, 9)), basics
    for task_id, (hostname, env_hostname, _unused, _unused, _unused) in records.items():
        assert (hostname, env_hostname) == ("sweep-%d" % task_id,) * 2


def test_task_array_runs_at_most_concurrency_tasks_at_once(basics):
    """concurrency 4 on the one machine: never more than 4, and they overlap."""
    intervals = [(start, end) for _unused, _unused, _unused, start, end in task_records(basics.logs / "sweep").values()]
    assert 2 <= most_at_once(intervals) <= 4, intervals


def test_task_array_job_log_tells_each_task_start_and_end(basics):
    lines = basics.lines("sweep")
    for task_id in range(1, 9):
        assert lines.count("fuzz.multinode: task sweep-%d started on localhost" % task_id) == 1, lines
        assert lines.count("fuzz.multinode: task sweep-%d finished" % task_id) == 1, lines


# -- the machine is left as it was ---------------------------------------------

def test_nothing_of_the_jobs_is_left_on_the_machine(basics):
    """No process of any job (setsid'ed ones included), no /etc/hosts block,
    no job directory, and the machine's own host name unchanged."""
    assert basics.state == lj.cleaned(basics.state, basics.jobs), basics.state
    assert basics.state["hostname"] == basics.hostname_before
