"""The wrapper's sh client (files/ssh-wrapper) against a real agent process
(agent.Agent, started as the head supervisor starts it), under dash and
under busybox sh: the agent's request/reply protocol, and when the client
falls back to the Python wrapper.

The client is the real file with its three fixed paths pointed into a
temporary directory: the kernel's host name (a file naming the caller's
rank), the runtime's job directories (runtime_state's), and the Python
wrapper (a stand-in that records its arguments and exits 42). The agent's
channel to node n2 is a real channel.ForkedCalls whose launcher stand-in
runs the command with sh -c (stdout and stderr into files), answers a
launcher error for "launcher-error", records "record ..." without running
it, forwards two lines and a tail for "forwarded", and stops the command when
its lifeline ends, as rank_call.Launch does.
The whole path on real jobs: tests/local/test_local_wrapper_paths.py and
molecule/quoting/tests/test_wrapper_paths.py.
"""

import json
import os
import pwd
import select
import shutil
import signal
import socket
import stat
import subprocess
import time

import pytest
from multinode_runtime import agent, calls, channel, registry, wire
from multinode_runtime.spec import JobSpec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT = os.path.join(ROOT, "files", "ssh-wrapper")
SHELLS = {"dash": ["dash"], "busybox": ["busybox", "sh"]}
SPEC = JobSpec.from_dict({"job": "j", "run": "r1", "ranks": [
    {"rank": 0, "name": "j-0", "node": "n1", "address": "10.0.0.1"},
    {"rank": 1, "name": "j-1", "node": "n2", "address": "10.0.0.2"}]})
SLOW_STATUS = 42
HOSTILE = ["two  words", "it's", 'say "hi"', "$x ${y} $(echo no) `echo no`", "back\\slash \\n",
           "*", "line1\nline2", "trailing\n\n", "", "'", "  spaces  ", "tab\tand ; && | > <",
           "unicode: \u00e9\u4e2d\U0001f600", "ctl: \u0081\u0088", "-", "--", "-o"]


def launcher_stand_in(tmp):
    """serve(request) for ForkedCalls (fd 0 the call's lifeline, fd 1 its
    frames), as rank_call.serve_call answers."""
    def serve(request):
        command = request["command"]
        if command == "launcher-error":
            wire.send_frame(1, wire.FRAME_ERROR, b"no such user")
            wire.send_frame(1, wire.FRAME_EXIT, b"255")
            return 0
        if command == "forwarded":
            wire.send_frame(1, wire.FRAME_STDOUT, b"out\nunterminated")
            wire.send_frame(1, wire.FRAME_STDERR, b"err\n")
            wire.send_frame(1, wire.FRAME_EXIT, b"0")
            return 0
        if command.startswith("record "):
            with open(os.path.join(tmp, "requests"), "a") as handle:
                handle.write(json.dumps(request) + "\n")
            wire.send_frame(1, wire.FRAME_EXIT, b"0")
            return 0
        with open(os.path.join(tmp, "remote.out"), "ab") as out:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=out, start_new_session=True, cwd=tmp)
        exited = os.pidfd_open(proc.pid)
        while True:
            ready = select.select([0, exited], [], [])[0]
            if exited in ready:
                wire.send_frame(1, wire.FRAME_EXIT, str(proc.wait()).encode())
                return 0
            if not os.read(0, 1 << 16):  # the lifeline ended: stop the command
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                return 0
    return serve


def alive(pid):
    """Whether process pid runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class StandInTransport:
    def __init__(self, serve):
        self.serve = serve

    def channel(self):
        return channel.ForkedCalls(self.serve)


@pytest.fixture(params=sorted(SHELLS))
def shell(request):
    argv = SHELLS[request.param]
    if shutil.which(argv[0]) is None:
        pytest.fail("%s is required for these tests (apt-get install -y %s)" % (argv[0], argv[0]))
    return argv


class Head:
    """Job j's head in a temporary directory: the client, its stand-ins,
    and (start_agent) the job's agent with a channel to node n2."""

    def __init__(self, tmp, shell):
        self.tmp, self.shell = str(tmp), shell
        for name in (registry.CALLS_DIR, registry.EVENTS_DIR):
            os.makedirs(registry.job_path("j", name))
        self.hostname = os.path.join(self.tmp, "hostname")
        self.slow_args = os.path.join(self.tmp, "slow.args")
        slow = os.path.join(self.tmp, "slow-wrapper")
        with open(slow, "w") as handle:
            handle.write("#!/bin/sh\nprintf '%%s\\0' \"$@\" >%s\nexit %d\n" % (self.slow_args, SLOW_STATUS))
        os.chmod(slow, 0o755)
        with open(CLIENT) as handle:
            text = handle.read()
        self.runtime = os.path.join(self.tmp, "multinode-runtime")
        os.mkdir(self.runtime)  # not there inside a job's image
        for fixed, here in (("/proc/sys/kernel/hostname", self.hostname),
                            ("/run/fuzz-multinode/jobs/", registry.JOBS_DIR + "/"),
                            ("runtime=/opt/fuzz-multinode/multinode-runtime", "runtime=" + self.runtime),
                            ('/usr/bin/python3 -I "$runtime"', slow)):
            assert text.count(fixed) == 1, "files/ssh-wrapper no longer names %s once" % fixed
            text = text.replace(fixed, here)
        self.client = os.path.join(self.tmp, "ssh-wrapper")
        with open(self.client, "w") as handle:
            handle.write(text)
        os.chmod(self.client, 0o755)
        self.agent = None
        self.as_rank("j-0")

    def as_rank(self, name):
        with open(self.hostname, "w") as handle:
            handle.write(name + "\n")

    def start_agent(self):
        self.agent = agent.Agent(SPEC, pwd.getpwuid(os.getuid()),
                                 {"n2": StandInTransport(launcher_stand_in(self.tmp))})
        self.agent.start()

    def stop_agent(self):
        if self.agent is not None and self.agent.pid is not None:
            self.agent.stop()
            os.waitpid(self.agent.pid, 0)
            self.agent.pid = None

    def popen(self, args, forward=False, stdout=subprocess.PIPE):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if forward:
            env["MULTINODE_WRAPPER_FORWARD_STREAMS"] = "1"
        return subprocess.Popen(self.shell + [self.client] + [os.fsencode(a) for a in args],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                                env=env, cwd=self.tmp)

    def call(self, args, forward=False, into_socket=False):
        """(exit status, stdout, stderr) of one client call; its stdout a
        socket with into_socket."""
        if not into_socket:
            proc = self.popen(args, forward)
            out, err = proc.communicate(timeout=60)
            return proc.returncode, out.decode(), err.decode()
        mine, theirs = socket.socketpair()
        with mine:
            proc = self.popen(args, forward, stdout=theirs)
            theirs.close()
            _unused, err = proc.communicate(timeout=60)
            mine.settimeout(60)
            out = b""
            while True:
                data = mine.recv(1 << 16)
                if not data:
                    break
                out += data
        return proc.returncode, out.decode(), err.decode()

    def slow_argv(self):
        """The Python wrapper's arguments, if the client ran it."""
        if not os.path.exists(self.slow_args):
            return None
        with open(self.slow_args, "rb") as handle:
            return [os.fsdecode(word) for word in handle.read().split(b"\0")[:-1]]

    def remote(self, name):
        path = os.path.join(self.tmp, name)
        if not os.path.exists(path):
            return None
        with open(path) as handle:
            return handle.read()

    def pool(self):
        """The names of the agent's pool of reply FIFOs."""
        return {self.agent.files.slot_name(slot, "reply") for slot in range(self.agent.files.pool_size)}

    def leftovers(self):
        """What the agent directory holds besides its request FIFO and its
        pool's reply FIFOs (each one still a FIFO), once the agent has seen
        the client end (it removes a client's files, and frees its claim,
        when the client's pidfd says so, a moment after the client's exit)."""
        deadline = time.monotonic() + 5
        while True:
            names = set(os.listdir(self.agent.directory))
            left = sorted(names - {registry.AGENT_REQUESTS} - self.pool())
            fifos = all(stat.S_ISFIFO(os.lstat(os.path.join(self.agent.directory, name)).st_mode)
                        for name in self.pool() if name in names)
            fifos = fifos and self.pool() <= names
            if (not left and fifos) or time.monotonic() > deadline:
                return left if fifos else left + ["(the pool is not whole)"]
            time.sleep(0.01)


@pytest.fixture
def head(runtime_state, shell):
    the_head = Head(runtime_state, shell)
    yield the_head
    the_head.stop_agent()


def test_a_call_is_made_by_the_agent_with_ssh_argv(head):
    """Options skipped, the words joined with spaces, run by the remote sh;
    exit 0 and nothing printed; the call recorded; the Python wrapper never
    runs, and the client leaves nothing in the agent directory."""
    head.start_agent()
    args = ["-x", "-o", "BatchMode=yes", "j-1", "printf", "'<%s>'", "'a  b'", "x   y", ">words"]
    assert head.call(args) == (0, "", "")
    assert head.remote("words") == "<a  b><x><y>"
    assert head.slow_argv() is None
    [record] = calls.read_call_records("j")
    assert (record["rank"], record["status"]) == (1, 0)
    assert head.leftovers() == []


def test_the_command_reaches_the_agent_byte_for_byte(head):
    head.start_agent()
    assert head.call(["j-1", "record"] + HOSTILE) == (0, "", "")
    [request] = [json.loads(line) for line in head.remote("requests").splitlines()]
    assert request["command"] == " ".join(["record"] + HOSTILE)
    assert (request["job"], request["run"], request["rank"], request["forward"]) == ("j", "r1", 1, False)
    assert head.slow_argv() is None


@pytest.mark.parametrize("rank", ["j-0", "j-1"])
def test_the_remote_exit_status_is_the_clients(head, rank):
    head.start_agent()
    head.as_rank(rank)
    assert head.call(["j-1", "echo out; echo err >&2; exit 7"]) == (7, "", "")
    assert head.remote("remote.out") == "out\nerr\n"  # forwarding off: not the caller's
    # A failing call of rank 0 fails the job; another rank's does not.
    assert bool(os.listdir(registry.job_path("j", registry.EVENTS_DIR))) == (rank == "j-0")


def test_the_agents_message_goes_to_stderr_with_status_255(head):
    head.start_agent()
    assert head.call(["j-1", "launcher-error"]) == (
        255, "", "multinode-ssh-wrapper: rank 1 (j-1 on n2): no such user\n")
    assert head.call(["j-9", "true"]) == (
        255, "", "multinode-ssh-wrapper: unknown host 'j-9': job j has ranks j-0, j-1\n")
    assert head.slow_argv() is None


def test_a_forwarded_call_is_made_by_the_agent_into_the_clients_outputs(head):
    """With forwarding on, the agent writes the call's lines into the
    client's stdout and stderr (pipes here: the tail as it came) before it
    answers; the Python wrapper never runs."""
    head.start_agent()
    assert head.call(["j-1", "forwarded"], forward=True) == (0, "out\nunterminated", "err\n")
    assert head.slow_argv() is None
    [record] = calls.read_call_records("j")
    assert (record["rank"], record["status"]) == (1, 0)
    assert head.leftovers() == []


@pytest.mark.parametrize("case", ["no agent yet", "forwarding into a socket", "not a rank of the job"])
def test_the_python_wrapper_makes_the_calls_the_agent_does_not(head, case):
    """Before the agent is up (no request FIFO), with forwarding on into a
    socket (which the agent cannot open again) or from a caller that is no
    rank of the job (the agent answers "slow"): the client runs the Python
    wrapper with exactly its own arguments and exits with its status. (A
    call to a rank on the head's own node is the agent's: it forks it.)"""
    if case != "no agent yet":
        head.start_agent()
    target = "j-0" if case == "head's own node" else "j-1"
    if case == "not a rank of the job":
        head.as_rank("j-7")
    args = ["-q", target] + HOSTILE
    forwarding = case == "forwarding into a socket"
    assert head.call(args, forward=forwarding, into_socket=forwarding) == (SLOW_STATUS, "", "")
    assert head.slow_argv() == ["wrapper"] + args
    assert head.remote("requests") is None and calls.read_call_records("j") == []
    if head.agent is not None:
        assert head.leftovers() == []


@pytest.mark.parametrize("case", ["no agent yet", "not a rank of the job"])
def test_inside_an_image_a_call_the_agent_does_not_make_fails_saying_why(head, case):
    """Inside a job's image there is no runtime to fall back on: the call
    fails with status 255 and says so, and nothing else runs."""
    os.rmdir(head.runtime)
    if case != "no agent yet":
        head.start_agent()
        head.as_rank("j-7")
    status, out, err = head.call(["j-1", "echo", "hi"])
    assert (status, out) == (255, "")
    assert err == ("multinode-ssh-wrapper: this call cannot be made from inside the job's image: "
                   "only the job's agent on this node makes calls there, and it did not take this one "
                   "(not up yet, or an output it cannot write into)\n")
    assert head.slow_argv() is None


def test_killing_the_client_stops_the_remote_command(head):
    """SIGKILL to the client while its command runs: the agent sees the
    client end and ends the call's lifeline; the command is stopped."""
    head.start_agent()
    proc = head.popen(["j-1", "echo $$ >sleep.pid; exec sleep 600"])
    deadline = time.monotonic() + 30
    while not (head.remote("sleep.pid") or "").endswith("\n") and time.monotonic() < deadline:
        time.sleep(0.02)
    sleeper = int(head.remote("sleep.pid"))
    proc.kill()
    proc.communicate()
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(sleeper), "sleep 600 outlived its killed client"
    assert head.leftovers() == []


def test_a_client_whose_agent_ends_before_the_answer_fails_255(head):
    head.start_agent()
    proc = head.popen(["j-1", "echo $$ >sleep.pid; exec sleep 600"])
    deadline = time.monotonic() + 30
    while not (head.remote("sleep.pid") or "").endswith("\n") and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(head.agent.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (
        255, b"", b"multinode-ssh-wrapper: the job's agent ended before the call did\n")
    # Its lifeline was the agent's: the command is stopped too.
    sleeper = int(head.remote("sleep.pid"))
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(sleeper), "sleep 600 outlived the agent"


def test_calls_at_once_each_claim_a_slot_of_their_own(head):
    """A call in flight holds its slot of the agent's pool (its claim, with
    its pid); a second call meanwhile claims another one and gets its own
    answer, and so does the first."""
    head.start_agent()
    first = head.popen(["j-1", "echo $$ >first.pid; while ! [ -e go ]; do sleep 0.01; done; exit 3"])
    deadline = time.monotonic() + 30
    while not (head.remote("first.pid") or "").endswith("\n") and time.monotonic() < deadline:
        time.sleep(0.02)
    claim = os.path.join(head.agent.directory, head.agent.files.slot_name(0, "claim"))
    with open(claim, "rb") as handle:
        assert handle.read() == b"%d" % first.pid  # taken, cut to its pid
    assert head.call(["j-1", "exit 5"]) == (5, "", "")
    with open(claim, "rb") as handle:
        assert handle.read() == b"%d" % first.pid
    with open(os.path.join(head.tmp, "go"), "w"):
        pass
    assert first.wait(timeout=30) == 3
    first.communicate()
    assert sorted(record["status"] for record in calls.read_call_records("j")) == [3, 5]
    assert head.slow_argv() is None
    assert head.leftovers() == []


def test_with_every_slot_claimed_a_call_makes_its_own_fifo(head):
    """The pool taken by live clients: the call still goes through the
    agent, on a FIFO the client makes, and the claims are left alone; the
    claims of clients that died are freed."""
    head.start_agent()
    contents = {}
    for slot in range(head.agent.files.pool_size):
        path = os.path.join(head.agent.directory, head.agent.files.slot_name(slot, "claim"))
        contents[path] = b"%d\0j-1\0true\0" % os.getpid()
        with open(path, "wb") as handle:
            handle.write(contents[path])
    assert head.call(["j-1", "exit 4"]) == (4, "", "")
    assert head.slow_argv() is None
    [record] = calls.read_call_records("j")
    assert record["status"] == 4
    for path, content in contents.items():
        with open(path, "rb") as handle:
            assert handle.read() == content
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    for path in contents:
        with open(path, "wb") as handle:
            handle.write(b"%d\0j-1\0true\0" % dead)
    assert head.call(["j-1", "true"]) == (0, "", "")
    assert head.leftovers() == []
