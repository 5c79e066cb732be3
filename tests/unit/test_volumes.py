"""A job's volumes on a node (volumes.py): where each lives under the
volume root, made for real here (as root, for a real job user), and a run's
ephemeral volumes removed at its end without following the job's links."""

import json
import multiprocessing
import os
import pwd
import subprocess
import sys

import pytest
from multinode_runtime import volumes
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.spec import JobSpec, Mount, Rank

RUN = "20261203T071500Z-00abcd"


def job_user():
    return pwd.getpwnam("nobody")  # an unprivileged user every Debian has


def spec_of(root, mounts, run=RUN, nodes=("node-1",), sharing="auto"):
    return JobSpec(job="solve", run=run, volume_root=str(root), volume_sharing=sharing,
                   mounts=[Mount(*m) for m in mounts],
                   ranks=[Rank(rank=r, name="solve-%d" % r, node=n) for r, n in enumerate(nodes)])


def test_an_ephemeral_volume_is_the_runs_and_a_persistent_one_is_its_names(tmp_path):
    spec = spec_of(tmp_path, [("/data", "data", "ephemeral"), ("/results", "keep", "persistent/results")])
    assert [volumes.volume_dir(spec, m) for m in spec.mounts] == [
        str(tmp_path / "ephemeral" / RUN / "data"), str(tmp_path / "persistent" / "results")]


@pytest.mark.parametrize("mount, run, message", [
    (("/data", "data", "ephemeral"), "", "job solve mounts the ephemeral volume data but its spec names no run"),
    (("/data", "..", "ephemeral"), RUN, "volume .. (mounted at /data): '..' cannot name a directory"),
    (("/data", "d", "persistent/../../etc"), RUN, "volume d (mounted at /data): '../../etc' cannot name a directory"),
    (("/data", "d", "elsewhere"), RUN, "malformed job spec (mounts: volume d has store 'elsewhere')"),
])
def test_a_volume_that_would_leave_the_root_is_refused(tmp_path, mount, run, message):
    spec = spec_of(tmp_path, [mount], run=run)
    with pytest.raises(RuntimeFailure) as caught:
        volumes.volume_dir(spec, spec.mounts[0])
    assert str(caught.value) == message


def test_prepare_makes_the_volumes_the_job_users_below_roots_directories(tmp_path):
    user = job_user()
    spec = spec_of(tmp_path / "volumes", [("/data", "data", "ephemeral"), ("/keep", "k", "persistent/k")])
    placed = volumes.prepare(spec, user)
    assert placed == [(str(tmp_path / "volumes" / "ephemeral" / RUN / "data"), "/data"),
                      (str(tmp_path / "volumes" / "persistent" / "k"), "/keep")]
    for directory, _unused in placed:
        info = os.stat(directory)
        assert (info.st_uid, info.st_mode & 0o777) == (user.pw_uid, 0o700)
        parent = os.stat(os.path.dirname(directory))
        assert (parent.st_uid, parent.st_mode & 0o777) == (0, 0o755)
    # A second job of the run finds them as they are, with what they hold.
    open(os.path.join(placed[0][0], "kept"), "w").close()
    assert volumes.prepare(spec, user) == placed
    assert os.listdir(placed[0][0]) == ["kept"]


def test_the_default_persistent_volumes_are_their_stores_under_the_root_whatever_the_run(tmp_path):
    """volume://user/persistent and volume://account/persistent: one
    directory each, the same for every run, apart from each other and from
    a persistent volume named user or account."""
    mounts = [("/home", "mine", "user/persistent"), ("/shared", "ours", "account/persistent"),
              ("/named", "n", "persistent/user")]
    for run in (RUN, "20261204T000000Z-ffffff"):
        spec = spec_of(tmp_path, mounts, run=run)
        assert [volumes.volume_dir(spec, m) for m in spec.mounts] == [
            str(tmp_path / "user" / "persistent"), str(tmp_path / "account" / "persistent"),
            str(tmp_path / "persistent" / "user")]
    assert volumes.store_dir(str(tmp_path), RUN, "x", "user/persistent") == str(tmp_path / "user" / "persistent")
    for store in ("user", "user/ephemeral", "account/persistent/x", "user/persistent/", "group/persistent"):
        with pytest.raises(RuntimeFailure) as caught:
            volumes.store_dir(str(tmp_path), RUN, "x", store)
        assert str(caught.value) == "malformed job spec (mounts: volume x has store %r)" % store


def test_the_default_persistent_volumes_are_made_below_roots_directories_and_outlive_the_run(tmp_path):
    user = job_user()
    root = tmp_path / "volumes"
    spec = spec_of(root, [("/home", "mine", "user/persistent"), ("/shared", "ours", "account/persistent")])
    placed = volumes.prepare(spec, user)
    assert placed == [(str(root / "user" / "persistent"), "/home"),
                      (str(root / "account" / "persistent"), "/shared")]
    for directory, _unused in placed:
        info = os.stat(directory)
        assert (info.st_uid, info.st_mode & 0o777) == (user.pw_uid, 0o700)
        parent = os.stat(os.path.dirname(directory))
        assert (parent.st_uid, parent.st_mode & 0o777) == (0, 0o755)
        open(os.path.join(directory, "kept"), "w").close()
    volumes.remove_run(str(root), RUN)
    assert all(os.listdir(directory) == ["kept"] for directory, _unused in placed)


def test_prepare_refuses_a_volume_directory_that_is_not_the_job_users(tmp_path):
    spec = spec_of(tmp_path, [("/data", "data", "ephemeral")])
    directory = volumes.volume_dir(spec, spec.mounts[0])
    os.makedirs(directory)  # root's
    with pytest.raises(RuntimeFailure) as caught:
        volumes.prepare(spec, job_user())
    assert str(caught.value) == "volume data: %s is not a directory of the job user %s" % (
        directory, job_user().pw_name)


def test_a_volume_directory_another_node_is_making_is_finished_not_refused(tmp_path):
    """On shared storage the nodes of a job make its volumes at once: one
    finds the directory another has just made (root's, 0700, empty) and not
    yet given to the job user. Root's with anything in it is not that."""
    spec = spec_of(tmp_path, [("/data", "data", "ephemeral"), ("/keep", "k", "persistent/k")])
    being_made, holding = (volumes.volume_dir(spec, mount) for mount in spec.mounts)
    for directory in (being_made, holding):
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        os.mkdir(directory, 0o700)
    open(os.path.join(holding, "roots"), "w").close()
    with pytest.raises(RuntimeFailure) as caught:
        volumes.prepare(spec, job_user())
    assert str(caught.value) == "volume k: %s is not a directory of the job user nobody" % holding
    assert os.stat(being_made).st_uid == job_user().pw_uid
    assert os.stat(holding).st_uid == 0


def test_nodes_making_the_same_volume_at_once_all_get_it(tmp_path):
    """Two processes (two nodes on shared storage) make the same new
    volume directories at the same moment, 200 times: neither is ever
    refused, and each directory is the job user's."""
    fork = multiprocessing.get_context("fork")
    barrier, failures = fork.Barrier(2), fork.Queue()

    def node():
        failed = 0
        for index in range(200):
            barrier.wait()
            try:
                volumes.make_volume_dir(str(tmp_path / "ephemeral" / ("run-%d" % index) / "data"), job_user(), "data")
            except RuntimeFailure:
                failed += 1
        failures.put(failed)

    nodes = [fork.Process(target=node) for _unused in range(2)]
    for each in nodes:
        each.start()
    for each in nodes:
        each.join(120)
    assert [each.exitcode for each in nodes] == [0, 0]
    assert [failures.get(timeout=10), failures.get(timeout=10)] == [0, 0]
    for index in range(200):
        assert os.stat(tmp_path / "ephemeral" / ("run-%d" % index) / "data").st_uid == job_user().pw_uid


def test_remove_run_removes_that_runs_ephemeral_volumes_only_and_follows_no_link(tmp_path):
    user = job_user()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me\n")
    ours = spec_of(tmp_path / "v", [("/data", "data", "ephemeral"), ("/keep", "k", "persistent/k")])
    other = spec_of(tmp_path / "v", [("/data", "data", "ephemeral")], run="20261203T071500Z-ffffff")
    for directory, _unused in volumes.prepare(ours, user) + volumes.prepare(other, user):
        os.symlink(str(outside), os.path.join(directory, "link"))
    assert volumes.remove_run(str(tmp_path / "v"), RUN) is True
    assert not (tmp_path / "v" / "ephemeral" / RUN).exists()
    assert (tmp_path / "v" / "ephemeral" / other.run / "data" / "link").is_symlink()
    assert (tmp_path / "v" / "persistent" / "k" / "link").is_symlink()
    assert (outside / "precious").read_text() == "keep me\n"
    assert volumes.remove_run(str(tmp_path / "v"), RUN) is False  # nothing left: nothing to do
    with pytest.raises(RuntimeFailure):
        volumes.remove_run(str(tmp_path / "v"), "../persistent")


def test_a_multinode_job_says_when_its_volumes_are_each_nodes_own(tmp_path):
    mounts = [("/data", "data", "ephemeral")]
    two = spec_of(tmp_path, mounts, nodes=("node-1", "node-2"), sharing="node-local")
    note = volumes.sharing_note(two)
    assert note.startswith("the volumes of job solve (data) are under %s, which is each node's own "
                           "storage: its ranks on different nodes see different files" % tmp_path)
    assert volumes.sharing_note(spec_of(tmp_path, mounts, nodes=("node-1", "node-2"), sharing="shared")) is None
    assert volumes.sharing_note(spec_of(tmp_path, mounts, nodes=("node-1", "node-1"), sharing="node-local")) is None
    assert volumes.sharing_note(spec_of(tmp_path, [], nodes=("node-1", "node-2"), sharing="node-local")) is None
    # auto: this machine's temporary directory is no network file system
    assert volumes.is_shared(str(tmp_path / "not" / "there"), "auto") is False


def test_the_runtime_says_whether_the_volume_root_is_shared_as_a_registration_would(tmp_path):
    """What the workflow runner asks the first host (volume-sharing) before
    it places jobs with volumes."""
    runtime = os.path.join(os.path.dirname(os.path.dirname(volumes.__file__)))
    for sharing, shared in (("auto", False), ("shared", True), ("node-local", False)):
        done = subprocess.run([sys.executable, "-I", runtime, "volume-sharing", str(tmp_path / "v"), sharing],
                              capture_output=True, text=True, check=True)
        assert json.loads(done.stdout) == {"shared": shared}


def test_a_mount_location_inside_the_volume_root_is_refused(tmp_path):
    spec = spec_of(tmp_path, [(str(tmp_path / "ephemeral"), "data", "ephemeral")])
    with pytest.raises(RuntimeFailure) as caught:
        volumes.prepare(spec, job_user())
    assert str(caught.value) == ("volume data: its mount location %s/ephemeral is inside the volume root %s, "
                                 "which a run does not see" % (tmp_path, tmp_path))
