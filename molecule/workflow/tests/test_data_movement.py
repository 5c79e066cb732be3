"""Verifier of the workflow scenario, data movement on a cluster: a
workflow shaped like the vendor's OpenFOAM one (openfoam-data.yml) takes
its case from the scenario's HTTP server and its mesh from moto's S3
server, both reached by the nodes over the network, into an ephemeral
volume on the nodes' shared volume root; a job prepares the case in /data,
Open MPI runs on 2 nodes in cwd /data/case reading it and writing each
rank's results, a job gathers them, and egress puts the summary into S3.

What only a cluster shows, beside tests/local (one machine, local mode)
and the unit tests: the two nodes of the MPI job see the same volume (each
reads what a job on node 1 wrote, node 1 reads what node 2 wrote); the
ingress is made once, by the first node, on shared storage; the servers
are reached from the nodes by their network addresses; the bytes that
arrive are the servers' own, in the volume and back in S3; the run's
volume, job state and processes are gone from every node. And what fails:
an unreachable source and wrong S3 credentials fail the workflow before
its job, naming item, URI, reason and node, with nothing left on any node;
a volume path escaping with '..' and a mount location that is not absolute
are refused before any node is touched.
"""

import hashlib
import os
import re
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

from docker_network import network_address  # noqa: E402
from mpi_checks import allreduce_results, communicated  # noqa: E402
from s3_server import S3Server, logged_requests  # noqa: E402
from workflow_run import NO_PROCESSES, NODES, WorkflowRun, docker  # noqa: E402  (this scenario's runs)

NETWORK = "fmn-workflow"
DATA_SERVER = "fmn-workflow-data"  # the HTTP server's container (molecule.yml)
CASE_TAR = "/srv/www/tutorials/pipe-flow.tar"  # in it, served as /tutorials/pipe-flow.tar
CONTROL_DICT = "/srv/case/pipe-flow/system/controlDict"  # in it, inside the tar
VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"  # on every node: one directory of this machine's
MESH_KEY = "pipe-flow/mesh.dat"
SUMMARY_KEY = "pipe-flow/summary.txt"


def digest(data):
    return hashlib.sha256(data).hexdigest()


def on_data_server(*argv):
    done = subprocess.run(["docker", "exec", DATA_SERVER] + list(argv), capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


def volumes(node):
    """Every path of the node's volumes and in them: under its volume root,
    below ROOT/ephemeral (a run's are ROOT/ephemeral/RUN/VOLUME) and
    ROOT/persistent."""
    return docker("exec", node, "find", VOLUME_ROOT, "-mindepth", "2").stdout.split()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """moto's S3 server on the network's gateway (a user, its key; the
    mesh in bucket fmn-cases, an empty fmn-results), the data server's
    digests, and the secrets file a user would pass (-e @FILE)."""
    workdir = tmp_path_factory.mktemp("data-movement")
    gateway = docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", NETWORK).stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", gateway), gateway
    s3 = S3Server(gateway, workdir / "moto.log")
    try:
        s3.s3.create_bucket(Bucket="fmn-cases")
        s3.s3.create_bucket(Bucket="fmn-results")
        mesh = os.urandom(2 * (1 << 20) + 7)
        s3.s3.put_object(Bucket="fmn-cases", Key=MESH_KEY, Body=mesh)
        secrets_file = workdir / "secrets.yml"
        secrets_file.write_text(yaml.safe_dump({"fuzz_multinode_secrets": s3.secrets(),
                                                "fuzz_multinode_s3_endpoint_url": s3.endpoint}))
        secrets_file.chmod(0o600)
        yield {"s3": s3, "mesh": mesh, "args": ["-e", "@%s" % secrets_file],
               "case_tar": digest(on_data_server("cat", CASE_TAR)),
               "control_dict": digest(on_data_server("cat", CONTROL_DICT))}
    finally:
        s3.stop()


class DataRun(WorkflowRun):
    """A run with the servers' secrets file, and what it left: beside the
    job user's processes, the jobs registered on each node and what each
    node's volume root gained."""

    def __init__(self, fuzzfile, logs, servers):
        before = {node: volumes(node) for node in NODES}
        http_before, s3_before = len(http_requests()), len(servers["s3"].requests())
        super().__init__(fuzzfile, logs, args=servers["args"])
        self.registered = {node: node_runtime.show(node)["jobs"] for node in NODES}
        self.volumes_left = {node: sorted(set(volumes(node)) - set(before[node])) for node in NODES}
        # What each server was asked during the run.
        self.http_requests = http_requests()[http_before:]
        self.s3_requests = servers["s3"].requests()[s3_before:]

    def left_nothing(self):
        return (self.leftovers, self.registered, self.volumes_left) == (
            NO_PROCESSES, {node: [] for node in NODES}, {node: [] for node in NODES})


def http_requests():
    """The data server's log: [(client address, method, path, status)]."""
    return logged_requests(docker("logs", DATA_SERVER).stdout)


# -- the OpenFOAM-shaped workflow ------------------------------------------------------

@pytest.fixture(scope="module")
def openfoam(servers, tmp_path_factory):
    return DataRun("openfoam-data.yml", tmp_path_factory.mktemp("openfoam-data"), servers)


def test_the_workflow_moves_its_data_and_runs_every_job(openfoam):
    assert openfoam.rc == 0, openfoam
    assert openfoam.started() == ["prepare-case", "solve", "post-process"], openfoam
    assert openfoam.outcome_rows() == dict.fromkeys(openfoam.started(), "FINISHED"), openfoam


def test_the_ingress_is_made_once_by_the_first_node_over_the_network(openfoam, servers):
    """The volume root is shared: node 1 fetches each source once, node 2
    (the MPI job's other node) leaves it to node 1; each server saw the
    request come from node 1's address on the network."""
    node_1 = network_address(NETWORK, NODES[0])
    assert openfoam.http_requests == [(node_1, "GET", "/tutorials/pipe-flow.tar", 200)]
    assert [request for request in openfoam.s3_requests if request[2] == "/fmn-cases/" + MESH_KEY] == [
        (node_1, "GET", "/fmn-cases/" + MESH_KEY, 200)]
    assert ("[ingress] volume case-data: the volume root is shared storage: the first host copies it"
            in openfoam.output), openfoam


def test_the_jobs_read_the_servers_bytes_in_the_volume(openfoam, servers):
    assert openfoam.log("prepare-case").splitlines() == [
        "%s  downloads/pipe-flow.tar" % servers["case_tar"],
        "%s  downloads/mesh.dat" % digest(servers["mesh"]),
        "case prepared in /data on prepare-case-0",
    ], openfoam


def test_both_nodes_of_the_mpi_job_share_the_volume(openfoam, servers):
    """post-process (node 1) gathers what each MPI rank wrote into the
    volume in cwd /data/case: rank 1 on node 2 read the mesh and settings
    prepare-case put there on node 1, and its results reached node 1; the
    ranks communicated."""
    lines = openfoam.log("post-process").splitlines()
    inputs = ["%s  constant/mesh.dat" % digest(servers["mesh"]), "%s  system/controlDict" % servers["control_dict"]]
    for rank in (0, 1):
        at = lines.index("rank %d on solve-%d in /data/case" % (rank, rank))
        assert lines[at + 1:at + 3] == inputs, (rank, lines)
    assert allreduce_results(lines) == communicated("solve", 2, 1), lines


def test_the_egress_puts_the_results_into_s3(openfoam, servers):
    summary = servers["s3"].s3.get_object(Bucket="fmn-results", Key=SUMMARY_KEY)["Body"].read()
    assert summary.decode() == openfoam.log("post-process"), openfoam
    node_1 = network_address(NETWORK, NODES[0])
    assert [request for request in openfoam.s3_requests if request[2] == "/fmn-results/" + SUMMARY_KEY] == [
        (node_1, "PUT", "/fmn-results/" + SUMMARY_KEY, 200)]


def test_the_workflow_leaves_nothing_on_any_node(openfoam, servers):
    """No process, no job registered, no volume of the run under the volume
    root on any node; nothing written in a node's own /data (the mount
    location a host lacks stays as the empty directory made for it); no
    secret value in the output."""
    assert openfoam.left_nothing(), (openfoam.leftovers, openfoam.registered, openfoam.volumes_left)
    for node in NODES:
        assert docker("exec", node, "sh", "-c", "ls -A /data 2>/dev/null").stdout == "", node
    assert servers["s3"].key["secret_access_key"] not in openfoam.output


# -- what fails --------------------------------------------------------------------------

# Fuzzfile: (its source, the reason the run gives)
INGRESS_FAILURES = {
    "ingress-unreachable.yml": ("http://fmn-workflow-data:8081/tutorials/pipe-flow.tar",
                                "cannot connect to fmn-workflow-data:8081: connection refused"),
    "ingress-wrong-credentials.yml": ("s3://fmn-cases/" + MESH_KEY,
                                      "S3 SignatureDoesNotMatch: The request signature we calculated does not "
                                      "match the signature you provided. Check your key and signing method. "
                                      "(HTTP 403)"),
}


@pytest.fixture(scope="module")
def ingress_failed(servers, tmp_path_factory):
    return {fuzzfile: DataRun(fuzzfile, tmp_path_factory.mktemp(fuzzfile), servers) for fuzzfile in INGRESS_FAILURES}


@pytest.mark.parametrize("fuzzfile", sorted(INGRESS_FAILURES))
def test_a_failed_ingress_fails_the_workflow_before_its_job_and_leaves_nothing(fuzzfile, ingress_failed):
    source, reason = INGRESS_FAILURES[fuzzfile]
    failed = ingress_failed[fuzzfile]
    assert failed.rc != 0, failed
    assert failed.failure() == (
        "workflow failed: volumes.case-data.ingress[0]: %s -> file://downloads/%s: %s (on %s); solve NOT_RUN: "
        "job solve not run: the ingress of the volumes failed" % (source, source.rsplit("/", 1)[1], reason,
                                                                  NODES[0])), failed
    assert failed.started() == [], failed
    assert failed.left_nothing(), (failed.leftovers, failed.registered, failed.volumes_left)


def test_wrong_credentials_are_refused_by_the_s3_server_itself(ingress_failed):
    """The node asked the server over the network, once (moto checks every
    request's signature against the user's key: 403)."""
    node_1 = network_address(NETWORK, NODES[0])
    assert ingress_failed["ingress-wrong-credentials.yml"].s3_requests == [
        (node_1, "GET", "/fmn-cases/" + MESH_KEY, 403)]


# Fuzzfile: the message, naming the field and the reason
REFUSED = {
    "volume-path-escaping.yml": "volumes.case-data.ingress[0].destination.uri: 'file://../../../../../etc/cron.d/"
                                "fmn-escape' escapes the volume with '..'; it must be a path inside the volume "
                                "(file://dir/name, or file:///dir/name from its root), without '..'",
    "mount-location-relative.yml": "jobs.solve.mounts.case-data.location: must be an absolute path, got 'data'",
}


@pytest.mark.parametrize("fuzzfile", sorted(REFUSED))
def test_a_bad_volume_path_is_refused_before_any_node_is_touched(fuzzfile, servers, tmp_path):
    refused = DataRun(fuzzfile, tmp_path, servers)
    assert refused.rc != 0, refused
    assert REFUSED[fuzzfile] in refused.output, refused
    assert "TASK [fuzz.multinode.node" not in refused.output, refused
    assert refused.left_nothing(), (refused.leftovers, refused.registered, refused.volumes_left)
    for node in NODES:
        assert docker("exec", node, "test", "-e", "/etc/cron.d/fmn-escape").returncode == 1, node
