"""The pure parts of running a job in its image (containers.py): which
images Podman is asked for, and the shell that enters a rank's cwd inside
the image as the job user (run here with every POSIX sh the nodes have)."""

import os
import shutil
import subprocess
import time

import pytest
from multinode_runtime.containers import ENTER_SCRIPT, Container, local_image
from multinode_runtime.errors import RuntimeFailure

SHELLS = [sh for sh in ("dash", "busybox") if shutil.which(sh)]


def test_docker_images_are_asked_for_by_their_name():
    assert local_image("docker://mirror.gcr.io/library/alpine:3.16") == "mirror.gcr.io/library/alpine:3.16"
    digest = "docker://mirror.gcr.io/library/debian@sha256:" + "a" * 64
    assert local_image(digest) == "mirror.gcr.io/library/debian@sha256:" + "a" * 64


@pytest.mark.parametrize("uri, says", [
    ("library/alpine:3.16", "only docker:// and oras:// images exist in Fuzzball"),
    ("https://example.org/x.tar", "only docker:// and oras:// images exist in Fuzzball"),
])
def test_other_images_are_refused_naming_the_image(uri, says):
    with pytest.raises(RuntimeFailure) as failure:
        local_image(uri)
    assert str(failure.value).startswith("image %s: " % uri)
    assert says in str(failure.value)


def enter(shell, cwd, *argv):
    command = ["busybox", "sh"] if shell == "busybox" else [shell]
    return subprocess.run(command + ["-c", ENTER_SCRIPT, "fuzz-multinode", cwd] + list(argv),
                          capture_output=True, text=True, timeout=10, check=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_command_starts_in_the_cwd_with_its_arguments_intact(shell, tmp_path):
    done = enter(shell, str(tmp_path), "sh", "-c", 'pwd; printf "<%s>" "$@"', "x", "a b", "", "$HOME", "*")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "%s\n<a b><><$HOME><*>" % tmp_path


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_cwd_fails_naming_it(shell, tmp_path):
    done = enter(shell, str(tmp_path / "data"), "true")
    assert done.returncode == 1
    assert done.stderr == ("fuzz.multinode: cwd %s: no such directory in the job's image, or the "
                           "job user may not enter it\n" % (tmp_path / "data"))


@pytest.mark.parametrize("shell", SHELLS)
def test_the_exit_status_is_the_commands(shell, tmp_path):
    assert enter(shell, str(tmp_path), "sh", "-c", "exit 7").returncode == 7


def test_a_dead_container_is_not_entered(tmp_path):
    gone = Container("j", {"name": "fuzz-multinode-j", "image": "docker://x/y:1", "pid": 2 ** 22 + 1, "mnt": 1})
    assert not gone.alive()
    with pytest.raises(RuntimeFailure, match=r"the container of job j on node n1 \(image docker://x/y:1\) "
                                             r"is not running any more"):
        gone.check_alive("n1")


# -- where a job runs on a node (place_job) ------------------------------------------

def job_spec(execution="container", local=False):
    from multinode_runtime.spec import JobSpec
    return JobSpec.from_dict({"job": "j", "run": "r1", "execution": execution, "local": local,
                              "image": {"uri": "docker://mirror.gcr.io/library/alpine:3.16"},
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"},
                                        {"rank": 1, "name": "j-1", "node": "n2"}]})


@pytest.fixture
def no_podman(runtime_state, monkeypatch):
    import multinode_runtime.containers as containers
    from multinode_runtime import registry
    monkeypatch.setattr(containers, "PODMAN", str(runtime_state / "no" / "podman"))
    (runtime_state / "run" / "jobs" / "j").mkdir(parents=True)
    return registry


def test_local_mode_without_podman_runs_on_the_bare_host_and_says_why(no_podman):
    from multinode_runtime.containers import host_reason, job_container, place_job, ran_in
    spec = job_spec(local=True)
    assert place_job(spec, "n1") is None
    assert host_reason("j").startswith("this machine has no Podman (")
    assert host_reason("j").endswith("so image docker://mirror.gcr.io/library/alpine:3.16 is not used")
    assert job_container("j") is None
    assert ran_in(spec) == "on the bare host"


def test_a_cluster_node_without_podman_refuses_the_job_saying_what_to_do(no_podman):
    from multinode_runtime.containers import place_job
    with pytest.raises(RuntimeFailure) as failure:
        place_job(job_spec(), "n2")
    message = str(failure.value)
    assert message.startswith("node n2 has no ")
    assert "to run job j in its image" in message
    assert "fuzz_multinode_execution: host" in message


def test_host_execution_and_nodes_without_ranks_start_no_container(no_podman):
    from multinode_runtime.containers import host_reason, place_job
    assert place_job(job_spec(execution="host"), "n1") is None
    assert place_job(job_spec(), "n3") is None  # no rank of the job there
    assert host_reason("j") is None  # nothing to explain: asked for, or nothing here


# -- the container's processes, as its PID namespace names them ---------------------

@pytest.fixture
def sandboxed_shell():
    """A shell in a PID and mount namespace of its own with its own /proc
    (as in a job's container): (its host pid, the pid it knows itself by,
    its PID namespace's inode)."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", 'echo "$$"; exec sleep 60'],
                            stdout=subprocess.PIPE, text=True)
    try:
        own = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while True:  # unshare's child, in the new namespace
            children = open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read().split()
            if children:
                break
            assert time.monotonic() < deadline
            time.sleep(0.01)
        host = int(children[0])
        yield host, own, os.stat("/proc/%d/ns/pid" % host).st_ino
    finally:
        proc.kill()
        proc.wait()


def test_a_container_process_is_found_by_the_pid_it_knows_itself_by(runtime_state, sandboxed_shell):
    host, own, pid_ns = sandboxed_shell
    container = Container("j", {"name": "fuzz-multinode-j", "pid": host, "pidns": pid_ns})
    assert own == 1
    assert container.host_pid(own) == host
    assert container.has_pid(own)
    assert container.host_pid(2) is None  # no such process in the container
    assert not container.has_pid(2)
    elsewhere = Container("j", {"name": "fuzz-multinode-j", "pid": host, "pidns": pid_ns + 1})
    assert elsewhere.host_pid(own) is None  # a process of another PID namespace
