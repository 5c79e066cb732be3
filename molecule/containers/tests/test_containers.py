"""Verifier of the containers scenario: jobs in their images on a real
4-node cluster, pulled from a real registry (Debian's docker-registry in
fmn-containers-registry, filled by prepare.yml) through the nodes'
registries.conf mirror, run through run-job.yml exactly as a user runs it.

The spec's image URIs are used as written; the spec's oras:// SIF names
exact bytes that cannot be rebuilt here, so every Fuzzfile naming it runs
with its digest replaced by that of the SIF prepare.yml pushed (localized).

After every job nothing of it may be left on any node: no container, no
process (every process but the node's own counts: ranks, daemons, conmon,
podman), no mount the job added, no rank host names in /etc/hosts, no
registration. Tests run in file order; each judges its own job.
"""

import base64
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)
from multinode_runtime.cgroups import PRIVATE_MOUNT  # noqa: E402  (node_runtime put it on the path)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from concurrency import canceled_table, outcome_table, started_on  # noqa: E402  (the workflow runner's lines)
from docker_network import network_address  # noqa: E402
from mpi_checks import allreduce_results, communicated, hello_ranks  # noqa: E402

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles"
CONVERGE_LOGS = EPHEMERAL / "fuzz-logs"
NODES = ["fmn-containers-node-1", "fmn-containers-node-2", "fmn-containers-node-3", "fmn-containers-node-4"]
REGISTRY = "fmn-containers-registry"
NETWORK = "fmn-containers"
IMAGES = json.loads((EPHEMERAL / "images.json").read_text())  # prepare.yml's
ALPINE = "docker://mirror.gcr.io/library/alpine:3.16"
DEBIAN = "docker://mirror.gcr.io/library/debian:bookworm"
SPEC_SIF_DIGEST = "sha256:dc92ea0c541a8d9f30b4d6b78bfc57bd2fe9806689d93ece6069c6ed6519fa9a"
SIF = "oras://docker.io/anderbubble/openmpi-hello-world.sif@" + IMAGES["sif"]
SIF_IMAGE = "localhost/fuzz-multinode-sif:" + IMAGES["sif"][len("sha256:"):]  # the node's name for it
# A run takes under a minute; one that hangs fails its test (Ctrl-C after
# this long), not the scenario.
PLAYBOOK_TIMEOUT = 600
INTERRUPT_STOPS_JOB_WITHIN = 30  # seconds, as molecule/failure
NODE_WIDE_MOUNTS = PRIVATE_MOUNT.split("%", maxsplit=1)[0]


# -- looking at the nodes and the registry ------------------------------------

def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, check=False)


def on_node(node, command):
    done = docker("exec", node, "sh", "-c", command)
    assert done.returncode == 0, (node, command, done.stderr)
    return done.stdout


# One look at a node: every process, its mount points (its own mount
# namespace, where Podman mounts a container's file system and shm), its
# Podman containers and images, and what its runtime holds of each job
# named (a node no job was prepared on has no runtime, and holds no job).
# Podman first, then the mounts: the first Podman command on a node makes
# the overlay driver's own mount of its store, which stays (node state, not
# a job's), and must not be counted as left by the job the look is after.
LOOK = """
echo '== containers'; podman ps --all --format '{{.Names}} {{.Status}}'
echo '== images'; podman images --all --noheading --no-trunc --format '{{.Id}} {{.Names}}'
echo '== processes'; ps -e -o pid=,ppid=,user=,stat=,args=
echo '== mounts'; cut -d' ' -f5 /proc/self/mountinfo
[ -e /etc/fuzz-multinode/prepared ] || exit 0
for job; do echo "== show $job"; %s "$job" || exit 1; done
""" % node_runtime.show_command()


def look(node, jobs=()):
    """{section: [lines]} of LOOK on the node; "show JOB": its JSON."""
    done = docker("exec", node, "sh", "-c", LOOK, "look", *jobs)
    assert done.returncode == 0, (node, done.stderr)
    sections = {}
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            current.append(line)
    for name in [name for name in sections if name.startswith("show ")]:
        sections[name] = json.loads("\n".join(sections[name]))
    return sections


def look_everywhere(jobs=()):
    """look at every node at once: {node: its sections}."""
    with concurrent.futures.ThreadPoolExecutor(len(NODES)) as pool:
        return dict(zip(NODES, pool.map(lambda node: look(node, jobs), NODES), strict=True))


def foreign_processes(lines):
    """Every process of `ps` lines, zombies included, except the node's
    own: init (PID 1), init's sleep, the sshd listener, and this look."""
    left = []
    for line in lines:
        pid, ppid, _unused, _unused, args = (line.split(None, 4) + [""])[:5]
        if pid == "1" or ppid == "0" or args.startswith("ps -e -o "):  # init; the look's shell and ps
            continue
        if ppid == "1" and (args == "sleep 10000" or "[listener]" in args or args.startswith("/usr/sbin/sshd")):
            continue
        left.append(line.strip())
    return left


def images(node):
    """The node's Podman image store: id and names of every image."""
    return look(node)["images"]


def snapshot():
    """What the nodes hold before a job, to compare with after it: their
    mount points and image stores."""
    return look_everywhere()


def leftovers(jobs, before):
    """What the jobs (a name or a list) left on each node (empty lists:
    nothing). The runtime's node-wide mounts (a private cgroup hierarchy,
    made by the first job on the node and kept) are not the job's."""
    jobs = [jobs] if isinstance(jobs, str) else jobs
    found = {}
    for node, now in look_everywhere(jobs).items():
        found[node] = (["container " + c for c in now["containers"]]
                       + ["process " + p for p in foreign_processes(now["processes"])]
                       + ["mount " + m for m in sorted(set(now["mounts"]) - set(before[node]["mounts"]))
                          if not m.startswith(NODE_WIDE_MOUNTS)])
        for job in jobs:
            held = now.get("show " + job, {})
            found[node] += ["%s: %s" % (job, what) for what, key in (
                ("rank host names in /etc/hosts", "hosts_block"), ("registered (job directory)", "registered"),
                ("secrets", "secrets")) if held.get(key)]
    return found


NOTHING = {node: [] for node in NODES}


def registry_log():
    """The registry's access log so far (its stdout, a line a request)."""
    return docker("logs", REGISTRY).stdout.splitlines()


ACCESS = re.compile(r'^(\d+\.\d+\.\d+\.\d+) - \S+ \[[^]]*\] "(\S+) (\S+) [^"]*" (\d+) ')


def requests_since(before):
    """The requests the registry answered since its log had `before` lines:
    [(client address, method, path, status)]."""
    found = [ACCESS.match(line) for line in registry_log()[len(before):]]
    return [m.groups() for m in found if m]


def localized(fuzzfile, dest):
    """The Fuzzfile with the spec's SIF digest replaced by the local SIF's
    (the same repository path, the bytes this registry holds)."""
    text = fuzzfile.read_text()
    dest.write_text(text.replace(SPEC_SIF_DIGEST, IMAGES["sif"]))
    return dest


# -- running jobs like a user ----------------------------------------------------

def run_job(fuzzfile, logs, jobs=None, job=None, args=()):
    """run-job.yml to the end (Ctrl-C after PLAYBOOK_TIMEOUT), for the
    whole workflow or `job`, with more ansible-playbook `args`; records
    what was left on the nodes (of `jobs`, default the one job) the moment
    it returned, the registry's requests during the run and the nodes'
    image stores before it."""
    before, log_before = snapshot(), registry_log()
    argv, env = user_playbook.playbook(fuzzfile, logs, job, args=args)
    rc, output, seconds = user_playbook.run_with_timeout(argv, env, PROJECT, PLAYBOOK_TIMEOUT, grace=120)
    name = Path(fuzzfile).stem
    run = user_playbook.JobRun(name, logs, rc, output, seconds, leftovers(jobs or name, before))
    run.requests = requests_since(log_before)
    run.stores_before = {node: before[node]["images"] for node in NODES}
    return run


def has_sif(store):
    """Whether an image store (images() lines) holds the spec's SIF,
    imported as a Podman image."""
    return any(SIF_IMAGE in line for line in store)


def summary(run):
    """The title line of the job's summary, unwrapped."""
    found = re.search(r"job %s (FINISHED|FAILED) after [^\n]*?(?= - rank )" % re.escape(run.job),
                      " ".join(run.output.split()))
    return found.group(0) if found else ""


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    """Runs each Fuzzfile once for all the tests that look at it."""
    runs = {}

    def get(fuzzfile):
        if fuzzfile not in runs:
            logs = tmp_path_factory.mktemp("logs")
            runs[fuzzfile] = run_job(localized(PROJECT / fuzzfile, logs / Path(fuzzfile).name), logs)
        return runs[fuzzfile]
    return get


# -- the node role installs Podman (converge) --------------------------------------

def test_node_role_installs_podman_where_it_is_missing():
    """prepare.yml removed Podman from node 2; converge's node role
    installed it again (dpkg's log says so, in that order), and the helper
    example ran its rank 1 there in the image."""
    log = on_node(NODES[1], "grep -E ' (remove|install) podman:' /var/log/dpkg.log")
    steps = [line.split()[2] for line in log.splitlines()]
    assert steps[-2:] == ["remove", "install"], log
    on_node(NODES[1], "podman --version")
    assert "generic-multinode-helper-1 is a worker node" in (
        CONVERGE_LOGS / "generic-multinode-helper.log").read_text().splitlines()


# -- the spec's examples in their images ---------------------------------------------

def test_helper_example_runs_in_the_busybox_image_with_forwarding():
    """converge.yml ran examples/generic-multinode-helper.yml unchanged in
    docker://mirror.gcr.io/library/alpine:3.16 (the busybox-only image):
    the documented lines, the worker's through forwarding."""
    assert (CONVERGE_LOGS / "generic-multinode-helper.log").read_text().splitlines() == [
        "generic-multinode-helper-0 is the head node",
        "generic-multinode-helper-1 is a worker node",
    ]


def test_second_run_of_the_same_job_asks_the_registry_for_nothing(tmp_path):
    """The helper example again, on the nodes that pulled its image at
    converge: the registry gets no request, and the nodes' image stores are
    as they were."""
    stores = {node: images(node) for node in NODES[:2]}
    run = run_job(PROJECT / "examples" / "generic-multinode-helper.yml", tmp_path)
    assert run.rc == 0, run
    assert run.lines() == ["generic-multinode-helper-0 is the head node",
                           "generic-multinode-helper-1 is a worker node"], run
    assert summary(run).endswith("in image " + ALPINE), run
    assert run.requests == [], run
    assert {node: images(node) for node in NODES[:2]} == stores
    assert run.leftovers == NOTHING, run


def test_script_example_runs_in_its_image(job_run):
    run = job_run("examples/generic-multinode-script.yml")
    assert run.rc == 0, run
    assert run.lines() == ["generic-multinode-script-0 is the head node",
                           "generic-multinode-script-1 is a worker node"], run
    assert summary(run).endswith("in image " + ALPINE), run
    assert run.leftovers == NOTHING, run


def test_mpi_example_runs_in_the_spec_sif(job_run):
    """examples/generic-multinode.yml with its digest replaced: the SIF is
    pulled with skopeo through the docker.io mirror, converted, and mpirun
    in it starts 4 ranks over both nodes through the wrapper."""
    run = job_run("examples/generic-multinode.yml")
    assert run.rc == 0, run
    assert len(run.lines()) == 4 and hello_ranks(run.lines()) == {
        0: ("generic-multinode-0", 4), 1: ("generic-multinode-0", 4),
        2: ("generic-multinode-1", 4), 3: ("generic-multinode-1", 4)}, run
    assert summary(run).endswith("in image " + SIF), run
    assert all(has_sif(images(node)) for node in NODES[:2])
    pulled = {(address, path) for address, method, path, status in run.requests if method == "GET"}
    for node in NODES[:2]:  # each node that lacked it fetched the SIF's manifest itself
        if not has_sif(run.stores_before[node]):
            assert (network_address(NETWORK, node),
                    "/v2/anderbubble/openmpi-hello-world.sif/manifests/" + IMAGES["sif"]) in pulled, run.requests
    assert run.leftovers == NOTHING, run


# -- what runs inside the image ------------------------------------------------------

def test_busybox_only_image_has_no_libc_python_or_ssh(job_run):
    """Both ranks run in the busybox-only image (the helper's exec_all, the
    worker's line forwarded): /bin/sh is busybox, there is no library
    directory, no python3, no ssh, which the nodes have."""
    run = job_run("tests/fuzzfiles/containers/busybox-only.yml")
    assert run.rc == 0, run
    assert sorted(run.lines()) == [
        "busybox-only-%d: sh=/bin/busybox libraries=0 python3=none ssh=none" % r for r in (0, 1)], run
    for node in NODES[:2]:
        on_node(node, "command -v python3 && command -v ssh && ls -d /lib /usr/lib")
    assert run.leftovers == NOTHING, run


def test_every_rank_runs_in_the_image_as_the_job_user(job_run):
    """4 ranks in the Debian image: each under its rank's host name, as the
    job user, with the job's env and MULTINODE_* variables, in a cwd only
    the image has, without the python3 and ssh the nodes have."""
    run = job_run("tests/fuzzfiles/containers/in-image.yml")
    assert run.rc == 0, run
    uid = on_node(NODES[0], "id -u fuzz").strip()
    assert sorted(run.lines()) == [
        "head: hosts=%s slots=4 wrapper=/multinode/ssh-wrapper" % ",".join("in-image-%d:1" % r for r in range(4))
    ] + ["rank %d: hostname=in-image-%d HOSTNAME=in-image-%d uid=%s pwd=/opt/fmn-image-only image=debian "
         "greeting=hello from the env python3=none ssh=none" % (r, r, r, uid) for r in range(4)], run
    for node in NODES:
        assert on_node(node, "id -u fuzz").strip() == uid
        assert docker("exec", node, "test", "-e", "/opt/fmn-image-only").returncode != 0, node
    assert summary(run).endswith("in image " + DEBIAN), run
    assert run.leftovers == NOTHING, run


def cpu_count(cpu_list):
    """How many CPUs a kernel CPU list such as 0-3,6 names."""
    return sum(int(high or low) - int(low) + 1
               for low, _unused, high in (part.partition("-") for part in cpu_list.split(",")))


def job_cgroups(node, job):
    """The cgroups of `job` still on the node (its ranks' groups and the run's
    group are named after the job and its ranks), in the runtime's private
    cgroup v1 mounts and in the node's cgroup file system."""
    return on_node(node, "find %s /sys/fs/cgroup -name '%s*' 2>/dev/null; true" % (
        PRIVATE_MOUNT % "*", job)).split()


def test_resource_limits_apply_to_the_ranks_in_their_image(job_run):
    """resource: 1 core and 64 MiB, in the Debian image on 2 nodes: each
    rank is allowed exactly one CPU (nproc, the kernel's list), and rank 1,
    which holds 200 MiB, is killed by the kernel (status 128 + 9), which
    fails the job naming it; no cgroup of the job is left."""
    run = job_run("tests/fuzzfiles/containers/resources-in-image.yml")
    assert run.rc != 0, run
    allowed = {}
    for line in run.lines():
        found = re.fullmatch(r"rank (\d): image=debian nproc=(\d+) Cpus_allowed_list:\s+(\S+)", line)
        if found:
            allowed[int(found.group(1))] = (int(found.group(2)), cpu_count(found.group(3)))
    assert allowed == {0: (1, 1), 1: (1, 1)}, run
    assert ("rank 1 (resources-in-image-1 on %s) exited with status 137" % NODES[1]
            in " ".join(run.failure_message().split())), run
    assert "held 200 MiB" not in run.log(), run
    assert summary(run).endswith("in image " + DEBIAN), run
    assert run.leftovers == NOTHING, run
    assert {node: job_cgroups(node, run.job) for node in NODES[:2]} == {node: [] for node in NODES[:2]}


# -- GPUs: resource.devices through CDI ------------------------------------------

def test_each_rank_gets_its_own_gpu_in_its_image_and_nothing_else_of_the_nodes(job_run):
    """gpus-in-image.yml: each of the 2 ranks asks for one nvidia.com/gpu; a
    node has two stand-in GPUs in its CDI specification (prepare.yml). In
    its container each rank sees exactly its own device node (the node's
    first free one, gpu0: the other, gpu1, is not there), can write it,
    and its environment names it (CUDA_VISIBLE_DEVICES,
    NVIDIA_VISIBLE_DEVICES over the specification's `void`) and has its
    CDI env. Nothing of the job is left, its devices free again."""
    run = job_run("tests/fuzzfiles/containers/gpus-in-image.yml")
    assert run.rc == 0, run
    assert sorted(run.lines()) == [
        "rank %d: sees gpu0 CUDA_VISIBLE_DEVICES=gpu0 NVIDIA_VISIBLE_DEVICES=gpu0 own=writable FMN_GPU=gpu0"
        % rank for rank in (0, 1)], run
    assert summary(run).endswith("in image " + ALPINE), run
    assert run.leftovers == NOTHING, run


def test_a_job_asking_more_gpus_than_a_node_has_runs_on_the_nodes_that_have_them(job_run):
    """gpus-two-each.yml asks each of its 2 ranks for 2 GPUs: node 2 has
    only 1 (prepare.yml), so the controller places the job on nodes 1 and
    3, where each rank's container has both of the node's GPUs."""
    run = job_run("tests/fuzzfiles/containers/gpus-two-each.yml")
    assert run.rc == 0, run
    assert sorted(run.lines()) == [
        "rank %d: sees gpu0 gpu1 CUDA_VISIBLE_DEVICES=gpu0,gpu1" % rank for rank in (0, 1)], run
    table = " ".join(run.output.split())
    for rank, node in ((0, NODES[0]), (1, NODES[2])):
        assert " %d gpus-two-each-%d %s 0 " % (rank, rank, node) in table, run
    assert run.leftovers == NOTHING, run


def test_a_job_asking_more_gpus_than_enough_nodes_have_is_refused_before_any_host_is_touched(tmp_path):
    """gpus-too-many.yml asks each of its 4 ranks for 2 GPUs, and node 2
    has 1: the controller refuses the run right after its one look at each
    node, naming the field, what each host needs and what each has; no node
    was asked to register the job (no node's refusal), nothing is left."""
    run = run_job(PROJECT / "tests/fuzzfiles/containers/gpus-too-many.yml", tmp_path)
    assert run.rc != 0, run
    said = " ".join(run.output.split())
    assert ("jobs.gpus-too-many.resource.devices: job gpus-too-many needs 4 hosts with 2 nvidia.com/gpu each "
            "(one rank a host, 2 nvidia.com/gpu a rank), and 3 of the run's 4 hosts have that many CDI devices: "
            "%s has 2 nvidia.com/gpu; %s has 1 nvidia.com/gpu; %s has 2 nvidia.com/gpu; %s has 2 nvidia.com/gpu; "
            "nothing was started on any host" % tuple(NODES)) in said, run
    assert "cannot start on node" not in said, run
    assert "Traceback" not in run.output, run
    assert run.leftovers == NOTHING, run


VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"  # on every node: one directory of this machine's


def test_a_volume_is_shared_by_the_ranks_on_two_nodes_in_their_image(job_run):
    """volumes-in-image.yml: rank 1 writes into the run's ephemeral volume
    from its container on node 2, the head reads it on node 1 working in
    cwd /data on the mount, as the job user; the run's volume is removed on
    every node when it ends, and no node has a /data of its own."""
    run = job_run("tests/fuzzfiles/containers/volumes-in-image.yml")
    uid = on_node(NODES[0], "id -u fuzz").strip()  # the image has no name for it
    assert run.rc == 0, run
    assert run.lines() == [
        "head reads: written on volumes-in-image-1 in /data as uid %s" % uid,
        "head in /data as uid %s sees: from-worker.txt" % uid,
    ], run
    assert summary(run).endswith("in image " + DEBIAN), run
    assert run.leftovers == NOTHING, run
    for node in NODES:
        assert on_node(node, "ls -A %s/ephemeral 2>/dev/null; test -e /data && echo /data; true"
                       % VOLUME_ROOT) == "", node


# -- Open MPI in its image across the 4 nodes, tree spawn included ---------------------

def test_openmpi_tree_spawn_in_the_image_across_four_nodes(job_run):
    """mpirun in the spec's SIF with routed_radix 1: the orted of ranks 1 and
    2 each start the next one by calling the wrapper from inside the image
    (the workers' agents make those calls); every rank of mpi_allreduce
    communicates. Nodes 1 and 2 have the SIF from the example's run: only
    the nodes that lacked it ask the registry (3 and 4, on a new cluster)."""
    run = job_run("tests/fuzzfiles/containers/openmpi-tree-spawn.yml")
    assert run.rc == 0, run
    assert allreduce_results(run.lines()) == communicated("openmpi-tree-spawn", 4, 1), run
    for rank in (1, 2):  # the daemons that launch the next one (rank 3's is the leaf)
        log = run.rank_log(rank)
        assert re.search(r"^\[openmpi-tree-spawn-%d:\d+\] .* plm:rsh: final template argv:\n"
                         r"\s+/multinode/ssh-wrapper <template> " % rank, log, re.M), (rank, log, run)
    assert summary(run).endswith("in image " + SIF), run
    lacked = [node for node in NODES if not has_sif(run.stores_before[node])]
    assert NODES[0] not in lacked and NODES[1] not in lacked, run.stores_before
    assert {request[0] for request in run.requests} == {network_address(NETWORK, node) for node in lacked}, (
        lacked, run.requests)
    assert all(has_sif(images(node)) for node in NODES)
    assert run.leftovers == NOTHING, run


# -- images that cannot be pulled --------------------------------------------------------

def _blob(digest):
    hexdigest = digest[len("sha256:"):]
    return "/var/lib/fmn-registry/docker/registry/v2/blobs/sha256/%s/%s/data" % (hexdigest[:2], hexdigest)


@pytest.fixture(scope="module")
def pull_failures(tmp_path_factory):
    """pull-failures.yml with the tampered images' digests, run while the
    registry's stored manifests of both say something else (an annotation
    added: a manifest that no longer has its digest)."""
    logs = tmp_path_factory.mktemp("logs")
    fuzzfile = logs / "pull-failures.yml"
    fuzzfile.write_text((FUZZFILES / "containers" / "pull-failures.yml").read_text()
                        .replace("sha256:" + "1" * 64, IMAGES["tampered"])
                        .replace("sha256:" + "2" * 64, IMAGES["tampered_sif"]))
    saved = {}
    for digest in (IMAGES["tampered"], IMAGES["tampered_sif"]):
        saved[digest] = docker("exec", REGISTRY, "cat", _blob(digest)).stdout
        changed = json.loads(saved[digest])
        changed["annotations"] = {"altered": "yes"}
        subprocess.run(["docker", "exec", "-i", REGISTRY, "sh", "-c", 'cat >"$1"', "-", _blob(digest)],
                       input=json.dumps(changed), text=True, check=True)
    try:
        yield run_job(fuzzfile, logs, jobs=list(PULL_FAILURES))
    finally:
        for digest, text in saved.items():
            subprocess.run(["docker", "exec", "-i", REGISTRY, "sh", "-c", 'cat >"$1"', "-", _blob(digest)],
                           input=text, text=True, check=True)


PULL_FAILURES = {
    "unknown-image": ("docker://mirror.gcr.io/library/no-such-image:1", "manifest unknown"),
    "unknown-sif": ("oras://docker.io/fuzz-multinode/no-such.sif:1", "no such image in the registry"),
    "unreachable-registry": ("docker://unreachable.example.org/library/alpine:3.16", "connection refused"),
    "docker-digest-mismatch": ("docker://mirror.gcr.io/fuzz-multinode/tampered@%s" % IMAGES["tampered"],
                               "does not match provided manifest digest"),
    "oras-digest-mismatch": ("oras://docker.io/fuzz-multinode/tampered.sif@%s" % IMAGES["tampered_sif"],
                             "digest mismatch"),
}


@pytest.mark.parametrize("job", PULL_FAILURES)
def test_a_failed_pull_fails_the_job_before_any_rank_starts(pull_failures, job):
    """Each job fails, its message naming a node, the image and the reason;
    no rank ran (nothing in its logs)."""
    run = pull_failures
    uri, reason = PULL_FAILURES[job]
    assert run.rc != 0, run
    message = " ".join(run.failure_message().split())
    found = re.search(r"%s FAILED[^;]*" % re.escape(job), message)
    assert found, (job, message)
    said = found.group(0)
    # The workflow runner starts the five jobs at once where the nodes
    # allow: the message names a node the job was placed on.
    hosts = dict(started_on(run.output))[job]
    named = re.search(r"node (\S+) cannot pull (image )?%s" % re.escape(uri), said)
    assert named and named.group(1) in hosts, (said, hosts)
    assert reason in said, said
    assert "a rank ran" not in run.output, run
    assert not [log for log in run.logs.rglob("*.log") if "a rank ran" in log.read_text()], run


def test_failed_pulls_leave_nothing(pull_failures):
    assert pull_failures.leftovers == NOTHING, pull_failures


# -- a private image: image.secret ---------------------------------------------------------

# prepare.yml's private registry (it asks for credentials) and the value of
# secret://user/registry, as a user keeps it (-e @FILE, 0600).
PRIVATE = "docker://%s/%s" % (IMAGES["private_registry"], IMAGES["private_image"])
PRIVATE_SECRETS = EPHEMERAL / "registry-secrets.yml"
PRIVATE_LOG = "/var/log/fmn-private-registry.log"  # in the registry container
PRIVATE_JOBS = ["private-image", "private-image-without-secret"]


def private_credentials():
    """(username, password) of the private registry."""
    value = yaml.safe_load(PRIVATE_SECRETS.read_text())["fuzz_multinode_secrets"]["user/registry"]
    return value["username"], value["password"]


def private_requests():
    """The private registry's access log so far: [(client, method, path, status)]."""
    found = [ACCESS.match(line) for line in on_node(REGISTRY, "cat %s" % PRIVATE_LOG).splitlines()]
    return [m.groups() for m in found if m]


def secret_forms(username, password):
    """The password, and the user:password pair as an auth file holds it."""
    return [password, base64.b64encode(("%s:%s" % (username, password)).encode()).decode()]


def run_private(fuzzfile, logs, secrets, job=None, jobs_at_once=0):
    """The private-image workflow (or one `job` of it) with the credentials
    file `secrets`, at -vvv (jobs_at_once: fuzz_multinode_jobs_at_once, 0 as
    the role's default); also what the private registry answered."""
    before = private_requests()
    run = run_job(fuzzfile, logs, jobs=[job] if job else PRIVATE_JOBS, job=job,
                  args=("-e", "@%s" % secrets, "-e", "fuzz_multinode_jobs_at_once=%d" % jobs_at_once, "-vvv"))
    run.private_requests = private_requests()[len(before):]
    return run


@pytest.fixture(scope="module")
def private_runs(tmp_path_factory):
    """private-image with the right credentials; then, its image cached on
    both nodes, the whole workflow with a wrong password: {"right": run,
    "wrong": run}, and the wrong password."""
    directory = tmp_path_factory.mktemp("private")
    fuzzfile = directory / "private-image.yml"
    fuzzfile.write_text((FUZZFILES / "containers" / "private-image.yml").read_text()
                        .replace("PRIVATE_REGISTRY", IMAGES["private_registry"]))
    right = run_private(fuzzfile, directory / "right", PRIVATE_SECRETS, job="private-image")
    username, password = private_credentials()
    wrong_password = "wr0ng-" + password[::-1]
    wrong_secrets = directory / "wrong-secrets.yml"
    wrong_secrets.touch(mode=0o600)
    wrong_secrets.write_text(yaml.safe_dump({"fuzz_multinode_secrets": {
        "user/registry": {"username": username, "password": wrong_password}}}))
    # One job at a time: both jobs then run on the two nodes that cached
    # the image in the first run, which is what the tests of this run ask
    # about (the workflow runner would place the second on nodes 3 and 4).
    wrong = run_private(fuzzfile, directory / "wrong", wrong_secrets, jobs_at_once=1)
    return {"right": right, "wrong": wrong, "wrong_password": wrong_password}


def test_a_private_image_runs_with_its_image_secret(private_runs):
    """The nodes pull the image with the credentials the job's image.secret
    names, and both ranks run in it (the file only it has); the registry
    served them only after they gave the credentials."""
    run = private_runs["right"]
    assert run.rc == 0, run
    assert sorted(run.lines()) == ["private-image-%d: private image of the test registry" % r for r in (0, 1)], run
    assert summary(run).endswith("in image " + PRIVATE), run
    served = {address for address, method, path, status in run.private_requests
              if method == "GET" and path.startswith("/v2/site/private/manifests/") and status == "200"}
    assert served == {network_address(NETWORK, node) for node in NODES[:2]}, run.private_requests
    assert run.leftovers == NOTHING, run


def test_the_registry_credentials_are_shown_nowhere_and_left_on_no_node(private_runs):
    """Neither the password nor the user:password an auth file holds is in
    the playbook's output (-vvv) or any fetched log, of the run with the
    right credentials or the wrong ones; no node keeps an auth file or
    either form anywhere the runtime writes."""
    username, password = private_credentials()
    forms = secret_forms(username, password) + secret_forms(username, private_runs["wrong_password"])
    for run in (private_runs["right"], private_runs["wrong"]):
        assert "<fmn-containers-node-1> EXEC" in run.output  # -vvv, as asked
        assert not [form for form in forms if form in run.output], run
        for path in run.logs.rglob("*"):
            if path.is_file():
                text = path.read_text(errors="replace")
                assert not [form for form in forms if form in text], path
    for node in NODES:
        assert on_node(node, "find %s -name %s" % (node_runtime.registry.STATE_DIR, "auth.json")) == "", node
        found = docker("exec", node, "grep", "-rlF", *[arg for form in forms for arg in ("-e", form)],
                       node_runtime.registry.STATE_DIR, node_runtime.registry.LOG_DIR, "/var/lib/fuzz-multinode",
                       "/tmp", "/etc")
        assert found.returncode == 1, (node, found.stdout, found.stderr)


def test_wrong_credentials_are_refused_though_the_image_is_cached(private_runs):
    """With a wrong password the job fails before any rank starts, naming
    node, image and the refusal, although both nodes hold the image: the
    registry is asked, and gives nothing."""
    run = private_runs["wrong"]
    cached = PRIVATE[len("docker://"):]
    assert all(any(cached in line for line in run.stores_before[node]) for node in NODES[:2]), run.stores_before
    assert run.rc != 0, run
    message = " ".join(run.failure_message().split())
    said = re.search(r"private-image FAILED[^;]*", message)
    assert said and re.search(r"node fmn-containers-node-[12] cannot pull image %s: the registry refused the "
                              r"credentials \(podman: " % re.escape(PRIVATE), said.group(0)), message
    assert "private image of the test registry" not in run.output, run
    assert not [log for log in run.logs.rglob("*.log") if "private image" in log.read_text()], run
    assert {address for address, _unused, _unused, status in run.private_requests if status == "401"} == {
        network_address(NETWORK, node) for node in NODES[:2]}, run.private_requests
    assert not [request for request in run.private_requests if request[3] == "200" and "/site/private/" in request[2]]
    assert run.leftovers == NOTHING, run


def test_a_job_without_the_secret_is_refused_the_cached_private_image(private_runs):
    """The same image, cached on both nodes since a job pulled it with
    credentials, named by a job without image.secret: the registry is asked
    without credentials and refuses; no rank ran."""
    run = private_runs["wrong"]
    message = " ".join(run.failure_message().split())
    said = re.search(r"private-image-without-secret FAILED[^;]*", message)
    assert said and re.search(r"node fmn-containers-node-[12] cannot pull image %s: the registry refused access "
                              r"without credentials \(the job has no image.secret\)" % re.escape(PRIVATE),
                              said.group(0)), message
    # (The output shows the job's command, at -vvv: only its logs can say it ran.)
    assert not [log for log in run.logs.rglob("*.log") if "a rank ran" in log.read_text()], run


# -- a failing rank, a timeout, Ctrl-C: nothing left behind -------------------------------

def test_failing_worker_in_the_image_fails_the_job_and_leaves_nothing(job_run):
    run = job_run("tests/fuzzfiles/failure/worker-fails-rankn.yml")
    assert run.rc != 0, run
    assert ("rank 1 (worker-fails-rankn-1 on %s) exited with status 3" % NODES[1]
            in run.failure_message()), run
    assert "head after sleep" not in run.log(), run
    assert run.leftovers == NOTHING, run


def test_timeout_stops_the_job_in_its_image_and_leaves_nothing(job_run):
    run = job_run("tests/fuzzfiles/failure/timeout-exceeded.yml")
    assert run.rc != 0, run
    assert ("job timeout-exceeded timed out: it ran longer than its policy.timeout.execute (5s)"
            in run.failure_message()), run
    assert "head after sleep" not in run.log(), run
    assert run.leftovers == NOTHING, run


SECRET_ARGS = ("-e", json.dumps({"fuzz_multinode_secrets": {"user/fmn-interrupted-token": "fmn-s3cret"}}))


def pulling(node):
    return docker("exec", node, "pgrep", "-f", "^/usr/bin/podman pull ").returncode == 0


def sleeping(node):
    return docker("exec", node, "pgrep", "-u", "fuzz", "-x", "sleep").returncode == 0


# When Ctrl-C comes: while the nodes pull the job's image (its registration:
# the image is removed from them first), or as soon as the job's sleeps run
# in the image on both nodes.
CTRL_C_WHEN = {
    "during-the-pull": (lambda: any(pulling(node) for node in NODES[:2])),
    "once-the-ranks-run": (lambda: all(sleeping(node) for node in NODES[:2])),
}


def interrupted_run(fuzzfile, logs, job, when, args=()):
    """run-job.yml for `job`, Ctrl-C (SIGINT to the playbook's process
    group) as soon as when(output so far) is true; then what was left of
    the job on the nodes, looked at until nothing is or 30 s have passed.
    Returns (exit status, output, what was left)."""
    before = snapshot()
    argv, env = user_playbook.playbook(fuzzfile, logs, job, args=args)
    out_path = logs / "ansible-playbook.out"
    with open(out_path, "w") as out:
        playbook = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not when(out_path.read_text()):
            assert playbook.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
            time.sleep(0.1)
        os.killpg(playbook.pid, signal.SIGINT)
        stopped = time.monotonic()
        left = leftovers(job, before)
        while left != NOTHING and time.monotonic() - stopped < INTERRUPT_STOPS_JOB_WITHIN:
            time.sleep(1)
            left = leftovers(job, before)
        print("%s: what was left %.1f s after Ctrl-C: %s" % (job, time.monotonic() - stopped, left))
        playbook.wait(timeout=INTERRUPT_STOPS_JOB_WITHIN)
    finally:
        if playbook.poll() is None:
            os.killpg(playbook.pid, signal.SIGKILL)
            playbook.wait()
    return playbook.returncode, out_path.read_text(), left


@pytest.mark.parametrize("when", CTRL_C_WHEN)
def test_ctrl_c_leaves_nothing(tmp_path, when):
    """Ctrl-C: within 30 s nothing of the job is left on any node, its
    container included, although no play comes to clean up after an
    interrupted one."""
    if when == "during-the-pull":
        for node in NODES[:2]:
            on_node(node, "podman rmi --force %s >/dev/null" % DEBIAN[len("docker://"):])
    rc, output, left = interrupted_run(FUZZFILES / "failure" / "interrupted.yml", tmp_path, "interrupted-sigint",
                                       lambda _: CTRL_C_WHEN[when](), args=SECRET_ARGS)
    assert left == NOTHING, output[-6000:]
    assert rc != 0, output[-6000:]


# -- a service in its image --------------------------------------------------------------

SERVICES = FUZZFILES / "containers" / "services-in-image.yml"
SERVICE_RUN = ["web", "client", "fails"]


@pytest.fixture(scope="module")
def service_run(tmp_path_factory):
    """The whole of services-in-image.yml: a 2-node service, the job that
    reads from it, and a job that fails."""
    return run_job(SERVICES, tmp_path_factory.mktemp("services"), jobs=SERVICE_RUN)


def test_a_two_node_service_runs_in_its_image_ready_by_an_exec_probe_in_its_container(service_run):
    """web's ranks run in the busybox-only image on two nodes, rank 1
    answering rank 0 through the wrapper; its exec probe (busybox wget,
    which no node has) ran in rank 0's container and passed only once the
    page was served there; the client on a third node then read the page
    through FB_ENDPOINT_URL_WEB."""
    run = service_run
    hosts = dict(started_on(run.output))
    assert [job for job, _unused in started_on(run.output)] == SERVICE_RUN, run
    assert len(set(hosts["web"] + hosts["client"])) == 3, hosts
    web = (run.logs / "web.log").read_text()
    assert re.search(r"^fuzz.multinode: service web is ready: exec wget -q -O /dev/null "
                     r"http://127.0.0.1:8481/index.html: exit status 0; endpoint web at http://\S+:8481/$",
                     web, re.M), web
    assert (run.logs / "client.log").read_text() == \
        "client read: web-0 sh=/bin/busybox, web-1 sh=/bin/busybox\n", run
    for node in NODES:
        assert docker("exec", node, "sh", "-c", "command -v wget").returncode != 0, node


def test_a_failed_job_ends_the_workflow_and_stops_the_persistent_service_on_both_its_nodes(service_run):
    """`fails` exits 3: the workflow fails naming it, and web (persist:
    true) is stopped as the workflow's jobs are over; nothing of any of the
    three is left on any node, the service's containers included."""
    run = service_run
    assert run.rc != 0, run
    assert {job: row[0] for job, row in outcome_table(run.output).items()} == {
        "web": "FINISHED", "client": "FINISHED", "fails": "FAILED"}, run
    assert "rank 0 (fails-0 on " in run.failure_message() and "exited with status 3" in run.failure_message(), run
    assert "[web] stopping the service: the workflow's jobs are over" in run.output, run
    assert re.search(r": job web canceled by the workflow: the workflow's jobs are over$",
                     (run.logs / "web.log").read_text(), re.M), run
    assert run.leftovers == NOTHING, run


def test_ctrl_c_stops_a_service_in_its_image_on_both_its_nodes(tmp_path):
    """The service alone runs until Ctrl-C; Ctrl-C once it is ready stops
    it on both nodes within 30 s, containers and all, and it is CANCELED."""
    rc, output, left = interrupted_run(SERVICES, tmp_path, "web",
                                       lambda output: "[web] fuzz.multinode: service web is ready" in output)
    assert left == NOTHING, output[-6000:]
    assert rc != 0, output[-6000:]
    assert canceled_table(output) == {"web": "CANCELED"}, output[-6000:]
