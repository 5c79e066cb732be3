"""The pure parts of running a job in its image (containers.py): which
images Podman is asked for, and the shell that enters a rank's cwd inside
the image as the job user (run here with every POSIX sh the nodes have)."""

import os
import shutil
import subprocess
import time

import pytest
from multinode_runtime.containers import local_image
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.sandbox import ENTER_SCRIPT, Sandbox

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
    """The entry script in `shell`: (its exit status, its stdout, what it
    reported on its stdin, a pipe)."""
    command = ["busybox", "sh"] if shell == "busybox" else [shell]
    report_r, report_w = os.pipe()
    try:
        done = subprocess.run(command + ["-c", ENTER_SCRIPT, "fuzz-multinode", cwd] + list(argv), stdin=report_w,
                              capture_output=True, text=True, timeout=10, check=False)
    finally:
        os.close(report_w)
    with os.fdopen(report_r) as report:
        return done.returncode, done.stdout, report.read()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_command_starts_in_the_cwd_with_its_arguments_intact(shell, tmp_path):
    status, out, reported = enter(shell, str(tmp_path), "sh", "-c", 'pwd; printf "<%s>" "$@"',
                                  "x", "a b", "", "$HOME", "*")
    assert (status, reported) == (0, "ok\n")
    assert out == "%s\n<a b><><$HOME><*>" % tmp_path


@pytest.mark.parametrize("shell", SHELLS)
def test_the_command_does_not_inherit_the_report_fd(shell, tmp_path):
    status, out, _unused = enter(shell, str(tmp_path), "sh", "-c", 'ls /proc/self/fd/ | sort -n | tr "\n" " "')
    assert (status, out.split()[:3]) == (0, ["0", "1", "2"])
    assert len(out.split()) == 4  # and ls's own directory fd


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_cwd_is_reported_and_nothing_runs(shell, tmp_path):
    assert enter(shell, str(tmp_path / "data"), "echo", "ran") == (1, "", "cwd\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_command_that_is_not_there_to_run_is_reported_and_nothing_runs(shell, tmp_path):
    (tmp_path / "plain").write_text("echo ran\n")
    assert enter(shell, str(tmp_path), str(tmp_path / "none")) == (127, "", "exec missing\n")
    assert enter(shell, str(tmp_path), str(tmp_path / "plain")) == (127, "", "exec denied\n")
    assert enter(shell, str(tmp_path), str(tmp_path)) == (127, "", "exec denied\n")  # a directory
    assert enter(shell, str(tmp_path), "fmn-no-such-program") == (127, "", "exec missing\n")
    assert enter(shell, str(tmp_path), "echo", "ran") == (0, "ran\n", "ok\n")  # found on PATH


@pytest.mark.parametrize("shell", SHELLS)
def test_the_exit_status_is_the_commands(shell, tmp_path):
    assert enter(shell, str(tmp_path), "sh", "-c", "exit 7")[0] == 7


def test_a_dead_container_is_not_entered(tmp_path):
    gone = Sandbox("j", {"kind": "container", "name": "fuzz-multinode-j", "image": "docker://x/y:1",
                         "pid": 2 ** 22 + 1, "mnt": 1})
    assert not gone.alive()
    with pytest.raises(RuntimeFailure, match=r"the container of job j on node n1 \(image docker://x/y:1\) "
                                             r"is not running any more"):
        gone.check_alive("n1")


# -- where a job runs on a node (place_job) ------------------------------------------

def job_spec(execution="container", local=False):
    from multinode_runtime.spec import JobSpec
    # nobody: a user every machine has (the job user "fuzz" exists only once a job ran here).
    return JobSpec.from_dict({"job": "j", "run": "r1", "execution": execution, "local": local, "user": "nobody",
                              "image": {"uri": "docker://mirror.gcr.io/library/alpine:3.16"},
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"},
                                        {"rank": 1, "name": "j-1", "node": "n2"}]})


@pytest.fixture
def no_podman(runtime_state, monkeypatch):
    from multinode_runtime import containers, registry
    monkeypatch.setattr(containers, "PODMAN", str(runtime_state / "no" / "podman"))
    (runtime_state / "run" / "jobs" / "j").mkdir(parents=True)
    return registry


def test_local_mode_without_podman_runs_on_the_bare_host_and_says_why(no_podman):
    from multinode_runtime.sandbox import host_reason, job_sandbox, place_job, ran_in, remove_sandbox
    spec = job_spec(local=True)
    sandbox = place_job(spec, "n1")
    try:
        assert sandbox.image is None and sandbox.alive()
        assert host_reason("j").startswith("this machine has no Podman (")
        assert host_reason("j").endswith("so image docker://mirror.gcr.io/library/alpine:3.16 is not used")
        assert job_sandbox("j").pid == sandbox.pid
        assert ran_in(spec) == "on the bare host"
    finally:
        remove_sandbox("j")
    deadline = time.monotonic() + 10
    while sandbox.alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_cluster_node_without_podman_refuses_the_job_saying_what_to_do(no_podman):
    from multinode_runtime.sandbox import place_job
    with pytest.raises(RuntimeFailure) as failure:
        place_job(job_spec(), "n2")
    message = str(failure.value)
    assert message.startswith("node n2 has no ")
    assert "to run job j in its image" in message
    assert "fuzz_multinode_execution: host" in message


def test_host_execution_gets_the_bare_hosts_sandbox_and_nodes_without_ranks_none(no_podman):
    from multinode_runtime.sandbox import host_reason, place_job, remove_sandbox
    sandbox = place_job(job_spec(execution="host"), "n1")
    try:
        assert sandbox.image is None and sandbox.alive()
        assert host_reason("j") is None  # asked for: nothing to explain
    finally:
        remove_sandbox("j")
    assert place_job(job_spec(), "n3") is None  # no rank of the job there


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


def test_a_sandbox_process_is_found_by_the_pid_it_knows_itself_by(runtime_state, sandboxed_shell):
    host, own, pid_ns = sandboxed_shell
    container = Sandbox("j", {"kind": "container", "name": "fuzz-multinode-j", "pid": host, "pidns": pid_ns})
    assert own == 1
    assert container.host_pid(own) == host
    assert container.has_pid(own)
    assert container.host_pid(2) is None  # no such process in the container
    assert not container.has_pid(2)
    elsewhere = Sandbox("j", {"kind": "container", "name": "fuzz-multinode-j", "pid": host, "pidns": 1})
    assert elsewhere.host_pid(own) is None  # a process of another PID namespace


# -- starting the container: the Podman commands it takes ---------------------------

# A stand-in podman: it records each command line, and runs the container
# (writes this test's pid, or FAKE_PID, into the --pidfile) unless the
# image is not here. FAKE_LOCAL: the images Podman has (`image inspect` answers an ID,
# `run --pull=never` starts); `pull` adds nothing (the test says what is here).
FAKE_PODMAN = """#!/bin/sh
echo "$*" >>"$FAKE_RECORD"
image_here() { case " $FAKE_LOCAL " in *" $1 "*) return 0 ;; esac; return 1; }
case "$1" in
image) if image_here "$5"; then echo "%s"; exit 0; fi; echo "Error: $5: image not known" >&2; exit 125 ;;
pull) exit 0 ;;
run)
    never=; pidfile=
    while [ $# -gt 0 ]; do
        case "$1" in --pull=never) never=1 ;; --pidfile) pidfile=$2 ;; -c) break ;; esac
        image=$1; shift
    done
    if [ -n "$never" ] && ! image_here "$image"; then echo "Error: $image: image not known" >&2; exit 125; fi
    echo "${FAKE_PID:-%d}" >"$pidfile" ;;
esac
"""
IMAGE_ID = "f" * 64
IMAGE = "mirror.gcr.io/library/alpine:3.16"


@pytest.fixture
def fake_podman(runtime_state, monkeypatch):
    """The stand-in podman; returns a function giving the commands it was
    asked, in order, each as its first word (`image inspect` as two) and,
    for `run`, whether it was --pull=never."""
    from multinode_runtime import containers, registry
    record = runtime_state / "podman-calls"
    podman = runtime_state / "podman"
    podman.write_text(FAKE_PODMAN % (IMAGE_ID, os.getpid()))
    podman.chmod(0o755)
    monkeypatch.setattr(containers, "PODMAN", str(podman))
    monkeypatch.setenv("FAKE_RECORD", str(record))
    os.makedirs(registry.job_dir("j"))

    def asked():
        lines = record.read_text().splitlines() if record.exists() else []
        return [("run --pull=never" if "--pull=never" in line else "run") if line.startswith("run ")
                else " ".join(line.split()[:2]) if line.startswith("image ") else line.split()[0]
                for line in lines]
    return asked


def start(monkeypatch, local):
    from multinode_runtime import containers
    monkeypatch.setenv("FAKE_LOCAL", local)
    return containers.start_container(job_spec(), "n1", "j-0")


def test_a_cached_image_starts_in_one_podman_command(fake_podman, monkeypatch):
    """A job without credentials whose image is here, on a node where no
    image came with a job's credentials: one `podman run`, nothing asked
    before it (no `image inspect`) or after it (its PID 1 from --pidfile)."""
    started = start(monkeypatch, IMAGE)
    assert fake_podman() == ["run --pull=never"]
    assert started["pid"] == os.getpid()
    assert started["mnt"] == os.stat("/proc/self/ns/mnt").st_ino


def test_an_image_not_here_is_pulled_and_then_started(fake_podman, monkeypatch):
    start(monkeypatch, "")
    assert fake_podman() == ["run --pull=never", "image inspect", "pull", "run"]


def test_where_an_image_came_with_credentials_the_cache_is_looked_at_first(
        fake_podman, monkeypatch, runtime_state):
    """Once any image here came with a job's credentials, which image a
    name is counts (pull: a credentialed one is not given unasked): its ID
    is looked at before the run, as before the fast start."""
    (runtime_state / "credentialed-images").write_text("e" * 64 + "\n")
    start(monkeypatch, IMAGE)
    assert fake_podman() == ["image inspect", "run"]
    (runtime_state / "credentialed-images").write_text(IMAGE_ID + "\n")
    (runtime_state / "podman-calls").unlink()
    start(monkeypatch, IMAGE)
    assert fake_podman() == ["image inspect", "pull", "run"]


def test_a_container_whose_pid_1_is_gone_did_not_stay_up(fake_podman, monkeypatch):
    monkeypatch.setenv("FAKE_PID", str(2 ** 22 + 1))  # above any pid_max: no such process
    with pytest.raises(RuntimeFailure, match=r"node n1: the container of job j \(image "
                                             r"docker://mirror.gcr.io/library/alpine:3.16\) did not stay up"):
        start(monkeypatch, IMAGE)


def test_a_pid_1_not_yet_looked_at_is_waited_for(fake_podman, monkeypatch):
    """Until the OCI runtime's init has exec'd PID 1's program, root
    without CAP_SYS_PTRACE may not stat its namespaces (EACCES, as on a node
    that is itself a container): that moment is waited out; a denial that
    lasts fails the start, naming the job."""
    from multinode_runtime import containers
    real_stat, denied = os.stat, {"times": 0, "until": 3}

    def stat(path, *args, **kwargs):
        if str(path).startswith("/proc/%d/ns/" % os.getpid()) and denied["times"] < denied["until"]:
            denied["times"] += 1
            raise PermissionError(13, "Permission denied")
        return real_stat(path, *args, **kwargs)
    monkeypatch.setattr(os, "stat", stat)
    assert start(monkeypatch, IMAGE)["mnt"] == real_stat("/proc/self/ns/mnt").st_ino
    assert denied["times"] == 3
    monkeypatch.setattr(containers, "NAMESPACE_WITHIN", 0.05)
    denied.update(times=0, until=10 ** 6)
    with pytest.raises(RuntimeFailure, match=r"the container of job j .* did not stay up: Permission denied"):
        start(monkeypatch, IMAGE)
