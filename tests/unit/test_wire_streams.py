"""Unit tests of forwarded output's path through the node runtime's wire
module: every write a LineWriter makes holds whole lines only (so
concurrent writers to one O_APPEND log never tear each other's lines), in
as few writes as the chunks allow, and nothing is lost, torn or duplicated
on the way through frames and large reads."""

import os
import select
import threading

from hypothesis import given, settings
from hypothesis import strategies as st
from multinode_runtime import wire

NO_FD = 9999  # not open: writes are recorded instead (Recorder)


def lines_of(count, tag=b"a", width=100):
    """`count` distinct lines of `width` bytes with their newline."""
    return [b"%s %09d %s\n" % (tag, n, b"x" * (width - len(tag) - 12)) for n in range(count)]


def splits(data, cuts):
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


class Recorder:
    """Stands in for write_all: keeps every write(2) a LineWriter asks for."""

    def __init__(self, monkeypatch):
        self.writes = []
        monkeypatch.setattr(wire, "write_all", lambda fd, data: self.writes.append(bytes(data)))


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       st.lists(st.integers(min_value=0), max_size=40), st.booleans())
def test_every_write_holds_whole_lines_and_nothing_is_lost(words, cuts, unterminated):
    lines = [word + b"\n" for word in words]
    stream = b"".join(lines) + (b"tail" if unterminated else b"")
    writes = []
    writer = wire.LineWriter(NO_FD)
    writer.terminate = True  # a log
    original = wire.write_all
    wire.write_all = lambda fd, data: writes.append(bytes(data))
    try:
        for chunk in splits(stream, cuts):
            writer.feed(chunk)
        before_flush = len(writes)
        writer.flush()
    finally:
        wire.write_all = original
    assert all(w.endswith(b"\n") for w in writes)  # no write ends inside a line
    assert b"".join(writes[:before_flush]) == b"".join(lines)
    assert b"".join(writes) == stream + (b"\n" if unterminated else b"")


def test_all_complete_lines_of_a_chunk_go_in_one_write(monkeypatch):
    recorder = Recorder(monkeypatch)
    writer = wire.LineWriter(NO_FD)
    chunk = b"".join(lines_of(5000))
    writer.feed(chunk[:-30])  # ends inside the last line
    writer.feed(chunk[-30:])
    assert recorder.writes == [chunk[:-100], chunk[-100:]]


def test_an_unterminated_line_is_kept_whole_across_many_chunks(monkeypatch):
    recorder = Recorder(monkeypatch)
    writer = wire.LineWriter(NO_FD)
    line = b"y" * 300_000 + b"\n"
    for i in range(0, len(line), 1000):
        writer.feed(line[i:i + 1000])
    assert recorder.writes == [line]


def test_a_line_longer_than_max_pending_is_written_in_pieces(monkeypatch):
    """The documented limit: a writer does not buffer without bound."""
    recorder = Recorder(monkeypatch)
    writer = wire.LineWriter(NO_FD)
    monkeypatch.setattr(writer, "MAX_PENDING", 10)
    writer.feed(b"abcdef")
    writer.feed(b"ghijkl")
    writer.feed(b"mn\n")
    assert recorder.writes == [b"abcdefghijkl", b"mn\n"]


def test_concurrent_writers_to_one_log_never_tear_a_line(tmp_path):
    """Two LineWriters on one O_APPEND file, fed in odd-sized chunks at the
    same time: every line in the file is a whole line of one of them, each
    exactly once."""
    path = tmp_path / "log"
    streams = {tag: b"".join(lines_of(20_000, tag)) for tag in (b"a", b"b")}

    def write(tag):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        writer = wire.LineWriter(fd)
        data = streams[tag]
        step = 4093 if tag == b"a" else 65_537
        for i in range(0, len(data), step):
            writer.feed(data[i:i + step])
        writer.flush()
        os.close(fd)

    threads = [threading.Thread(target=write, args=(tag,)) for tag in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = path.read_bytes().splitlines(keepends=True)
    expected = lines_of(20_000, b"a") + lines_of(20_000, b"b")
    assert sorted(got) == sorted(expected)  # none lost, torn or duplicated
    for tag in streams:  # and each writer's lines in its order
        assert [line for line in got if line.startswith(tag + b" ")] == lines_of(20_000, tag)


def test_forwarded_output_through_frames_and_large_reads_arrives_whole(tmp_path):
    """The launcher's half (send_frame of large chunks on a widened pipe)
    and the wrapper's (read_chunk, FrameReader, LineWriter on a log): 5 MB
    of lines and an unterminated tail arrive once each, in order."""
    stream = b"".join(lines_of(50_000)) + b"no newline"
    reader, writer = os.pipe()
    wire.widen_pipe(reader)

    def launcher():
        for i in range(0, len(stream), 3 << 18):  # chunks of 768 KiB
            wire.send_frame(writer, wire.FRAME_STDOUT, stream[i:i + (3 << 18)])
        wire.send_frame(writer, wire.FRAME_EXIT, b"0")
        os.close(writer)

    sending = threading.Thread(target=launcher)
    sending.start()
    log = tmp_path / "log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out, frames, kinds = wire.LineWriter(fd), wire.FrameReader(), []
    while data := wire.read_chunk(reader):
        for kind, payload in frames.feed(data):
            kinds.append(kind)
            if kind == wire.FRAME_STDOUT:
                out.feed(payload)
    out.flush()
    os.close(fd)
    os.close(reader)
    sending.join()
    assert kinds[-1] == wire.FRAME_EXIT and kinds.count(wire.FRAME_EXIT) == 1
    assert log.read_bytes() == stream + b"\n"


def test_read_chunk_takes_more_than_64_kib_from_a_widened_pipe():
    reader, writer = os.pipe()
    wire.widen_pipe(writer)
    data = b"z" * (512 << 10)
    wire.write_all(writer, data)
    try:
        assert wire.read_chunk(reader) == data
    finally:
        os.close(reader)
        os.close(writer)


def test_frame_reader_returns_every_frame_of_one_large_feed():
    payloads = [b"%d" % n * (n % 50) for n in range(10_000)]
    stream = b"".join(wire.HEADER.pack(wire.FRAME_STDERR, len(p)) + p for p in payloads)
    reader = wire.FrameReader()
    got = reader.feed(stream[:-3]) + reader.feed(stream[-3:])
    assert [p for _unused, p in got] == payloads
    assert {k for k, _unused in got} == {wire.FRAME_STDERR}


def test_whole_lines_go_into_a_pipe_in_writes_it_keeps_whole():
    """Into a pipe (where another writer's bytes may land between the
    pieces of a write longer than PIPE_BUF) every write holds whole lines
    and at most PIPE_BUF bytes of them, or one longer line alone."""
    read_fd, write_fd = os.pipe()
    writer = wire.LineWriter(write_fd)
    written = []
    real_write = os.write

    def recording_write(fd, data):
        written.append(bytes(data))
        return real_write(fd, data)

    long_line = b"y" * (2 * select.PIPE_BUF) + b"\n"
    data = b"".join(lines_of(100)) + long_line + b"".join(lines_of(3, tag=b"b")) + b"tail"
    os_write, os.write = os.write, recording_write
    try:
        writer.feed(data)
        writer.flush()
    finally:
        os.write = os_write
        os.close(write_fd)
    got = wire.read_all(read_fd)
    os.close(read_fd)
    assert got == data  # a pipe's tail as it came
    assert b"".join(written) == data
    for piece in written[:-1]:
        assert piece.endswith(b"\n")
        assert len(piece) <= select.PIPE_BUF or piece == long_line
    assert long_line in written
