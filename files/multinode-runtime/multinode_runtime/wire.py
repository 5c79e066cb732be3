"""What crosses a wrapper call's connection, and line-intact writing.

A launch request travels as the ssh command (`launch <base64 JSON>`); the
launcher answers with framed records on ssh's stdout: one type byte, a
4-byte big-endian length, the payload. The exit status has its own record
because ssh's own exit code (255) is ambiguous. Output is written on as
whole lines, so concurrent writers never tear each other's lines.
"""

import base64
import fcntl
import json
import os
import select
import stat
import struct
import termios
import threading

from .errors import RuntimeFailure

FRAME_STDOUT, FRAME_STDERR, FRAME_EXIT, FRAME_ERROR = b"O", b"E", b"X", b"!"
HEADER = struct.Struct(">cI")  # a frame's type byte and payload length
READY = b"ready"  # a hold request's answer (FRAME_STDOUT) once it is in place


CHUNK = 1 << 20  # bytes moved per read(2) at most, and the pipes' capacity


class LineWriter:
    """Buffers a byte stream and writes only complete lines to `fd`, all
    complete lines of a chunk in one write(2), so concurrent writers to the
    same O_APPEND file never tear each other's lines. flush() writes the
    unterminated tail at end of stream: to a log (a file opened O_APPEND:
    the job log, a rank log) followed by a newline, so it stays a line of
    its own instead of being glued to the next line another writer appends;
    elsewhere (a pipe, a file opened without O_APPEND) as it is, the bytes
    ssh would deliver. Into a pipe (rank 0's, which the supervisor relays;
    a pipe to mpirun) the lines go in writes of at most PIPE_BUF bytes,
    cut at line ends: only those a pipe keeps whole beside another
    writer's (a longer line is one write of its own)."""

    MAX_PENDING = 8 << 20  # a line longer than this is written in pieces

    def __init__(self, fd, write=None):
        """`write(data)` instead of writing to fd at once: the head's agent
        queues what it cannot write yet (agent.Output)."""
        self.fd = fd
        try:
            into_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            into_pipe = False
        self.write = write or ((lambda data: write_lines_to_pipe(fd, data)) if into_pipe
                               else (lambda data: write_all(fd, data)))
        self.pending = []  # the unterminated line so far, in the pieces it came in
        self.pending_size = 0
        try:
            self.terminate = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
        except OSError:
            self.terminate = False

    def feed(self, data):
        """Write every complete line that came so far; keep the rest."""
        cut = data.rfind(b"\n") + 1
        if not cut:
            if self.pending_size + len(data) < self.MAX_PENDING:
                if data:
                    self.pending.append(data)
                self.pending_size += len(data)
                return
            cut = len(data)
        lines = memoryview(data)[:cut]  # no copy of the lines themselves
        if self.pending:
            lines = b"".join(self.pending + [lines])
        self.write(lines)
        rest = data[cut:]
        self.pending = [rest] if rest else []
        self.pending_size = len(rest)

    def flush(self):
        if self.pending:
            tail = b"".join(self.pending)
            self.write(tail + b"\n" if self.terminate else tail)
            self.pending = []
            self.pending_size = 0


class LineRelay:
    """A pipe whose writers' bytes reach `fd` as whole lines (LineWriter),
    relayed by a thread: rank 0's stdout and stderr (one pipe, so their
    order stays as rank 0 wrote them), into the job log that forwarded
    worker lines are appended to too (forwarding.py), so neither tears the
    other's lines. `identity` is the pipe's (st_dev, st_ino): what a process
    holding it has as its fd 1 or 2 (/proc/<pid>/fd/N)."""

    LINGER_SECONDS = 2  # for a writer left after the job's kill (finish)

    def __init__(self, fd, owner=None):
        """`owner`: the pwd entry of the writers' user, who may open the pipe
        again (/dev/stdout), as a pipe of its own."""
        self.read_fd, self.write_fd = os.pipe()
        widen_pipe(self.write_fd)
        if owner is not None and os.geteuid() == 0:
            os.fchown(self.write_fd, owner.pw_uid, owner.pw_gid)
        info = os.fstat(self.read_fd)
        self.identity = (info.st_dev, info.st_ino)
        self.lines = LineWriter(fd)
        self.stopping = False
        self.thread = None

    def fds(self):
        """Both ends, while they are open here (a forked process closes them)."""
        return [fd for fd in (self.read_fd, self.write_fd) if fd is not None]

    def start(self):
        """The writers have the write end now: relay until they all closed it."""
        os.close(self.write_fd)
        self.write_fd = None
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()

    def _relay(self):
        while True:
            stopping = self.stopping  # then what the pipe holds now, and no more
            if not select.select([self.read_fd], [], [], 0 if stopping else 0.2)[0]:
                if stopping:
                    break
                continue
            data = read_chunk(self.read_fd)
            if data:
                self.lines.feed(data)
            if not data or stopping:
                break
        self.lines.flush()

    def finish(self):
        """After the job's processes were stopped: the rest is written,
        the unterminated tail too, and the pipe is closed."""
        if self.thread is not None:
            self.thread.join(self.LINGER_SECONDS)
            self.stopping = True
            self.thread.join()
            self.thread = None
        for fd in self.fds():
            os.close(fd)
        self.read_fd = self.write_fd = None


def write_lines_to_pipe(fd, data):
    """Whole lines into a pipe, each write(2) at most PIPE_BUF bytes of
    them, or one line longer than that."""
    data = bytes(data)
    start = 0
    while start < len(data):
        end = start + select.PIPE_BUF
        if end < len(data):
            cut = data.rfind(b"\n", start, end)
            if cut < 0:
                cut = data.find(b"\n", end)
            end = len(data) if cut < 0 else cut + 1
        write_all(fd, memoryview(data)[start:end])
        start = end


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            return


def widen_pipe(fd):
    """Let a pipe hold CHUNK bytes, so that its writer blocks less and its
    reader moves more per read(2); a pipe that cannot grow stays as it is."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass


def read_chunk(fd):
    """What `fd` has to give now, up to CHUNK bytes, in one read(2) sized to
    it (a pipe says how much it holds): no CHUNK-sized buffer per read."""
    try:
        ready = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        ready = 0
    return os.read(fd, min(max(ready, 1 << 16), CHUNK))


def read_all(fd):
    """Everything `fd` gives until its end of file (a pipe whose writers
    have all closed it)."""
    data = bytearray()
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(data)
        data += chunk


def send_frame(fd, kind, *payload, extra=0):
    """One frame; its payload the bytes of `payload`'s parts, sent in one
    writev(2) without joining them, and with `extra` the length of bytes
    that the caller sends next, as the rest of the payload."""
    header = HEADER.pack(kind, sum(len(part) for part in payload) + extra)
    parts = [memoryview(header), *(memoryview(part) for part in payload)]
    while parts:
        try:
            sent = os.writev(fd, parts)
        except BrokenPipeError:
            return
        while parts and sent >= len(parts[0]):
            sent -= len(parts.pop(0))
        if parts:
            parts[0] = parts[0][sent:]


class FrameReader:
    """Cuts a byte stream into frames. feed() returns the frames that the
    stream so far completes; the rest waits for the next feed."""

    def __init__(self):
        self.buffer = bytearray()

    def feed(self, data):
        if self.buffer:
            self.buffer += data
            return self._cut(self.buffer)
        frames, used = self._frames_in(data)  # no copy into the buffer first
        self.buffer += memoryview(data)[used:]
        return frames

    def _cut(self, buffer):
        frames, used = self._frames_in(buffer)
        del buffer[:used]  # a bytearray drops its head without copying
        return frames

    @staticmethod
    def _frames_in(data):
        """(the complete frames at the start of data, bytes they take)."""
        frames = []
        start = 0
        with memoryview(data) as view:
            while len(view) - start >= HEADER.size:
                kind, size = HEADER.unpack_from(view, start)
                end = start + HEADER.size + size
                if len(view) < end:
                    break
                frames.append((kind, bytes(view[start + HEADER.size:end])))
                start = end
        return frames, start


def parse_launch_request(original):
    """A request is base64 JSON: {job, rank, command, forward} to run a
    command for a rank, {job, rank, task: true, forward} to run task-array
    task `rank` (its command comes from the job spec on the node),
    {job, cleanup: true} to stop every process of the job on the target
    node, or {job, hold: true}, the head supervisor's lifeline to a node for
    the job's life (claims.py). The runtime's requests also name their
    `run`; the launcher refuses one of another run than the job's here;
    over ssh they carry the run's `token` too (run_token.py)."""
    words = original.split()
    if len(words) != 2 or words[0] != "launch":
        raise RuntimeFailure("this key only launches fuzz.multinode job commands")
    try:
        request = json.loads(base64.b64decode(words[1], validate=True))
        if not isinstance(request["job"], str) or not isinstance(request.get("run", ""), str):
            raise ValueError
        if request.get("cleanup") is not True and request.get("hold") is not True and not (
                isinstance(request["rank"], int) and (
                    request.get("task") is True or isinstance(request["command"], str))):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise RuntimeFailure("malformed launch request") from None
    return request


def encode_request(request):
    return "launch " + base64.b64encode(json.dumps(request).encode()).decode()
