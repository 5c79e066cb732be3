"""Devices: a node's CDI devices, and which of them each job on the node
holds (resource.devices).

Where they come from: the node's Container Device Interface (CDI)
specifications (cdi.py reads them).

Allocation: at registration (prepare, under the node's claims lock, beside
check_resources) a job that asks for devices gets, for each of its ranks or
tasks that may run on this node at once (a slot), `count` devices of each
kind that no other job registered here holds. The allocation is recorded in
the job's directory (DEVICES_FILE, root's), the one record of which job
holds which device: cleanup, which removes the directory, frees them. A node
with too few refuses the job before anything of it is written there.

What a rank gets: the job's container has the job's devices here (`podman
run --device KIND=NAME`: CDI, Podman makes the edits); every rank's (or
task's) environment has the CDI env edits of its own slot's devices and,
for nvidia.com/gpu, CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES naming
them. A rank has its slot by its place among the node's ranks; a task
takes a free slot when it starts (task_slot), held while its launcher
lives. On the bare host the run's sandbox hides the device nodes of every
device that is not the job's (hidden_paths, host_sandbox.py).
"""

import fcntl
import json
import os

from . import cdi, registry
from .cdi import CDI_DIRS, Device
from .errors import RuntimeFailure

# The environment naming a rank's devices of a kind, as the vendor's
# toolkits read it.
VISIBLE_ENV = {"nvidia.com/gpu": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")}


def read_node_devices(dirs=None, strict=True):
    """cdi.read_node_devices, failing as the runtime fails."""
    try:
        return cdi.read_node_devices(dirs or CDI_DIRS, strict)
    except cdi.CdiError as exc:
        raise RuntimeFailure(str(exc)) from None


# -- allocation at registration ---------------------------------------------

def field_path(spec, kind):
    """The Fuzzfile field that asks for devices of `kind`."""
    return "%s.%s.resource.devices.%s" % ("services" if spec.service is not None else "jobs", spec.job, kind)


def slots_here(spec, node):
    """How many of the job's ranks or tasks may run on `node` at once: each
    gets devices of its own."""
    here = sum(1 for rank in spec.ranks if rank.node == node)
    if spec.task_array is not None:
        return min(here, max(1, spec.task_array.concurrency))
    return here


def read_allocation(job):
    """The job's devices here as recorded at its registration, or None."""
    try:
        with open(registry.job_path(job, registry.DEVICES_FILE)) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RuntimeFailure("the device record of job %s is unreadable: %s" % (job, exc)) from None
    return data if isinstance(data, dict) else None


def _held_by_others(job):
    """{(kind, name): the job holding it} of every device name that a job
    registered here, other than `job`, holds."""
    held = {}
    for other in registry.registered_jobs():
        if other == job or not registry.JOB_NAME_RE.match(other):
            continue
        try:
            allocation = read_allocation(other)
        except RuntimeFailure:
            allocation = None
        for slot in (allocation or {}).get("slots", []):
            for kind, devices in slot.items():
                for device in devices:
                    for name in device.get("names", []):
                        held[(kind, name)] = other
    return held


def allocate(spec, node, dirs=None):
    """The job's devices here: {"slots": [{kind: [device]} for each slot],
    "common_env": {kind: [KEY=VALUE]}}, devices no other job here holds;
    None when the job asks for none or has no rank here. Called under the
    node's claims lock, before anything of the job is written: a node with
    too few refuses the job, naming the node, the field, what was wanted
    and what the node has."""
    wanted = spec.resources.devices
    slots = slots_here(spec, node)
    if not wanted or not slots:
        return None
    dirs = dirs or CDI_DIRS
    devices, common = read_node_devices(dirs)
    held = _held_by_others(spec.job)
    chosen, problems = {}, []
    for kind in sorted(wanted):
        everything = devices.get(kind, [])
        free = [d for d in everything if not any((kind, name) in held for name in d.names)]
        need = wanted[kind] * slots
        if len(free) >= need:
            chosen[kind] = free[:need]
            continue
        who = "rank" if spec.task_array is None else "task"
        each = "%d wanted (%d for each of %d %s%s at once here)" % (
            need, wanted[kind], slots, who, "s" if slots > 1 else "")
        if not everything:
            problems.append("%s: %s, but the node has none (no CDI specification in %s lists a device "
                            "of kind %s)" % (field_path(spec, kind), each, " or ".join(dirs), kind))
            continue
        holders = sorted({held[(kind, name)] for d in everything for name in d.names if (kind, name) in held})
        problems.append("%s: %s, but the node has %d%s" % (
            field_path(spec, kind), each, len(everything),
            " (%d free; the others held by job %s)" % (len(free), ", ".join(holders)) if holders else ""))
    if problems:
        raise RuntimeFailure("job %s cannot start on node %s: %s" % (spec.job, node, "; ".join(problems)))
    return {"slots": [{kind: [d.to_dict() for d in chosen[kind][i * wanted[kind]:(i + 1) * wanted[kind]]]
                       for kind in chosen} for i in range(slots)],
            "common_env": {kind: list(common.get(kind, [])) for kind in chosen}}


def record_allocation(job, allocation):
    """Keep the job's devices in its directory (after it is made, still
    under the claims lock, so the next job's allocate sees them)."""
    registry.write_file(registry.job_path(job, registry.DEVICES_FILE), json.dumps(allocation), 0o600)


# -- what the job's sandbox and its ranks get -----------------------------------

def _job_devices(allocation):
    """Every (kind, device dict) of an allocation, each once."""
    seen = []
    for slot in (allocation or {}).get("slots", []):
        for kind in sorted(slot):
            for device in slot[kind]:
                if (kind, device) not in seen:
                    seen.append((kind, device))
    return seen


def podman_arguments(job):
    """`podman run`'s arguments giving the job's container its devices here
    (CDI names, which Podman resolves from the same specifications)."""
    args = []
    for kind, device in _job_devices(read_allocation(job)):
        args += ["--device", "%s=%s" % (kind, device["names"][0])]
    return args


def hidden_paths(job, dirs=None):
    """The device nodes of every CDI device of this node that is not the
    job's here (present on the host): the bare host's sandbox hides them.
    Specifications that cannot be read are passed over (a job that asks
    for devices was refused on them at allocate already)."""
    own = {path for _unused, device in _job_devices(read_allocation(job)) for path in device["nodes"]}
    devices, _unused = read_node_devices(dirs, strict=False)
    others = {path for kind in devices for device in devices[kind] for path in device.nodes}
    return sorted(path for path in others - own if os.path.exists(path) and not os.path.isdir(path))


def rank_slot(spec, rank):
    """The slot of the job's devices here that `rank` uses: a rank's place
    among its node's ranks; a task takes a free one (task_slot)."""
    if rank.is_task:
        return task_slot(spec.job, rank)
    return sorted(r.rank for r in spec.ranks if r.node == rank.node).index(rank.rank)


def _process_mark(pid):
    """pid and start time: a process, never one that got its pid later."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            start = handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
    return "%d %s" % (pid, start)


_TASK_SLOTS = {}  # (job, task index): the slot this process holds


def task_slot(job, rank):
    """A slot no running task of the job here holds, held by this process
    (the task's launcher, alive as long as the task) from now on: tasks end
    in any order, so a slot is free once the process holding it is gone."""
    key = (job, rank.rank)
    if key in _TASK_SLOTS:
        return _TASK_SLOTS[key]
    total = len((read_allocation(job) or {}).get("slots", []))
    directory = registry.job_path(job, registry.DEVICE_SLOTS_DIR)
    os.makedirs(directory, 0o700, exist_ok=True)
    mine = _process_mark(os.getpid())
    with open(os.path.join(directory, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for slot in range(total):
            path = os.path.join(directory, str(slot))
            try:
                with open(path) as handle:
                    holder = handle.read().split()
            except FileNotFoundError:
                holder = []
            if holder and holder[0].isdigit() and _process_mark(int(holder[0])) == " ".join(holder):
                continue
            registry.write_file(path, mine, 0o600)
            _TASK_SLOTS[key] = slot
            return slot
    raise RuntimeFailure("task %s: all %d device sets of job %s on node %s are in use by its other "
                         "tasks" % (rank.name, total, job, rank.node))


def rank_environment(spec, rank):
    """What the rank's environment gets of its devices: the CDI env edits
    (the specifications' own, then each device's), then the variables that
    name them (VISIBLE_ENV), which win. {} for a job without devices."""
    allocation = read_allocation(spec.job)
    if not allocation or not allocation.get("slots"):
        return {}
    slot = allocation["slots"][rank_slot(spec, rank)]
    env = {}
    for kind in sorted(slot):
        for item in allocation.get("common_env", {}).get(kind, []) + [
                entry for device in slot[kind] for entry in device["env"]]:
            key, _unused, value = item.partition("=")
            env[key] = value
    for kind in sorted(slot):
        names = ",".join(Device.from_dict(kind, device).visible_name for device in slot[kind])
        for key in VISIBLE_ENV.get(kind, ()):
            env[key] = names
    return env
