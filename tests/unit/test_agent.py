"""Unit tests of the fast wrapper path's pure parts: the channel's tagged
frames, calls forked on a node (channel.ForkedCalls, serve_channel), how a
call's outcome is told (wrapper.call_outcome) and the head agent's
handling of one client (agent.Agent), with a stand-in channel. The whole
path is tested on real jobs by tests/local and the Molecule scenarios."""

import json
import os
import pwd
import select
import signal
import subprocess
import time

import pytest
from multinode_runtime import agent, agent_files, calls, channel, forwarding, registry, wire, wrapper
from multinode_runtime.spec import JobSpec

SPEC = JobSpec.from_dict({"job": "j", "run": "r1", "ranks": [
    {"rank": 0, "name": "j-0", "node": "n1", "address": "10.0.0.1"},
    {"rank": 1, "name": "j-1", "node": "n2", "address": "10.0.0.2"}]})


def frames_of(fd, count):
    reader, got = wire.FrameReader(), []
    while len(got) < count:
        data = os.read(fd, 1 << 16)
        assert data, "the channel ended after %r" % got
        got += [channel.untag(payload) for kind, payload in reader.feed(data) if kind == channel.TAGGED]
    return got


def test_tagged_frames_round_trip():
    payload = channel.tagged(7, wire.FRAME_STDOUT, b"a line\n")
    assert channel.untag(payload) == (7, wire.FRAME_STDOUT, b"a line\n")
    assert channel.untag(channel.tagged(2**32 - 1, channel.CANCEL)) == (2**32 - 1, channel.CANCEL, b"")


def serve_for_test(request):
    """A launcher stand-in: echo the command; "wait" waits for its lifeline
    to end (then touches `ended`, if given); "die" ends without an exit
    frame."""
    if request["command"] == "die":
        os._exit(3)
    wire.send_frame(1, wire.FRAME_STDOUT, request["command"].encode())
    if request["command"] == "wait":
        while os.read(0, 100):
            pass
        if request.get("ended"):
            open(request["ended"], "w").close()
        wire.send_frame(1, wire.FRAME_EXIT, b"143")
        return 0
    wire.send_frame(1, wire.FRAME_EXIT, b"0")
    return 0


@pytest.fixture
def channel_pipes(request):
    """A node's end of a channel (serve_channel over ForkedCalls), in a
    child; yields (the head's write end, the head's read end). Its launcher
    stand-in is serve_for_test unless a test parametrizes the fixture
    (indirect) with another."""
    serve = getattr(request, "param", serve_for_test)
    into_r, into_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(into_w)
        os.close(out_r)
        channel.serve_channel(channel.ForkedCalls(serve), into_r, out_w)
        os._exit(0)
    os.close(into_r)
    os.close(out_w)
    yield into_w, out_r
    try:
        os.close(into_w)
    except OSError:
        pass
    os.waitpid(pid, 0)
    os.close(out_r)


def test_calls_on_one_channel_run_at_once_and_answer_by_id(channel_pipes):
    into, out = channel_pipes
    channel.send_tagged(into, 1, channel.CALL, json.dumps({"command": "wait"}).encode())
    channel.send_tagged(into, 2, channel.CALL, json.dumps({"command": "hi"}).encode())
    channel.send_tagged(into, 3, channel.CALL, b"not json")
    got = frames_of(out, 5)
    assert sorted(got) == [(1, wire.FRAME_STDOUT, b"wait"),
                           (2, wire.FRAME_STDOUT, b"hi"), (2, wire.FRAME_EXIT, b"0"),
                           (3, wire.FRAME_ERROR, b"malformed launch request"), (3, wire.FRAME_EXIT, b"255")]
    # Call 1 is still running: cancelling it ends its lifeline.
    channel.send_tagged(into, 1, channel.CANCEL)
    assert frames_of(out, 1) == [(1, wire.FRAME_EXIT, b"143")]


def test_the_end_of_the_channel_ends_every_call_on_it(channel_pipes, tmp_path):
    into, out = channel_pipes
    ended = tmp_path / "ended"
    channel.send_tagged(into, 5, channel.CALL, json.dumps({"command": "wait", "ended": str(ended)}).encode())
    assert frames_of(out, 1) == [(5, wire.FRAME_STDOUT, b"wait")]
    os.close(into)
    deadline = time.monotonic() + 10
    while not ended.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended.exists()


def test_a_launcher_gone_without_its_status_answers_255(channel_pipes):
    into, out = channel_pipes
    channel.send_tagged(into, 4, channel.CALL, json.dumps({"command": "die"}).encode())
    assert frames_of(out, 2) == [(4, wire.FRAME_ERROR, b"the launcher ended without an exit status"),
                                 (4, wire.FRAME_EXIT, b"255")]


def teardown_for_test(request):
    """A teardown stand-in: answers what it was asked."""
    return [(wire.FRAME_STDOUT, json.dumps({"asked": request}).encode()), (wire.FRAME_EXIT, b"0")]


def serve_with_teardown(into_r, out_w):
    channel.serve_channel(channel.ForkedCalls(serve_for_test), into_r, out_w, teardown_for_test)


def answer_after(out, nonce):
    answer = channel.TeardownAnswer(nonce)
    while True:
        data = os.read(out, 7)  # small reads: the nonce and frames cut anywhere
        assert data, "the channel ended before the answer"
        if answer.feed(data):
            return answer.frames


def test_a_teardown_is_answered_after_its_nonce_and_ends_the_channel(tmp_path):
    """The head reads the answer after its agent was stopped, maybe within
    a frame: what comes before the nonce is passed over."""
    into_r, into_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(into_w)
        os.close(out_r)
        serve_with_teardown(into_r, out_w)
        os._exit(0)
    os.close(into_r)
    os.close(out_w)
    ended = tmp_path / "ended"
    channel.send_tagged(into_w, 1, channel.CALL, json.dumps({"command": "wait", "ended": str(ended)}).encode())
    assert frames_of(out_r, 1) == [(1, wire.FRAME_STDOUT, b"wait")]
    # Unread output of a call, and half a frame, before the answer.
    channel.send_tagged(into_w, 2, channel.CALL, json.dumps({"command": "hi"}).encode())
    time.sleep(0.2)
    os.read(out_r, 5)
    channel.send_tagged(into_w, 0, channel.TEARDOWN, json.dumps({"cleanup": True, "nonce": "n0nce"}).encode())
    assert answer_after(out_r, b"n0nce") == [
        (wire.FRAME_STDOUT, b'{"asked": {"cleanup": true}}'), (wire.FRAME_EXIT, b"0")]
    _unused, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # the channel ended with the teardown
    deadline = time.monotonic() + 10  # and the call still running lost its lifeline
    while not ended.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended.exists()
    assert os.read(out_r, 100) == b""
    os.close(into_w)
    os.close(out_r)


def test_a_teardown_over_a_channel_without_one_is_refused(channel_pipes):
    into, out = channel_pipes
    channel.send_tagged(into, 0, channel.TEARDOWN, json.dumps({"nonce": "xyz"}).encode())
    assert answer_after(out, b"xyz") == [
        (wire.FRAME_ERROR, b"no teardown over this channel"), (wire.FRAME_EXIT, b"255")]
    channel.send_tagged(into, 0, channel.TEARDOWN, b"{}")  # no nonce: an error, the channel goes on
    assert frames_of(out, 1) == [(0, wire.FRAME_ERROR, b"malformed teardown request")]
    channel.send_tagged(into, 3, channel.CALL, json.dumps({"command": "hi"}).encode())
    assert frames_of(out, 2) == [(3, wire.FRAME_STDOUT, b"hi"), (3, wire.FRAME_EXIT, b"0")]


def test_a_teardown_answer_finds_its_nonce_across_reads():
    answer = channel.TeardownAnswer(b"abcdef")
    frame = wire.HEADER.pack(wire.FRAME_EXIT, 1) + b"0"
    stream = b"x" * 100 + b"abc" + b"def" + frame
    assert not answer.feed(stream[:102])
    assert not answer.feed(stream[102:105])
    assert answer.feed(stream[105:])
    assert answer.frames == [(wire.FRAME_EXIT, b"0")]
    assert len(channel.TeardownAnswer(b"abcdef").before) == 0


def test_call_outcome_tells_exit_error_and_lost_apart():
    record = {"rank": 1, "start": 1.0}
    target = SPEC.ranks[1]
    assert wrapper.call_outcome(record, target, 0, None, "x")[:3] == (
        0, "rank 1 (j-1 on n2) exited with status 0", False)
    assert wrapper.call_outcome(record, target, 255, "no such user", "x")[:3] == (
        255, "rank 1 (j-1 on n2): no such user", False)
    status, reason, lost, ended = wrapper.call_outcome(record, target, None, None, "ssh exited with status 255")
    assert (status, lost) == (255, True)
    assert reason == ended["lost"] == "lost connection to rank 1 (j-1 on n2): ssh exited with status 255"
    assert ended["status"] == 255 and ended["end"] >= ended["start"]


class StandInChannel:
    def __init__(self):
        self.started, self.cancelled = [], []

    def fds(self):
        return []

    def start(self, call_id, request):
        self.started.append((call_id, request))

    def cancel(self, call_id):
        self.cancelled.append(call_id)


@pytest.fixture
def head(tmp_path, monkeypatch):
    """An agent of job j on a head in tmp_path, with a stand-in channel to
    node n2; yields (agent, channel, a function making a client's request
    and returning the read end of its reply FIFO)."""
    monkeypatch.setattr(registry, "JOBS_DIR", str(tmp_path))
    for name in (registry.CALLS_DIR, registry.EVENTS_DIR, registry.AGENT_DIR):
        os.makedirs(registry.job_path("j", name))
    the_agent = agent.Agent(SPEC, pwd.getpwuid(os.getuid()), {})
    stand_in = StandInChannel()
    the_agent.channels = {"n2": stand_in}

    def client(argv, name="j-0", pid=None, forward=False):
        pid = pid or os.getpid()
        base = os.path.join(the_agent.directory, "%d." % pid)
        os.mkfifo(base + "reply", 0o600)
        with open(base + "argv", "wb") as handle:
            handle.write(b"".join(os.fsencode(word) + b"\0" for word in argv))
        the_agent.accept(b"%d %s" % (pid, name.encode()) + (b" 1" if forward else b""))
        return os.open(base + "reply", os.O_RDONLY | os.O_NONBLOCK)

    yield the_agent, stand_in, client


def test_agent_makes_the_call_over_the_targets_channel_and_answers(head):
    the_agent, stand_in, client = head
    reply = client(["-x", "j-1", "echo", "a b"])
    [(call_id, request)] = stand_in.started
    assert request == {"job": "j", "run": "r1", "rank": 1, "command": "echo a b", "forward": False}
    assert not os.path.exists(os.path.join(the_agent.directory, "%d.argv" % os.getpid()))
    the_agent.finish(the_agent.calls[call_id], 0)
    assert os.read(reply, 100) == b"0 \n"
    [record] = calls.read_call_records("j")
    assert record["rank"] == 1 and record["status"] == 0
    assert the_agent.calls_in_flight()  # until the client ends
    os.close(reply)


def test_agent_reports_a_failed_call_of_rank_0(head):
    the_agent, stand_in, client = head
    reply = client(["j-1", "false"])
    call = the_agent.calls[stand_in.started[0][0]]
    call.error = None
    the_agent.finish(call, 1)
    assert os.read(reply, 100) == b"1 \n"
    events = os.listdir(registry.job_path("j", registry.EVENTS_DIR))
    with open(os.path.join(registry.job_path("j", registry.EVENTS_DIR), events[0])) as handle:
        event = json.load(handle)
    assert (event["rank"], event["status"], event["lost"]) == (1, 1, False)
    os.close(reply)


def test_agent_answers_a_lost_channel_for_its_calls(head):
    the_agent, stand_in, client = head
    reply = client(["j-1", "sleep", "9"])
    the_agent.channel_lost("n2", "ssh exited with status 255")
    assert os.read(reply, 200) == (b"255 multinode-ssh-wrapper: lost connection to rank 1 (j-1 on n2): "
                                   b"ssh exited with status 255\n")
    assert calls.read_call_records("j")[0]["lost"]
    assert "n2" not in the_agent.channels
    os.close(reply)


def test_agent_refuses_an_unknown_host_and_fails_the_job(head):
    the_agent, stand_in, client = head
    reply = client(["j-9", "true"])
    assert os.read(reply, 200) == (b"255 multinode-ssh-wrapper: unknown host 'j-9': "
                                   b"job j has ranks j-0, j-1\n")
    assert not stand_in.started
    assert os.listdir(registry.job_path("j", registry.EVENTS_DIR))
    os.close(reply)


def test_a_call_for_a_rank_of_the_agents_own_node_is_forked_there(head):
    the_agent, _unused, _unused = head
    here = the_agent.channel_to(SPEC.ranks[0])
    assert isinstance(here, channel.ForkedCalls)
    assert the_agent.channel_to(SPEC.ranks[0]) is here  # one for the node, made once


@pytest.mark.parametrize("argv, name", [(["j-1", "true"], "x-0")])  # not a rank of the job
def test_agent_sends_what_it_does_not_make_to_the_slow_path(head, argv, name):
    the_agent, stand_in, client = head
    reply = client(argv, name)
    assert os.read(reply, 100) == b"slow\n"
    assert not stand_in.started
    os.close(reply)


def test_agent_cancels_the_call_of_a_client_killed_before_its_answer(head):
    the_agent, stand_in, client = head
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    reply = client(["j-1", "sleep", "30"], pid=pid)
    [call] = the_agent.calls.values()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    the_agent.readable(call.pidfd)
    assert stand_in.cancelled == [call.id]
    assert not the_agent.calls and not the_agent.calls_in_flight()
    os.close(reply)


def test_a_reply_fifo_of_a_client_gone_before_it_asked_is_no_call_in_flight(head):
    the_agent, stand_in, client = head
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    os.mkfifo(os.path.join(the_agent.directory, "%d.reply" % pid))
    assert not the_agent.calls_in_flight()
    os.mkfifo(os.path.join(the_agent.directory, "%d.reply" % os.getpid()))
    assert the_agent.calls_in_flight()


def serve_closing_early(request):
    """A launcher stand-in whose frames end well before it exits."""
    wire.send_frame(1, wire.FRAME_EXIT, b"0")
    os.close(1)
    time.sleep(float(request["command"]))
    return 0


def test_forked_calls_never_wait_for_a_launcher_that_closed_its_frames_early():
    calls_here = channel.ForkedCalls(serve_closing_early)
    calls_here.start(1, {"command": "2"})
    [fd] = list(calls_here.fds())
    frames, started = [], time.monotonic()
    while fd in calls_here.fds():
        frames += calls_here.read(fd)
    assert time.monotonic() - started < 1.5  # not the launcher's 2 s
    assert frames == [(1, wire.FRAME_EXIT, b"0")]
    [pid] = calls_here.exiting  # exiting, reaped later
    deadline = time.monotonic() + 10
    while calls_here.exiting and time.monotonic() < deadline:
        time.sleep(0.1)
        calls_here.reap()
    assert not calls_here.exiting
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_client_ended_twice_in_one_select_is_handled_once(head):
    the_agent, stand_in, client = head
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    reply = client(["j-1", "true"], pid=pid)
    os.waitpid(pid, 0)
    [call] = the_agent.calls.values()
    handlers = the_agent.handlers()
    assert set(handlers) == {call.pidfd}  # no request FIFO, a stand-in channel without fds
    handlers[call.pidfd]()
    handlers[call.pidfd]()  # stale: its call is gone
    assert stand_in.cancelled == [call.id] and not the_agent.calls
    os.close(reply)


def start_agent(tmp_path, monkeypatch):
    """A real agent process of job j (no channels) in tmp_path."""
    monkeypatch.setattr(registry, "JOBS_DIR", str(tmp_path))
    for name in (registry.CALLS_DIR, registry.EVENTS_DIR):
        os.makedirs(registry.job_path("j", name))
    the_agent = agent.Agent(SPEC, pwd.getpwuid(os.getuid()), {})
    the_agent.start()
    return the_agent


def ask(the_agent, argv, name="j-0"):
    """What files/ssh-wrapper does up to its answer, as a child process (its
    pid names its files); returns (pid, the read end of its answer)."""
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            base = os.path.join(the_agent.directory, "%d." % os.getpid())
            os.mkfifo(base + "reply", 0o600)
            with open(base + "argv", "wb") as handle:
                handle.write(b"".join(os.fsencode(word) + b"\0" for word in argv))
            with open(the_agent.requests_path, "wb") as requests:  # blocks without a reader
                requests.write(b"%d %s\n" % (os.getpid(), name.encode()))
            with open(base + "reply", "rb") as reply:
                os.write(answer_w, reply.readline())
        finally:
            os._exit(0)
    os.close(answer_w)
    return pid, answer_r


def read_within(fd, seconds):
    assert select.select([fd], [], [], seconds)[0], "no answer within %s s" % seconds
    return os.read(fd, 1000)


def test_clients_of_a_killed_agent_neither_hang_nor_run_twice(tmp_path, monkeypatch):
    the_agent = start_agent(tmp_path, monkeypatch)
    try:
        pid, answer = ask(the_agent, ["j-0", "true"], name="x-0")  # no rank's: the agent answers slow
        assert read_within(answer, 10) == b"slow\n"
        os.waitpid(pid, 0)
        os.kill(the_agent.pid, signal.SIGKILL)
        os.waitpid(the_agent.pid, 0)
        # A client that comes now is not blocked opening the request FIFO:
        # the supervisor's check answers it, on one of its polls.
        pid, answer = ask(the_agent, ["j-1", "true"])
        # A call the agent had taken (its argv file gone) is not made again.
        os.mkfifo(os.path.join(the_agent.directory, "1.reply"))
        taken = os.open(os.path.join(the_agent.directory, "1.reply"), os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + 10
        while not select.select([answer], [], [], 0.05)[0] and time.monotonic() < deadline:
            the_agent.check()
        assert read_within(answer, 0) == b"slow\n"
        os.waitpid(pid, 0)
        assert os.read(taken, 1000) == b"255 multinode-ssh-wrapper: the job's agent ended before the call did\n"
        os.close(taken)
        assert not os.path.exists(the_agent.requests_path)
        assert not the_agent.calls_in_flight()
    finally:
        the_agent.stop()
    assert not os.path.exists(the_agent.directory)


def client_with(set_up):
    """A client process that waits after set_up() (its outputs), once that is done."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        set_up()
        os.write(ready_w, b".")
        time.sleep(30)
        os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"."
    os.close(ready_r)
    return pid


@pytest.fixture
def forwarding_client(head, tmp_path):
    """A client process whose stdout is a log opened O_APPEND and whose
    stderr is a pipe; yields (agent, channel, the client's pid, the log's
    path, the pipe's read end, the read end of its reply FIFO)."""
    the_agent, stand_in, client = head
    log = tmp_path / "job.log"
    err_r, err_w = os.pipe()
    pid = client_with(lambda: (os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 1),
                               os.dup2(err_w, 2)))
    os.close(err_w)
    reply = client(["j-1", "cat", "lines"], pid=pid, forward=True)
    yield the_agent, stand_in, pid, log, err_r, reply
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(err_r)
    os.close(reply)


def test_agent_writes_forwarded_lines_into_its_clients_outputs_before_answering(forwarding_client):
    the_agent, stand_in, pid, log, err_r, reply = forwarding_client
    [(call_id, request)] = stand_in.started
    assert request["forward"] is True
    the_agent.on_frames([(call_id, wire.FRAME_STDOUT, b"one\ntw"), (call_id, wire.FRAME_STDERR, b"oops\n")])
    assert log.read_bytes() == b"one\n"  # whole lines only
    assert os.read(err_r, 100) == b"oops\n"
    the_agent.on_frames([(call_id, wire.FRAME_STDOUT, b"o\nthree"), (call_id, wire.FRAME_EXIT, b"0")])
    assert log.read_bytes() == b"one\ntwo\nthree\n"  # the tail ends in a newline in a log
    assert os.read(reply, 100) == b"0 \n"


def test_a_slow_reader_of_forwarded_output_holds_back_its_node_and_gets_every_line(forwarding_client):
    the_agent, stand_in, pid, log, err_r, reply = forwarding_client
    [(call_id, _unused)] = stand_in.started
    channel_r, channel_w = os.pipe()
    stand_in.fds = lambda: [channel_r]
    line = b"x" * 99 + b"\n"
    sent = 0
    while channel_r in the_agent.handlers():  # the pipe of stderr is not read meanwhile
        the_agent.on_frames([(call_id, wire.FRAME_STDERR, line * 1000)])
        sent += 1
    assert the_agent.calls[call_id].queued() > forwarding.QUEUE_LIMIT
    the_agent.on_frames([(call_id, wire.FRAME_EXIT, b"0")])
    got = b""
    while len(got) < sent * len(line) * 1000:
        for write in the_agent.writers().values():
            write()
        got += os.read(err_r, 1 << 20)
    assert got == line * 1000 * sent
    assert not the_agent.writers() and channel_r in the_agent.handlers()
    assert os.read(reply, 100) == b"0 \n"
    os.close(channel_r)
    os.close(channel_w)


def test_a_forwarded_call_whose_output_is_a_file_not_appended_to_takes_the_slow_path(head, tmp_path):
    the_agent, stand_in, client = head
    pid = client_with(lambda: os.dup2(os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1))
    try:
        reply = client(["j-1", "cat", "lines"], pid=pid, forward=True)
        assert os.read(reply, 100) == b"slow\n"
        assert not stand_in.started
        os.close(reply)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_rank_0s_unterminated_writes_and_forwarded_lines_stay_whole_lines_in_the_job_log(head, tmp_path, monkeypatch):
    """Rank 0 (a real process) writes its stdout into the supervisor's
    LineRelay: the start of a line, then, after a forwarded call (of a
    client holding the same pipe, as a wrapper started by rank 0 does) has
    written its worker's lines, the rest of it and an unterminated tail.
    The agent writes the forwarded lines into the job log itself, not into
    the pipe, and the relay writes rank 0's lines whole: no torn line."""
    the_agent, stand_in, client = head
    monkeypatch.setattr(registry, "LOG_DIR", str(tmp_path / "log"))
    log = registry.job_log_path("j")
    os.makedirs(os.path.dirname(log))
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    relay = wire.LineRelay(log_fd)
    the_agent.job_log_pipes = {relay.identity}
    go_r, go_w = os.pipe()
    rank0 = subprocess.Popen(["/bin/sh", "-c", "printf '0 '; read go; printf 'rank 0 line\\n'; printf tail"],
                             stdin=go_r, stdout=relay.write_fd, stderr=relay.write_fd)
    os.close(go_r)
    pid = client_with(lambda: (os.dup2(relay.write_fd, 1), os.dup2(relay.write_fd, 2)))
    relay.start()
    try:
        reply = client(["j-1", "cat", "lines"], pid=pid, forward=True)
        [(call_id, _unused)] = stand_in.started
        deadline = time.monotonic() + 10
        while not relay.lines.pending and time.monotonic() < deadline:
            time.sleep(0.01)  # rank 0's "0 " is in the relay
        assert relay.lines.pending == [b"0 "]
        the_agent.on_frames([(call_id, wire.FRAME_STDOUT, b"1 worker\n2 wor"),
                             (call_id, wire.FRAME_STDERR, b"1 on stderr\n"),
                             (call_id, wire.FRAME_STDOUT, b"ker\n"), (call_id, wire.FRAME_EXIT, b"0")])
        assert os.read(reply, 100) == b"0 \n"
        os.close(reply)
        os.write(go_w, b"\n")
        assert rank0.wait(timeout=30) == 0
    finally:
        os.close(go_w)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        relay.finish()
        os.close(log_fd)
    with open(log, "rb") as handle:
        assert handle.read().splitlines() == [b"1 worker", b"1 on stderr", b"2 worker", b"0 rank 0 line", b"tail"]


def serve_output_for_test(request):
    """A launcher stand-in forwarding `command` MiB of lines in frames of up to 1 MiB."""
    line = b"y" * 99 + b"\n"
    for _unused in range(int(request["command"])):
        wire.send_frame(1, wire.FRAME_STDOUT, line * 10486)
    wire.send_frame(1, wire.FRAME_STDERR, b"done\n")
    wire.send_frame(1, wire.FRAME_EXIT, b"0")
    return 0


@pytest.mark.parametrize("channel_pipes", [serve_output_for_test], indirect=True)
def test_output_frames_cross_the_nodes_end_of_a_channel_whole(channel_pipes):
    into_w, out_r = channel_pipes
    channel.send_tagged(into_w, 1, channel.CALL, json.dumps({"command": "3"}).encode())
    channel.send_tagged(into_w, 2, channel.CALL, json.dumps({"command": "2"}).encode())
    got = {1: b"", 2: b""}
    ended = set()
    reader = wire.FrameReader()
    while len(ended) < 2:
        data = os.read(out_r, 1 << 20)
        assert data
        for _kind, payload in reader.feed(data):
            call_id, inner, body = channel.untag(payload)
            if inner == wire.FRAME_STDOUT:
                got[call_id] += body
            elif inner == wire.FRAME_EXIT:
                assert body == b"0"
                ended.add(call_id)
    line = b"y" * 99 + b"\n"
    assert got == {1: line * 10486 * 3, 2: line * 10486 * 2}


@pytest.fixture
def pooled(head):
    """The head's agent with its pool of reply FIFOs made and opened, as
    start() and serve() make them; yields (agent, channel, a function
    making a client's claim of a slot and its request, returning the read
    end of the slot's FIFO)."""
    the_agent, stand_in, _unused = head
    for slot in range(the_agent.files.pool_size):
        os.mkfifo(the_agent.files.slot_path(slot, "reply"), 0o600)
    the_agent.files.open_pool()
    assert len(the_agent.files.pool) == the_agent.files.pool_size >= agent_files.POOL_MIN

    def claim(slot, argv, pid, name="j-0"):
        with open(the_agent.files.slot_path(slot, "claim"), "xb") as handle:
            handle.write(b"".join(os.fsencode(word) + b"\0" for word in [str(pid)] + argv))
        reply = os.open(the_agent.files.slot_path(slot, "reply"), os.O_RDONLY | os.O_NONBLOCK)
        the_agent.accept(b"%d %s 0 %d" % (pid, name.encode(), slot))
        return reply

    yield the_agent, stand_in, claim
    for fd in the_agent.files.pool:
        os.close(fd)


def sleeper():
    """A live client process (its pid claims a slot); kill it when done."""
    return client_with(lambda: None)


def test_a_claimed_slot_is_made_taken_and_freed_once_its_client_ended(pooled):
    the_agent, stand_in, claim = pooled
    pid = sleeper()
    reply = claim(0, ["j-1", "true"], pid)
    [(call_id, request)] = stand_in.started
    assert request["command"] == "true"
    with open(the_agent.files.slot_path(0, "claim"), "rb") as handle:
        assert handle.read() == b"%d" % pid  # cut to the pid: taken
    the_agent.finish(the_agent.calls[call_id], 0)
    assert os.read(reply, 100) == b"0 \n"
    assert the_agent.calls_in_flight()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    the_agent.readable(the_agent.calls[call_id].pidfd)
    assert not os.path.exists(the_agent.files.slot_path(0, "claim")) and not the_agent.slot_calls
    assert not the_agent.calls_in_flight()
    os.close(reply)


def test_a_slot_in_use_is_never_answered_for_a_second_call(pooled):
    """A request naming the slot of a call in flight (its claim overwritten,
    or a client that did not claim) starts nothing and writes nothing into
    the slot's FIFO; the call that holds it gets its own answer."""
    the_agent, stand_in, claim = pooled
    first, second = sleeper(), sleeper()
    try:
        reply = claim(0, ["j-1", "exit 3"], first)
        with open(the_agent.files.slot_path(0, "claim"), "wb") as handle:
            handle.write(b"%d\0j-1\0true\0" % second)
        the_agent.accept(b"%d j-0 0 0" % second)
        the_agent.accept(b"%d j-0 0 %d" % (second, the_agent.files.pool_size))  # no such slot
        assert len(stand_in.started) == 1 and list(the_agent.slot_calls) == [0]
        with pytest.raises(BlockingIOError):
            os.read(reply, 100)
        the_agent.finish(the_agent.calls[stand_in.started[0][0]], 3)
        assert os.read(reply, 100) == b"3 \n"
        os.close(reply)
    finally:
        for pid in (first, second):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_a_request_whose_claim_is_not_its_own_is_ignored(pooled):
    the_agent, stand_in, claim = pooled
    pid = sleeper()
    try:
        with open(the_agent.files.slot_path(2, "claim"), "wb") as handle:
            handle.write(b"%d\0j-1\0true\0" % pid)
        the_agent.accept(b"%d j-0 0 2" % os.getpid())
        assert not stand_in.started and not the_agent.calls
        assert os.path.exists(the_agent.files.slot_path(2, "claim"))  # still the other client's
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_an_answer_its_client_did_not_read_never_reaches_the_slots_next_client(pooled):
    the_agent, stand_in, claim = pooled
    pid = sleeper()
    reply = claim(0, ["j-1", "true"], pid)
    os.close(reply)  # the client dies before it reads its answer
    [(call_id, _unused)] = stand_in.started
    the_agent.finish(the_agent.calls[call_id], 7)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    the_agent.readable(the_agent.calls[call_id].pidfd)
    nxt = sleeper()
    try:
        reply = claim(0, ["j-1", "true"], nxt)
        with pytest.raises(BlockingIOError):
            os.read(reply, 100)  # nothing of the last call's
        the_agent.finish(the_agent.calls[stand_in.started[1][0]], 0)
        assert os.read(reply, 100) == b"0 \n"
        os.close(reply)
    finally:
        os.kill(nxt, signal.SIGKILL)
        os.waitpid(nxt, 0)


def test_claims_of_clients_that_died_before_they_asked_are_freed(pooled):
    """A claim whose pid is gone, and an empty claim no process holds open
    (its client died between its claim and its write), are freed; the claim
    of a live client that has not asked yet, and an empty claim that its
    client still writes, are kept."""
    the_agent, stand_in, claim = pooled
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    live = sleeper()
    try:
        for slot, content in ((0, b"%d\0j-1\0true\0" % dead), (1, b""), (2, b"%d\0j-1\0true\0" % live)):
            with open(the_agent.files.slot_path(slot, "claim"), "wb") as handle:
                handle.write(content)
        writing = os.open(the_agent.files.slot_path(3, "claim"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        holder = client_with(lambda: None)  # another process holds slot 3's claim open (forked with it)
        os.close(writing)
        the_agent.reclaim()
        claims = [os.path.exists(the_agent.files.slot_path(slot, "claim")) for slot in range(4)]
        assert claims == [False, False, True, True]
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        the_agent.reclaim()
        assert not os.path.exists(the_agent.files.slot_path(3, "claim"))
        assert not stand_in.started
    finally:
        os.kill(live, signal.SIGKILL)
        os.waitpid(live, 0)


def test_the_supervisor_answers_the_pools_clients_of_a_killed_agent(tmp_path, monkeypatch):
    """Slot 0's call was taken (its claim cut to the pid): the agent ended
    before the call did; slot 1's was not: slow. Each is answered once."""
    the_agent = start_agent(tmp_path, monkeypatch)
    try:
        files = the_agent.files
        assert all(os.path.exists(files.slot_path(slot, "reply")) for slot in range(files.pool_size))
        os.kill(the_agent.pid, signal.SIGKILL)
        os.waitpid(the_agent.pid, 0)
        for slot, content in ((0, b"%d" % os.getpid()), (1, b"%d\0j-1\0true\0" % os.getpid())):
            with open(the_agent.files.slot_path(slot, "claim"), "wb") as handle:
                handle.write(content)
        replies = [os.open(the_agent.files.slot_path(slot, "reply"), os.O_RDONLY | os.O_NONBLOCK) for slot in (0, 1)]
        the_agent.check()
        the_agent.check()
        assert [os.read(fd, 1000) for fd in replies] == [
            b"255 multinode-ssh-wrapper: the job's agent ended before the call did\n", b"slow\n"]
        for fd in replies:
            os.close(fd)
    finally:
        the_agent.stop()
    assert not os.path.exists(the_agent.directory)


def test_a_slot_its_slow_client_gave_back_serves_the_next_call(pooled):
    """Answered "slow", the client removes its claim (after reading the
    answer) and runs the Python wrapper in the same process: the slot is
    no call of the agent's any more, and the next client that claims it is
    served, while the first one still runs."""
    the_agent, stand_in, claim = pooled
    first, second = sleeper(), sleeper()
    try:
        reply = claim(0, ["j-1", "true"], first, name="j-7")  # no rank of the job: slow
        assert os.read(reply, 100) == b"slow\n"
        os.close(reply)
        assert the_agent.calls_in_flight()
        os.unlink(the_agent.files.slot_path(0, "claim"))
        assert not the_agent.calls_in_flight()
        reply = claim(0, ["j-1", "true"], second)
        [(call_id, _unused)] = stand_in.started
        the_agent.finish(the_agent.calls[call_id], 0)
        assert os.read(reply, 100) == b"0 \n"
        os.close(reply)
        os.kill(first, signal.SIGKILL)
        os.waitpid(first, 0)
        [old] = [call for call in the_agent.calls.values() if call.pid == first]
        the_agent.readable(old.pidfd)
        with open(the_agent.files.slot_path(0, "claim"), "rb") as handle:
            assert handle.read() == b"%d" % second  # still the second call's
    finally:
        for pid in (first, second):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


@pytest.fixture
def client_in_a_container():
    """A client process in a PID namespace of its own, with its own /proc
    (as in a run's sandbox): (its host pid, the pid it knows itself by,
    the sandbox's record)."""
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", 'echo "$$"; exec sleep 60'],
                            stdout=subprocess.PIPE, text=True)
    try:
        own = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while not open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read().split():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        host = int(open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read().split()[0])
        record = {"name": "fuzz-multinode-j", "pid": host, "pidns": os.stat("/proc/%d/ns/pid" % host).st_ino}
        yield host, own, record
    finally:
        proc.kill()
        proc.wait()


def test_a_client_in_the_runs_sandbox_is_served_by_the_pid_it_knows_itself_by(pooled, client_in_a_container):
    """The job's processes are in the PID namespace of the run's sandbox (its
    container, or the bare host's): a client claims its slot and asks with
    its own pid there (`$$`), which the agent maps to the host's to watch it."""
    from multinode_runtime.sandbox import Sandbox
    the_agent, stand_in, claim = pooled
    host, own, record = client_in_a_container
    the_agent.sandbox = Sandbox("j", record)
    reply = claim(0, ["j-1", "true"], own)
    [call] = the_agent.calls.values()
    assert (call.pid, call.client) == (host, own)
    assert stand_in.started[0][1]["command"] == "true"
    the_agent.finish(call, 0)
    assert os.read(reply, 100) == b"0 \n"
    assert the_agent.calls_in_flight()  # until the client ends
    os.kill(host, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not select.select([call.pidfd], [], [], 0.1)[0]:
        assert time.monotonic() < deadline
    the_agent.readable(call.pidfd)
    assert not os.path.exists(the_agent.files.slot_path(0, "claim")) and not the_agent.slot_calls
    assert not the_agent.calls_in_flight()
    os.close(reply)
