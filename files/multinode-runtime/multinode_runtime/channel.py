"""Many wrapper calls over one connection: the job's channel to a node.

The head supervisor's `hold` session to a worker node (supervisor.py,
transport.py) carries every fast wrapper call of the job to that node
(agent.py), instead of one ssh session per call. Both directions are frames
of wire.py of one kind, TAGGED, whose payload starts with the call's id and
the kind of the inner frame:
  head -> node   CALL (a launch request, JSON) and CANCEL (the call's
                 lifeline is gone: its wrapper client was killed);
                 TEARDOWN (call id 0: the job's teardown on the node, a
                 cleanup request, JSON, with a `nonce`);
  node -> head   the call's own frames, as a one-shot launch sends them
                 (FRAME_STDOUT, FRAME_STDERR, FRAME_ERROR, FRAME_EXIT);
                 for TEARDOWN, the nonce's bytes, then the cleanup's answer
                 as untagged frames, and the channel ends.
The end of the whole connection ends every call on it, as the end of ssh
sessions would. The teardown's answer follows a nonce because the head reads
it after its agent, which read the channel until then, was stopped (maybe
within a frame); the nonce is made after the job's processes on the head
were killed, so no output of the job can hold it.

On the node each call runs in a child forked from the warm launcher
(ForkedCalls), with the one-shot launch's own logic (rank_call.Launch), its
stdin a pipe that is its lifeline, its stdout the frames. Local mode runs
its calls the same way, in the head's agent.
"""

import json
import os
import select
import struct

from .wire import (
    FRAME_ERROR,
    FRAME_EXIT,
    FRAME_STDERR,
    FRAME_STDOUT,
    HEADER,
    FrameReader,
    read_chunk,
    send_frame,
    widen_pipe,
    write_all,
)

TAGGED = b"T"
CALL, CANCEL, TEARDOWN = b"L", b"C", b"D"
_TAG = struct.Struct(">Ic")  # call id, inner kind


def tagged(call_id, kind, payload=b""):
    """The TAGGED frame's payload for one inner frame of a call."""
    return _TAG.pack(call_id, kind) + payload


def untag(payload):
    """(call id, inner kind, inner payload) of a TAGGED frame's payload."""
    call_id, kind = _TAG.unpack_from(payload)
    return call_id, kind, payload[_TAG.size:]


def send_tagged(fd, call_id, kind, payload=b""):
    send_frame(fd, TAGGED, _TAG.pack(call_id, kind), payload)  # no joined copy


class ForkedCalls:
    """Calls run on this node, each in a forked child of this process that
    carries out the launch request (serve(request) -> exit status, run with
    fd 0 the call's lifeline and fd 1 its frames). read() returns the
    children's frames (the head's agent, local mode), relay() sends them on
    (a node's end of a channel); a child gone without its exit frame
    answers for it."""

    def __init__(self, serve):
        self.serve = serve
        self.calls = {}  # call id: [pid, lifeline write end, FrameReader, exit frame seen]
        self.by_fd = {}  # frames read end: call id
        self.exiting = set()  # pids of calls whose frames ended, not yet reaped

    def fds(self):
        return self.by_fd.keys()

    def start(self, call_id, request):
        life_r, life_w = os.pipe()
        frames_r, frames_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 255
            try:
                os.dup2(life_r, 0)
                os.dup2(frames_w, 1)
                # Nothing of the other calls (their lifelines above all).
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                status = self.serve(request)
            except BaseException as exc:  # never back into the parent's loop
                send_frame(1, FRAME_ERROR, ("launcher failed: %s" % exc).encode())
                send_frame(1, FRAME_EXIT, b"255")
            finally:
                os._exit(status if isinstance(status, int) else 255)
        os.close(life_r)
        os.close(frames_w)
        widen_pipe(frames_r)  # forwarded output moves in large chunks
        self.calls[call_id] = [pid, life_w, FrameReader(), False]
        self.by_fd[frames_r] = call_id

    def cancel(self, call_id):
        """The call's lifeline is gone: its launcher stops what it started."""
        call = self.calls.get(call_id)
        if call is not None and call[1] is not None:
            os.close(call[1])
            call[1] = None

    def cancel_all(self):
        for call_id in list(self.calls):
            self.cancel(call_id)

    def read(self, fd):
        """[(call id, kind, payload)] of what the call on fd sent."""
        call_id = self.by_fd[fd]
        call = self.calls[call_id]
        data = read_chunk(fd)
        frames = [(call_id, kind, payload) for kind, payload in call[2].feed(data)]
        call[3] = call[3] or any(kind == FRAME_EXIT for _unused, kind, _unused in frames)
        if not data:
            frames += self.ended(fd)
        self.reap()
        return frames

    def relay(self, fd, out):
        """Send the next frame the call on fd sent on to `out`, tagged (the
        node's end of a channel). An output frame's payload moves by
        splice(2), never copied through this process."""
        call_id = self.by_fd[fd]
        call = self.calls[call_id]
        header = read_exactly(fd, HEADER.size)
        if len(header) < HEADER.size:
            frames = self.ended(fd)
        else:
            kind, size = HEADER.unpack(header)
            if kind in (FRAME_STDOUT, FRAME_STDERR):
                moved = splice_frame(fd, out, call_id, kind, size)
                frames = [] if moved == size else self.ended(fd)
            else:
                payload = read_exactly(fd, size)
                call[3] = call[3] or kind == FRAME_EXIT
                frames = [(call_id, kind, payload)] + ([] if len(payload) == size else self.ended(fd))
        for frame in frames:
            send_tagged(out, *frame)
        self.reap()

    def ended(self, fd):
        """The frames of the call on fd ended: forget it (it is reaped
        later); the frames that answer for a missing exit status."""
        call_id = self.by_fd.pop(fd)
        call = self.calls.pop(call_id)
        frames = []
        if not call[3]:
            frames.append((call_id, FRAME_ERROR, b"the launcher ended without an exit status"))
            frames.append((call_id, FRAME_EXIT, b"255"))
        if call[1] is not None:
            os.close(call[1])  # its lifeline
        os.close(fd)
        self.exiting.add(call[0])
        return frames

    def reap(self):
        """Reap the calls whose frames ended, those that have exited (the
        others are reaped by a later read: this never waits)."""
        for pid in list(self.exiting):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] == pid
            except ChildProcessError:
                done = True  # reaped by a subreaper's loop already
            if done:
                self.exiting.discard(pid)


def read_exactly(fd, size):
    """size bytes from fd, fewer only at its end."""
    data = b""
    while len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            break
        data += more
    return data


def splice_frame(fd, out, call_id, kind, size):
    """Send a call's output frame of `size` payload bytes, which follow on
    fd, tagged on `out`, the payload by splice(2) from fd; returns the
    payload bytes that came (a launcher that ended within its frame is
    made up for with newlines, so the channel's framing holds)."""
    send_frame(out, TAGGED, _TAG.pack(call_id, kind), b"", extra=size)
    moved = 0
    while moved < size:
        try:
            step = os.splice(fd, out, size - moved)
        except OSError:  # not something splice takes: through memory
            data = os.read(fd, min(size - moved, 1 << 20))
            write_all(out, data)
            step = len(data)
        if not step:
            write_all(out, b"\n" * (size - moved))
            return moved
        moved += step
    return moved


def serve_channel(calls, channel_in, channel_out, teardown=None):
    """The node's end of a job's channel: run each CALL that arrives on
    channel_in in `calls` (ForkedCalls) and send every call's frames back,
    tagged, on channel_out, until channel_in ends, or until a TEARDOWN was
    answered (teardown(request) -> [(kind, payload)], its answer's frames;
    without `teardown` one is refused); then every call still running loses
    its lifeline."""
    incoming = FrameReader()
    while True:
        watched = [channel_in, *calls.fds()]
        for fd in select.select(watched, [], [])[0]:
            if fd != channel_in:
                calls.relay(fd, channel_out)
                continue
            data = read_chunk(channel_in)
            if not data:
                calls.cancel_all()
                return
            for kind, payload in incoming.feed(data):
                if kind != TAGGED:
                    continue
                call_id, inner, body = untag(payload)
                if inner == CALL:
                    try:
                        request = json.loads(body)
                    except ValueError:
                        request = None
                    if isinstance(request, dict):
                        calls.start(call_id, request)
                    else:
                        send_tagged(channel_out, call_id, FRAME_ERROR, b"malformed launch request")
                        send_tagged(channel_out, call_id, FRAME_EXIT, b"255")
                elif inner == CANCEL:
                    calls.cancel(call_id)
                elif inner == TEARDOWN:
                    if answer_teardown(body, teardown, channel_out):
                        calls.cancel_all()
                        return


class TeardownAnswer:
    """The head's reading of a node's answer to TEARDOWN: what the channel
    sends is passed over up to the nonce, then cut into frames."""

    def __init__(self, nonce):
        self.nonce = nonce
        self.before = bytearray()  # before the nonce: only what may start it
        self.reader = None  # a FrameReader, once the nonce came
        self.frames = []  # [(kind, payload)] after the nonce

    def feed(self, data):
        """Whether the answer is complete (its FRAME_EXIT came)."""
        if self.reader is None:
            self.before += data
            at = self.before.find(self.nonce)
            if at < 0:
                del self.before[:max(0, len(self.before) - len(self.nonce) + 1)]
                return False
            data = bytes(self.before[at + len(self.nonce):])
            self.reader = FrameReader()
        self.frames += self.reader.feed(data)
        return any(kind == FRAME_EXIT for kind, _unused in self.frames)


def answer_teardown(body, teardown, channel_out):
    """Answer a TEARDOWN request: its nonce, then teardown's frames. Whether
    it was carried out (a malformed one is answered with an error frame
    after no nonce: the head waits for the nonce, and gives up in time)."""
    try:
        request = json.loads(body)
        nonce = request.pop("nonce").encode()
    except (ValueError, KeyError, AttributeError, TypeError):
        send_tagged(channel_out, 0, FRAME_ERROR, b"malformed teardown request")
        return False
    if teardown is None:
        frames = [(FRAME_ERROR, b"no teardown over this channel"), (FRAME_EXIT, b"255")]
    else:
        frames = teardown(request)
    write_all(channel_out, nonce)
    for kind, payload in frames:
        send_frame(channel_out, kind, payload)
    return teardown is not None
