"""The rank_nodes filter: each host of the job with the address the others
reach it by, in the order the job role has always chosen it."""

from unittest import mock

from ansible_collections.fuzz.multinode.plugins.action.rank_plan import ActionModule as RankPlan
from ansible_collections.fuzz.multinode.plugins.filter.rank_nodes import rank_nodes
from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import load_fuzzfile


def test_an_address_set_for_the_host_wins_then_the_node_roles_then_the_facts():
    hostvars = {
        "a": {"fuzz_multinode_address": "10.9.9.9", "fuzz_multinode_node_state": {"address": "10.0.0.1"}},
        "b": {"fuzz_multinode_node_state": {"address": "10.0.0.2"}, "ansible_default_ipv4": {"address": "1.1.1.1"}},
        "c": {"fuzz_multinode_node_state": {"address": ""}, "ansible_default_ipv4": {"address": "10.0.0.3"}},
        "d": {"fuzz_multinode_address": ""},
    }
    assert rank_nodes(["c", "a", "b", "d"], hostvars) == [
        {"node": "c", "address": "10.0.0.3"},
        {"node": "a", "address": "10.9.9.9"},
        {"node": "b", "address": "10.0.0.2"},
        {"node": "d", "address": ""},
    ]


TWO_NODES = """
version: v4
jobs:
  pair:
    image: {uri: "docker://alpine"}
    command: [/bin/true]
    multinode: {nodes: 2, implementation: generic}
"""


def test_a_host_without_any_address_fails_the_rank_plan_task_naming_it_and_the_fix(tmp_path):
    """The node role's check found no address on node-2 (no default route)
    and none is set for it: the rank_plan task the job role feeds with this
    filter fails with a message, no traceback, that names the host and the
    variable to set."""
    path = tmp_path / "pair.yml"
    path.write_text(TWO_NODES)
    job = load_fuzzfile({"path": str(path), "job": "pair", "secret_names": None})[0]["job"]
    hostvars = {"node-1": {"fuzz_multinode_node_state": {"address": "10.0.0.1"}},
                "node-2": {"fuzz_multinode_node_state": {"address": ""}}}
    task = mock.MagicMock(args={"job": job, "nodes": rank_nodes(["node-1", "node-2"], hostvars)},
                          async_val=0, check_mode=False)
    plugin = RankPlan(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    result = plugin.run(task_vars={})
    assert result["failed"]
    assert result["msg"] == ("nodes[1].address: node-2 has no default IPv4 address; set fuzz_multinode_address "
                             "for it to the address the other nodes reach it by")
