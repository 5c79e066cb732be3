"""The rank_nodes filter: each host of the job with the address the others
reach it by, in the order the job role has always chosen it."""

from ansible_collections.fuzz.multinode.plugins.filter.rank_nodes import rank_nodes


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
