"""Local mode while a job runs (tests/fuzzfiles/local/held.yml, 3 ranks that
wait until the test has looked): the head's launch socket, which starts
commands on any rank, is usable by the job's own processes only (not by
another user, nor by the job user's processes of another job, the
attacker's job intruder.yml); every process of the
job runs as the job user but the runtime's own; the rank names are in
/etc/hosts, each at its own loopback address, only while the job runs; the
machine's host name never changes. Afterwards nothing of the job is left."""

import base64
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import local_jobs as lj

JOB = "held"
RANKS = range(3)
SOCKET = Path(lj.registry.job_path(JOB, lj.registry.LOCAL_SOCKET))

# Connects to the launch socket, sends one request line, and reports what
# came back until the other side closed the connection (a broken pipe or a
# reset, when the other side closed it without reading, is a close too).
CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("cannot connect: %s" % exc.strerror)
    sys.exit(0)
data = b""
try:
    s.sendall(sys.argv[2].encode() + b"\n")
    s.settimeout(30)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except (BrokenPipeError, ConnectionResetError):
    pass
print("connected, %d bytes back: %r" % (len(data), data[:300]))
"""


def launch_request(command, rank=1):
    """A wrapper call's request, as the runtime's `connect` sends it: run
    `command` on `rank` of the job (base64 JSON after the word launch)."""
    request = {"job": JOB, "rank": rank, "command": command, "forward": False}
    return "launch " + base64.b64encode(json.dumps(request).encode()).decode()


def as_user(name, *argv):
    user = pwd.getpwnam(name)
    done = subprocess.run(["/usr/bin/python3", "-I", *argv], user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60, check=False)
    return done.stdout.strip()


def in_rank(rank, *argv):
    """python3 -I ARGV as the job user inside the namespaces of one of the
    held job's rank processes (its host name's, and its run's sandbox's),
    as a process of the job runs."""
    name = "%s-%d" % (JOB, rank)
    user = pwd.getpwnam(lj.JOB_USER)
    pids = [int(entry.split()[1]) for entry in lj.job_processes([JOB])[JOB]
            if entry.endswith("(host name %s)" % name) and " uid %d " % user.pw_uid in entry]
    assert pids, "no process of rank %s" % name
    done = subprocess.run(["nsenter", "--target", str(pids[0]), "--uts", "--mount", "--pid", "--ipc",
                           "setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid), "--clear-groups",
                           "/usr/bin/python3", "-I", *argv],
                          cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    return done.stdout.strip()


class HeldJob:
    """run-job.yml on held.yml, started in the background like a user's
    command in a terminal, and released when the test is done."""

    def __init__(self, root):
        self.dir = Path(tempfile.mkdtemp(prefix="fmn-local-held-", dir="/var/tmp"))
        user = pwd.getpwnam(lj.JOB_USER)
        os.chown(self.dir, user.pw_uid, user.pw_gid)
        self.dir.chmod(0o755)
        self.fuzzfile = lj.combine(root / "held.yml", [(lj.LOCAL_FUZZFILES / "held.yml", None)],
                                   replace={"/fmn-local/held": str(self.dir)})
        self.logs = root / "logs"
        self.out_path = root / "ansible-playbook.out"
        argv, env = lj.playbook(self.fuzzfile, self.logs)
        self.hostname_before = socket.gethostname()
        self.started = time.monotonic()
        with open(self.out_path, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=lj.REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def output(self):
        return self.out_path.read_text()

    def wait_until_running(self, timeout=240):
        deadline = time.monotonic() + timeout
        while not all((self.dir / ("ready-%d" % r)).exists() for r in RANKS):
            if self.proc.poll() is not None:
                pytest.fail("the playbook ended before every rank ran:\n%s" % self.output()[-8000:])
            if time.monotonic() > deadline:
                pytest.fail("the ranks did not all run within %d s:\n%s" % (timeout, self.output()[-8000:]))
            time.sleep(0.2)

    def release(self, timeout=120):
        (self.dir / "stop").touch()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        print("held: run-job.yml took %.1f s" % (time.monotonic() - self.started))
        return rc

    def stop(self):
        if self.proc.poll() is None:
            (self.dir / "stop").touch()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
                lj.unregister([JOB])
        shutil.rmtree(self.dir, ignore_errors=True)


def processes_by_namespace():
    """[(uid, args, host name)] of every process in the job's namespaces."""
    found = []
    for entry in lj.job_processes([JOB])[JOB]:
        # "pid P uid U state S: ARGS (host name NAME)"
        head, rest = entry.split(": ", 1)
        uid = int(head.split()[3])
        args, _unused, name = rest.rpartition(" (host name ")
        found.append((uid, args, name.rstrip(")")))
    return found


@pytest.fixture(scope="module")
def held(workdir):
    """While the job runs: what the tests look at, taken once, then the job
    released and the run's result. Yields a dict."""
    root = workdir / "held"
    root.mkdir()
    job = HeldJob(root)
    seen = {}
    try:
        job.wait_until_running()
        seen["socket"] = os.stat(SOCKET) if SOCKET.exists() else None
        seen["processes"] = processes_by_namespace()
        seen["hosts"] = lj.hosts_blocks().get(JOB)
        seen["resolved"] = {r: socket.gethostbyname("%s-%d" % (JOB, r)) for r in RANKS}
        seen["hostname"] = socket.gethostname()
        records = Path(lj.registry.job_path(JOB, lj.registry.NAMESPACES_DIR))
        seen["ns_records"] = {path.name: os.stat(path).st_ino for path in records.iterdir()}
        marker = job.dir / "marker"
        command = "id -un >%s; hostname >>%s" % (marker, marker)
        # Another unprivileged user, as the socket is.
        seen["nobody"] = as_user("nobody", "-c", CLIENT, str(SOCKET), launch_request(command))
        seen["nobody_connect"] = as_user("nobody", lj.RUNTIME, "connect", JOB, launch_request(command))
        time.sleep(1)
        seen["nobody_marker"] = marker.exists()
        # Even with the socket's mode opened up, the runtime checks who
        # connects (SO_PEERCRED) and serves nobody but the job user and root.
        mode = stat.S_IMODE(os.stat(SOCKET).st_mode)
        try:
            os.chmod(SOCKET, 0o666)
            seen["nobody_open"] = as_user("nobody", "-c", CLIENT, str(SOCKET), launch_request(command))
            time.sleep(1)
            seen["nobody_open_marker"] = marker.exists()
        finally:
            os.chmod(SOCKET, mode)
        # The job user's processes of other jobs are the same user: the
        # socket serves this job's processes only. From outside the job:
        seen["fuzz_outside"] = as_user(lj.JOB_USER, "-c", CLIENT, str(SOCKET), launch_request(command))
        time.sleep(1)
        seen["fuzz_outside_marker"] = marker.exists()
        # The same request from a process of the job (the job user, in rank
        # 2's namespace) is carried out, as the job user, on the rank asked for.
        seen["fuzz"] = in_rank(2, "-c", CLIENT, str(SOCKET), launch_request(command))
        seen["fuzz_marker"] = marker.read_text() if marker.exists() else None
        # Another job (the attacker's) asks for a command on this job's rank
        # 1, through its own socket and through this job's.
        intruder = lj.combine(root / "intruder.yml", [(lj.LOCAL_FUZZFILES / "intruder.yml", None)],
                              replace={"/fmn-local/held": str(job.dir)})
        seen["intruder"] = lj.run_job(intruder, root / "intruder-logs")
        seen["intruder_answers"] = {name: (job.dir / name).read_text(errors="replace")
                                    for name in ("through-own", "into-held") if (job.dir / name).exists()}
        seen["intruded"] = (job.dir / "intruded").exists()
        # Another run (the attacker's job) tries to see, signal and read the
        # held job's processes, given their pids, and the node's state.
        held_pids = sorted({int(entry.split()[1]) for entry in lj.job_processes([JOB])[JOB]})
        assert held_pids
        (job.dir / "pids").write_text(" ".join(map(str, held_pids)) + "\n")
        peeper = lj.combine(root / "peeper.yml", [(lj.LOCAL_FUZZFILES / "peeper.yml", None)],
                            replace={"/fmn-local/held": str(job.dir)})
        seen["peeper"] = lj.run_job(peeper, root / "peeper-logs")
        seen["rc"] = job.release()
        seen["output"] = job.output()
        seen["log"] = (job.logs / (JOB + ".log")).read_text() if (job.logs / (JOB + ".log")).exists() else ""
        seen["after"] = lj.machine_state([JOB])
        seen["mounts_after"] = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
                                if " %s/" % lj.registry.STATE_DIR in line]
        seen["hostname_before"] = job.hostname_before
        yield seen
    finally:
        job.stop()


def test_the_held_job_runs_and_finishes(held):
    assert held["rc"] == 0, held["output"][-8000:]
    assert sorted(held["log"].splitlines()) == [
        "held rank=%d host=held-%d user=fuzz" % (r, r) for r in RANKS], held["output"][-8000:]


def test_launch_socket_belongs_to_the_job_user_and_no_one_else_may_use_it(held):
    info = held["socket"]
    assert info is not None, "no %s while the job ran" % SOCKET
    assert stat.S_ISSOCK(info.st_mode)
    assert (pwd.getpwuid(info.st_uid).pw_name, stat.S_IMODE(info.st_mode)) == (lj.JOB_USER, 0o600)


def test_another_user_cannot_connect_to_the_launch_socket(held):
    assert held["nobody"] == "cannot connect: Permission denied"
    assert "Permission denied" in held["nobody_connect"], held["nobody_connect"]
    assert held["nobody_marker"] is False


def test_the_launcher_refuses_another_user_even_when_the_socket_mode_lets_it_connect(held):
    """Nothing is run, nothing comes back: the connection is just closed."""
    assert held["nobody_open"] == "connected, 0 bytes back: b''"
    assert held["nobody_open_marker"] is False


def test_the_job_user_outside_the_job_is_refused_too(held):
    """Every job runs as the job user: a process of that user that is not
    one of this job's (another job's, say) gets nothing run."""
    assert "serves the processes of that job only" in held["fuzz_outside"], held["fuzz_outside"]
    assert held["fuzz_outside_marker"] is False


def test_a_process_of_the_job_gets_the_command_run_as_itself_on_the_rank_asked_for(held):
    """The positive control for the refusals above: the same request."""
    assert held["fuzz"].startswith("connected, "), held["fuzz"]
    assert held["fuzz_marker"] == "fuzz\nheld-1\n"


def test_another_job_cannot_run_a_command_in_this_job(held):
    """The attacker's job asks for a command on this job's rank 1 through its
    own launch socket (a request naming this job), refused saying why, and
    through this job's socket, which is not even there in its sandbox (the
    socket's own refusal of another job's process is checked above, from
    outside any job); nothing runs."""
    intruder = held["intruder"]
    assert intruder.rc == 0, intruder
    answers = held["intruder_answers"]
    assert "the launch socket of job intruder" in answers.get("through-own", ""), answers
    assert "serves that run only, not job held" in answers.get("through-own", ""), answers
    assert answers.get("into-held") == ("multinode-runtime: cannot reach the local launcher of job held at %s: "
                                        "No such file or directory\n" % SOCKET), answers
    assert held["intruded"] is False


def test_another_run_cannot_see_signal_or_read_this_jobs_processes_nor_other_runs_state(held):
    """The attacker's job, another run on the same machine, knows the held
    job's pids: in its sandbox (its own PID namespace and /proc) it can
    neither signal them nor read their environment, finds no process with
    the held job's environment, sees only its own job directory, no logs,
    and only its own few processes."""
    peeper = held["peeper"]
    assert peeper.rc == 0, peeper
    *lines, processes = peeper.lines("peeper")
    assert lines == ["peeper: jobs peeper ", "peeper: logs "], peeper
    # Its sandbox's PID 1, its script's shell and the command substitution's
    # ls, wc and shell: not the held job's ranks nor the machine's others.
    assert processes.startswith("peeper: processes ") and int(processes.split()[-1]) <= 5, peeper


def test_job_processes_run_as_the_job_user_except_the_runtime(held):
    """Every process in the job's namespaces is the job user's, but for the
    runtime (the head supervisor, the socket's server and the launchers),
    which is root; every rank has processes of the job user."""
    job_uid = pwd.getpwnam(lj.JOB_USER).pw_uid
    processes = held["processes"]
    for uid, args, name in processes:
        # The runtime's: its own processes, and nsenter waiting for the
        # command it entered into the run's sandbox as the job user.
        runtime = args.startswith("/usr/bin/python3 -I %s " % lj.RUNTIME) or (
            args.startswith("/usr/bin/nsenter --target ") and " --setuid %d " % job_uid in args)
        assert uid == job_uid or (uid == 0 and runtime), (uid, args, name)
    assert {name for uid, _unused, name in processes if uid == job_uid} == {"%s-%d" % (JOB, r) for r in RANKS}, \
        processes


def test_the_job_namespaces_are_pinned_while_the_job_runs_and_released_after(held):
    """Cleanup finds a job's processes by the inode numbers of its recorded
    namespaces. A namespace that died would give its number to the next one
    made anywhere on the machine (a container's), and cleanup would kill
    processes that are not the job's: each record holds its namespace (a
    bind mount of it, so the record's own inode is the namespace's) until
    cleanup releases it."""
    records = held["ns_records"]
    assert len(records) >= len(RANKS), records
    assert dict(records) == {name: int(name) for name in records}
    assert held["mounts_after"] == []


def test_rank_names_are_in_etc_hosts_at_their_own_loopback_addresses_while_the_job_runs(held):
    assert held["hosts"] == ["127.0.0.%d %s-%d" % (r + 1, JOB, r) for r in RANKS], held["hosts"]
    assert held["resolved"] == {r: "127.0.0.%d" % (r + 1) for r in RANKS}


def test_the_machine_host_name_never_changes(held):
    assert held["hostname"] == held["hostname_before"] == held["after"]["hostname"]


def test_nothing_of_the_job_is_left_afterwards(held):
    """No process, no /etc/hosts block, no job directory (so no socket)."""
    assert held["after"] == lj.cleaned(held["after"], [JOB]), held["after"]
    assert not SOCKET.exists()
