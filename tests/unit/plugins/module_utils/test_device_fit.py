"""Which hosts can hold a job's devices (plugins/module_utils/device_fit.py):
the controller's count of what a host needs agrees with the node
runtime's allocation for every kind of job, a job is refused naming the
field and every host's devices when too few hosts have enough, and placed
on the hosts that do. The refusal on a real cluster, before any host is
touched, is checked in molecule/containers."""

import pytest
from multinode_runtime import devices
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.module_utils import device_fit
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Job, TaskArray
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_job, plan_task_array

GPU = "nvidia.com/gpu"
OPTIONS = dict(user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10)


def make_job(nodes=1, gpus=1, task_array=None, kind="job"):
    return Job(name="train", image_uri="docker://alpine", command=["true"], nodes=nodes,
               implementation=None if task_array else "generic", devices={GPU: gpus},
               task_array=task_array, kind=kind)


def cluster(count):
    return [{"node": "node-%d" % (index + 1), "address": "10.0.0.%d" % (index + 1)} for index in range(count)]


def counts(*gpus):
    return [("node-%d" % (index + 1), None if found is None else {GPU: found} if found else {})
            for index, found in enumerate(gpus)]


@pytest.mark.parametrize("job, hosts, local", [
    (make_job(nodes=3), 3, False),
    (make_job(nodes=3), 1, True),
    (make_job(task_array=TaskArray(1, 10)), 4, False),
    (make_job(task_array=TaskArray(1, 10)), 2, False),
    (make_job(task_array=TaskArray(1, 10, 3)), 2, False),
    (make_job(task_array=TaskArray(1, 3, 8)), 3, False),
    (make_job(task_array=TaskArray(1, 10, 3)), 1, True),
    (make_job(task_array=TaskArray(1, 5)), 1, True),
])
def test_a_hosts_share_is_what_the_runtime_allocates_on_its_busiest_node(job, hosts, local):
    """slots_per_host mirrors the runtime's slots_here (devices.py) on the
    spec the controller renders: ranks, tasks round-robin, concurrency,
    local mode's one machine."""
    nodes = [{"node": "localhost", "address": "127.0.0.1"}] if local else cluster(hosts)
    if job.task_array is None:
        spec = plan_job(job, nodes, local=local, **OPTIONS)
    else:
        spec = plan_task_array(job, nodes, local=local, **OPTIONS)
    runtime = JobSpec.from_dict(spec)
    busiest = max(devices.slots_here(runtime, node["node"]) for node in nodes)
    assert device_fit.slots_per_host(job.to_dict(), hosts, local) == busiest


def test_a_job_is_refused_naming_the_field_what_each_host_needs_and_what_each_has():
    job = make_job(nodes=4, gpus=2).to_dict()
    message = device_fit.refusal(job, counts(2, 1, 2, 0), local=False,
                                 problems={"node-4": ["CDI specification /etc/cdi/x.yaml is YAML, and ..."]})
    assert message == (
        "jobs.train.resource.devices: job train needs 4 hosts with 2 nvidia.com/gpu each (one rank a host, "
        "2 nvidia.com/gpu a rank), and 2 of the run's 4 hosts have that many CDI devices: node-1 has "
        "2 nvidia.com/gpu; node-2 has 1 nvidia.com/gpu; node-3 has 2 nvidia.com/gpu; node-4 has none; "
        "node-4 passed over CDI specification /etc/cdi/x.yaml is YAML, and ...")


def test_local_mode_needs_every_ranks_devices_on_the_one_machine():
    job = make_job(nodes=3, gpus=2, kind="service").to_dict()
    assert device_fit.refusal(job, [("localhost", {GPU: 4})], local=True) == (
        "services.train.resource.devices: service train needs 1 host with 6 nvidia.com/gpu (3 ranks at once "
        "on a host, 2 nvidia.com/gpu a rank), and 0 of the run's 1 hosts have that many CDI devices: "
        "localhost has 4 nvidia.com/gpu")
    assert device_fit.refusal(job, [("localhost", {GPU: 6})], local=True) is None


def test_a_job_fits_when_enough_hosts_have_enough_and_is_placed_on_those():
    job = make_job(nodes=2, gpus=2).to_dict()
    assert device_fit.refusal(job, counts(2, 1, 2, 2), local=False) is None
    assert device_fit.placement(job, counts(2, 1, 2, 2), local=False) == (
        ["node-1", "node-3", "node-4"], 2, {GPU: 2})


def test_a_host_that_could_not_tell_counts_as_having_enough():
    job = make_job(nodes=2, gpus=8).to_dict()
    assert device_fit.refusal(job, counts(None, None), local=False) is None


def test_a_task_array_spreads_over_fewer_hosts_when_only_those_have_room():
    """10 tasks on 4 hosts would need 3 GPUs a host; on 2 hosts, with its
    concurrency 2 (one task a host at a time, unset: as many as hosts),
    2 a host."""
    job = make_job(task_array=TaskArray(1, 10), gpus=1).to_dict()
    assert device_fit.placement(job, counts(2, 1, 2, 2), local=False) == (
        ["node-1", "node-3", "node-4"], 2, {GPU: 2})
    assert device_fit.refusal(job, counts(0, 0), local=False) == (
        "jobs.train.resource.devices: job train needs 1 host with 1 nvidia.com/gpu (one task a host, "
        "1 nvidia.com/gpu a task), and 0 of the run's 2 hosts have that many CDI devices: node-1 has none; "
        "node-2 has none")


def test_a_job_without_devices_takes_the_first_hosts_and_is_never_refused():
    job = Job(name="plain", image_uri="docker://alpine", command=["true"], nodes=2,
              implementation="generic").to_dict()
    assert device_fit.placement(job, counts(0, 0, 0), local=False) == (["node-1", "node-2", "node-3"], 2, {})
    assert device_fit.refusal(job, counts(0, 0), local=False) is None
