"""The filters over the node role's device counts (plugins/filter/device_fit.py):
they read each host's fuzz.multinode.node_state result from hostvars, the
refusal names the hosts' skipped CDI specifications, and one job at a
time (roles/workflow/tasks/step.yml) runs on the first hosts with its
devices, or on the first hosts when none tell."""

from ansible_collections.fuzz.multinode.plugins.filter.device_fit import device_refusals, job_hosts, node_devices

GPU = "nvidia.com/gpu"
HOSTVARS = {
    "n1": {"fuzz_multinode_node_state": {"devices": {GPU: 1}, "device_problems": ["CDI specification x: bad"]}},
    "n2": {"fuzz_multinode_node_state": {"devices": {GPU: 4}, "device_problems": []}},
    "n3": {"fuzz_multinode_node_state": {"devices": {GPU: 2}}},
    "n4": {},  # not checked (no node role): unknown
}
TRAIN = {"name": "train", "nodes": 2, "max_hosts": 2, "devices": {GPU: 2}}
PLAIN = {"name": "plain", "nodes": 2, "max_hosts": 2, "devices": {}}


def test_each_hosts_devices_as_the_node_role_counted_them():
    assert node_devices(["n1", "n4"], HOSTVARS) == {"n1": {GPU: 1}, "n4": None}


def test_jobs_that_cannot_have_their_devices_are_refused_naming_what_each_host_passed_over():
    assert device_refusals([TRAIN, PLAIN], ["n1", "n2", "n3"], HOSTVARS) == []
    assert device_refusals([dict(TRAIN, nodes=3), PLAIN], ["n1", "n2", "n3"], HOSTVARS) == [
        "jobs.train.resource.devices: job train needs 3 hosts with 2 nvidia.com/gpu each (one rank a host, "
        "2 nvidia.com/gpu a rank), and 2 of the run's 3 hosts have that many CDI devices: n1 has "
        "1 nvidia.com/gpu; n2 has 4 nvidia.com/gpu; n3 has 2 nvidia.com/gpu; n1 passed over CDI specification x: bad"]
    assert device_refusals([dict(TRAIN, nodes=3)], ["n2", "n3", "n4"], HOSTVARS, local=False) == []


def test_one_job_at_a_time_runs_on_the_first_hosts_with_its_devices():
    assert job_hosts(TRAIN, ["n1", "n2", "n3", "n4"], HOSTVARS) == ["n2", "n3"]
    assert job_hosts(PLAIN, ["n1", "n2", "n3", "n4"], HOSTVARS) == ["n1", "n2"]
    assert job_hosts(dict(TRAIN, devices={GPU: 8}), ["n1", "n2", "n3"], HOSTVARS) == ["n1", "n2"]
