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
import struct

from .errors import RuntimeFailure

FRAME_STDOUT, FRAME_STDERR, FRAME_EXIT, FRAME_ERROR = b"O", b"E", b"X", b"!"
_HEADER = struct.Struct(">cI")
READY = b"ready"  # a hold request's answer (FRAME_STDOUT) once it is in place


class LineWriter:
    """Buffers a byte stream and writes only complete lines to `fd`, all
    complete lines of a chunk in one write(2), so concurrent writers to the
    same O_APPEND file never tear each other's lines. flush() writes the
    unterminated tail at end of stream: to a log (a file opened O_APPEND:
    the job log, a rank log) followed by a newline, so it stays a line of
    its own instead of being glued to the next line another writer appends;
    elsewhere (a pipe, a file opened without O_APPEND) as it is, the bytes
    ssh would deliver."""

    MAX_PENDING = 8 << 20  # a line longer than this is written in pieces

    def __init__(self, fd):
        self.fd = fd
        self.pending = b""
        try:
            self.terminate = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
        except OSError:
            self.terminate = False

    def feed(self, data):
        self.pending += data
        cut = self.pending.rfind(b"\n") + 1
        if cut == 0 and len(self.pending) >= self.MAX_PENDING:
            cut = len(self.pending)
        if cut:
            write_all(self.fd, self.pending[:cut])
            self.pending = self.pending[cut:]

    def flush(self):
        if self.pending:
            write_all(self.fd, self.pending + b"\n" if self.terminate else self.pending)
            self.pending = b""


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            return


def send_frame(fd, kind, payload):
    write_all(fd, _HEADER.pack(kind, len(payload)) + payload)


class FrameReader:
    def __init__(self):
        self.buffer = b""

    def feed(self, data):
        self.buffer += data
        while len(self.buffer) >= _HEADER.size:
            kind, size = _HEADER.unpack_from(self.buffer)
            end = _HEADER.size + size
            if len(self.buffer) < end:
                return
            yield kind, self.buffer[_HEADER.size:end]
            self.buffer = self.buffer[end:]


def parse_launch_request(original):
    """A request is base64 JSON: {job, rank, command, forward} to run a
    command for a rank, {job, rank, task: true, forward} to run task-array
    task `rank` (its command comes from the job spec on the node),
    {job, cleanup: true} to stop every process of the job on the target
    node, or {job, hold: true}, the head supervisor's lifeline to a node for
    the job's life (claims.py). The runtime's requests also name their
    `run`; the launcher refuses one of another run than the job's here."""
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
