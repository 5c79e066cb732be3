"""Local mode planning (plan_job / plan_task_array with local=True): every
rank or task on the one node given, each rank reachable at its own loopback
address so MPI launchers start it through the wrapper. Pure logic."""

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    parse_workflow,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import (
    plan_job,
    plan_task_array,
)

OPTIONS = dict(user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10, local=True)
LOCALHOST = [{"node": "localhost", "address": "127.0.0.1"}]

THREE_RANKS = """
version: v4
jobs:
  solve:
    image: {uri: "docker://alpine"}
    command: [/bin/sh, -c, "echo $MULTINODE_HOSTLIST"]
    multinode: {nodes: 3, implementation: openmpi}
"""

SWEEP = """
version: v4
jobs:
  sweep:
    image: {uri: "docker://alpine"}
    command: [/bin/echo, "$FB_TASK_ID"]
    task-array: {start: 1, end: 5, concurrency: 2}
"""


def test_every_rank_runs_on_the_one_node_at_its_own_loopback_address():
    spec = plan_job(parse_workflow(THREE_RANKS).jobs["solve"], LOCALHOST, **OPTIONS)
    assert spec["local"] is True
    assert [(r["rank"], r["name"], r["node"], r["address"]) for r in spec["ranks"]] == [
        (0, "solve-0", "localhost", "127.0.0.1"),
        (1, "solve-1", "localhost", "127.0.0.2"),
        (2, "solve-2", "localhost", "127.0.0.3"),
    ]
    head = spec["ranks"][0]["env"]
    assert head["MULTINODE_NODE_IP"] == "127.0.0.1"
    assert head["MULTINODE_HOSTLIST"] == "solve-0:1,solve-1:1,solve-2:1"
    # The vendor-way launcher targets the rank names, as on a cluster.
    assert spec["launcher"][:3] == ["mpirun", "-H", "solve-0:1,solve-1:1,solve-2:1"]


def test_a_cluster_plan_is_not_local_and_needs_a_node_per_rank():
    job = parse_workflow(THREE_RANKS).jobs["solve"]
    options = {**OPTIONS, "local": False}
    with pytest.raises(FuzzfileError, match=r"needs 3 node\(s\)"):
        plan_job(job, LOCALHOST, **options)
    with pytest.raises(FuzzfileError, match="every rank needs its own node"):
        plan_job(job, LOCALHOST * 3, **options)
    nodes = [{"node": "n%d" % i, "address": "10.0.0.%d" % i} for i in (1, 2, 3)]
    assert plan_job(job, nodes, **options)["local"] is False


def test_local_mode_takes_exactly_one_node():
    job = parse_workflow(THREE_RANKS).jobs["solve"]
    two = LOCALHOST + [{"node": "other", "address": "127.0.0.1"}]
    with pytest.raises(FuzzfileError, match="local mode runs job 'solve' on exactly one node, got 2"):
        plan_job(job, two, **OPTIONS)
    with pytest.raises(FuzzfileError, match=r"nodes\[0\]\.address: must be an IP address"):
        plan_job(job, [{"node": "localhost", "address": "here"}], **OPTIONS)


def test_a_local_task_array_runs_its_tasks_on_the_one_node():
    spec = plan_task_array(parse_workflow(SWEEP).jobs["sweep"], LOCALHOST, **OPTIONS)
    assert spec["local"] is True
    assert {t["node"] for t in spec["ranks"]} == {"localhost"}
    assert [t["name"] for t in spec["ranks"]] == ["sweep-%d" % i for i in range(1, 6)]
    assert [t["argv"] for t in spec["ranks"]] == [["/bin/echo", str(i)] for i in range(1, 6)]
    assert spec["task_array"]["concurrency"] == 2
