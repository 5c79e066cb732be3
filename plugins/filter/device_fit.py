# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.node_devices, device_refusals, job_hosts: the devices
each host has (as fuzz.multinode.node_state counted them), the jobs that
cannot run on the run's hosts for lack of them, and the hosts a job runs
on when the workflow runs one job at a time (module_utils/device_fit.py
decides; these read Ansible's hostvars for it)."""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.module_utils import device_fit


def _state(hostvars, host):
    return hostvars[host].get("fuzz_multinode_node_state") or {}


def node_devices(hosts, hostvars):
    """{host: {kind: count}, or None where the host could not tell}."""
    return {host: _state(hostvars, host).get("devices") for host in hosts}


def device_refusals(jobs, hosts, hostvars, local=False):
    counts = [(host, _state(hostvars, host).get("devices")) for host in hosts]
    problems = {host: _state(hostvars, host).get("device_problems") or [] for host in hosts}
    found = (device_fit.refusal(job, counts, bool(local), problems) for job in jobs)
    return [message for message in found if message]


def job_hosts(job, hosts, hostvars, local=False):
    """The first hosts that can hold the job's devices, as many as it takes
    (the first hosts when too few can: their registration then refuses it,
    naming what is missing)."""
    able, count, _unused = device_fit.placement(
        job, [(host, _state(hostvars, host).get("devices")) for host in hosts], bool(local))
    return able[:count] if len(able) >= count else list(hosts)[:count]


class FilterModule:
    def filters(self):
        return {"node_devices": node_devices, "device_refusals": device_refusals, "job_hosts": job_hosts}
