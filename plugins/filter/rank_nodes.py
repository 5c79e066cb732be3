# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.rank_nodes: the job's hosts as rank_plan's `nodes`, each
with the address the other nodes reach it by (see rank_nodes.yml)."""

from __future__ import annotations


def node_address(host_vars):
    """A node's address: fuzz_multinode_address, else the one the node
    role's check found (fuzz.multinode.node_state), else the default IPv4
    fact, else empty (rank_plan then fails, naming the node)."""
    for found in (host_vars.get("fuzz_multinode_address"),
                  (host_vars.get("fuzz_multinode_node_state") or {}).get("address"),
                  (host_vars.get("ansible_default_ipv4") or {}).get("address")):
        if found:
            return str(found)
    return ""


def rank_nodes(hosts, hostvars):
    return [{"node": host, "address": node_address(hostvars[host])} for host in hosts]


class FilterModule:
    def filters(self):
        return {"rank_nodes": rank_nodes}
