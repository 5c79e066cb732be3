"""A run's sandbox on the bare host (host_sandbox.py), made for real here
(as root): what a process entered into it sees of the node, and that
killing its PID 1 ends everything in it."""

import os
import signal
import subprocess
import time

import pytest
from multinode_runtime import host_sandbox, registry
from multinode_runtime.processes import process_state


@pytest.fixture
def node(runtime_state, monkeypatch):
    """The runtime's state under runtime_state, with two jobs' directories,
    logs, control sockets and a cluster key there."""
    conf = runtime_state / "etc"
    conf.mkdir()
    key = conf / "cluster_ed25519"
    key.write_text("PRIVATE KEY\n")
    monkeypatch.setattr(registry, "CLUSTER_KEY", str(key))
    for job in ("mine", "theirs"):
        os.makedirs(registry.job_dir(job))
        (runtime_state / "run" / "jobs" / job / "spec.json").write_text("{}")
        os.makedirs(registry.control_dir(job))
        open(os.path.join(registry.control_dir(job), "master-of-" + job), "w").close()
    os.makedirs(os.path.join(registry.LOG_DIR, "theirs"))
    return runtime_state


@pytest.fixture
def sandbox(node):
    record = host_sandbox.start("mine")
    yield record
    os.kill(record["pid"], signal.SIGKILL)


def inside(record, script):
    return subprocess.run(["nsenter", "--target", str(record["pid"]), "--mount", "--pid", "--ipc", "--",
                           "sh", "-c", script], capture_output=True, text=True, timeout=20, check=False)


def test_a_run_sees_its_own_job_and_nothing_else_of_the_runtime(node, sandbox):
    done = inside(sandbox, 'ls %s; echo -; ls -A %s; echo -; ls -R %s; echo -; cat %s; echo -; cat %s/spec.json' % (
        registry.JOBS_DIR, registry.LOG_DIR, registry.CONTROL_DIR, registry.CLUSTER_KEY,
        registry.job_dir("mine")))
    assert done.returncode == 0, done.stderr
    own_control = os.path.basename(registry.control_dir("mine"))
    assert done.stdout.split("-\n") == ["mine\n", "", "%s:\n%s\n\n%s/%s:\nmaster-of-mine\n" % (
        registry.CONTROL_DIR, own_control, registry.CONTROL_DIR, own_control), "", "{}"]
    tamper = inside(sandbox, "(: >>%s) 2>/dev/null || echo denied even to root" % registry.CLUSTER_KEY)
    assert tamper.stdout == "denied even to root\n", tamper
    # The host keeps seeing all of it.
    assert sorted(os.listdir(registry.JOBS_DIR)) == ["mine", "theirs"]
    assert open(registry.CLUSTER_KEY).read() == "PRIVATE KEY\n"


def test_a_run_sees_only_its_own_processes(sandbox):
    done = inside(sandbox, 'echo $$; set -- /proc/[0-9]*; echo "$@"')  # builtins only: no other process
    own, listed = done.stdout.split("\n")[:2]
    assert own == "2"  # after the sandbox's PID 1
    assert listed.split() == ["/proc/1", "/proc/2"]


def test_what_the_run_wrote_into_its_own_directory_is_on_the_host(node, sandbox):
    done = inside(sandbox, "echo hello >%s/out" % registry.job_dir("mine"))
    assert done.returncode == 0, done.stderr
    assert open(os.path.join(registry.job_dir("mine"), "out")).read() == "hello\n"


def test_killing_the_sandboxs_pid_1_ends_every_process_in_it(sandbox):
    started = subprocess.Popen(["nsenter", "--target", str(sandbox["pid"]), "--mount", "--pid", "--ipc", "--",
                                "sh", "-c", "trap '' TERM; (setsid sleep 300 &); exec sleep 300"])
    time.sleep(0.3)
    inner = [pid for pid in os.listdir("/proc") if pid.isdigit() and pid != str(sandbox["pid"])
             and _pid_ns(pid) == sandbox["pidns"]]
    assert len(inner) == 2
    os.kill(sandbox["pid"], signal.SIGKILL)
    started.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(process_state(int(pid)) not in (None, "Z") for pid in inner):
        assert time.monotonic() < deadline, inner
        time.sleep(0.05)


def _pid_ns(pid):
    try:
        return os.stat("/proc/%s/ns/pid" % pid).st_ino
    except OSError:
        return None


def test_a_rank_started_in_the_sandbox_is_running_when_its_start_returns(runtime_state):
    """spawn_rank returns once the command runs in its cwd, not when it
    ends (nsenter, the command's parent, keeps the start's report pipe)."""
    import pwd

    from multinode_runtime.execution import spawn_rank
    from multinode_runtime.sandbox import place_job, remove_sandbox
    from multinode_runtime.spec import JobSpec
    spec = JobSpec.from_dict({"job": "j", "run": "r1", "execution": "host", "user": "nobody", "cwd": "/tmp",
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"}]})
    os.makedirs(registry.job_dir("j"))
    sandbox = place_job(spec, "n1")
    try:
        out_r, out_w = os.pipe()
        started = time.monotonic()
        child = spawn_rank(spec, spec.ranks[0], pwd.getpwnam("nobody"), ["sh", "-c", "pwd; exec sleep 30"], {},
                           sandbox, out_w, out_w)
        os.close(out_w)
        assert time.monotonic() - started < 5
        assert os.read(out_r, 100) == b"/tmp\n"
        assert child.poll() is None
        child.kill()
        child.wait()
    finally:
        remove_sandbox("j")


@pytest.mark.parametrize("program, message", [
    ("/opt/fmn/none", "cannot run '/opt/fmn/none': No such file or directory"),
    ("fmn-no-such-program", "rank 0 (j-0): command not found: fmn-no-such-program"),
])
def test_a_rank_whose_command_is_not_there_fails_its_start_naming_it(runtime_state, program, message):
    import pwd

    from multinode_runtime.errors import RuntimeFailure
    from multinode_runtime.execution import spawn_rank
    from multinode_runtime.sandbox import place_job, remove_sandbox
    from multinode_runtime.spec import JobSpec
    spec = JobSpec.from_dict({"job": "j", "run": "r1", "execution": "host", "user": "nobody",
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"}]})
    os.makedirs(registry.job_dir("j"))
    sandbox = place_job(spec, "n1")
    try:
        with pytest.raises(RuntimeFailure) as info:
            spawn_rank(spec, spec.ranks[0], pwd.getpwnam("nobody"), [program], {"PATH": "/usr/bin:/bin"},
                       sandbox, subprocess.DEVNULL, subprocess.DEVNULL)
        assert str(info.value) == message
    finally:
        remove_sandbox("j")


def test_a_volume_is_at_its_location_in_the_sandbox_only(node, tmp_path):
    """A job's volume shows at its mount location inside the sandbox, where
    what is written lands in the volume's directory; the host's own path
    keeps what it had (a location the host has), or stays an empty
    directory (one it lacked); the volume root, where another run's volume
    is, shows empty."""
    root = tmp_path / "root"
    volume, other, theirs = root / "volume", root / "other-volume", root / "another-runs"
    for directory in (volume, other, theirs):
        directory.mkdir(parents=True)
    (volume / "input").write_text("from the volume\n")
    (theirs / "secret").write_text("another run's\n")
    present = tmp_path / "present"
    present.mkdir()
    (present / "hosts-own").write_text("the host's\n")
    missing = tmp_path / "missing" / "deeper"
    record = host_sandbox.start("mine", [(str(volume), str(present)), (str(other), str(missing))], str(root))
    try:
        done = inside(record, "cat %s/input; ls %s; echo out >%s/output; echo more >%s/more; ls -A %s" % (
            present, present, present, missing, root))
        assert done.returncode == 0, done.stderr
        assert done.stdout == "from the volume\ninput\n"
    finally:
        os.kill(record["pid"], signal.SIGKILL)
    assert (volume / "output").read_text() == "out\n"
    assert (other / "more").read_text() == "more\n"
    assert os.listdir(present) == ["hosts-own"]
    assert os.listdir(missing) == []


def test_a_volume_location_that_is_a_file_on_the_host_fails_the_sandbox_naming_it(node, tmp_path):
    (tmp_path / "volume").mkdir()
    (tmp_path / "afile").write_text("")
    with pytest.raises(OSError) as caught:
        host_sandbox.start("mine", [(str(tmp_path / "volume"), str(tmp_path / "afile"))])
    assert "volume at %s" % (tmp_path / "afile") in str(caught.value)
