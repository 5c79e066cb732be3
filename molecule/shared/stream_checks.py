"""What the streams edges jobs (tests/fuzzfiles/streams/edges.yml) write and
how their logs are judged, shared by molecule/streams (over ssh) and
tests/local/test_local_forwarding.py (through the head's launch socket), so
both tiers hold the runtime to the same lines.

The checks return '' when all is well, else what is wrong, and the tests
assert on that: this module is not a test module, so pytest would not
rewrite an assert in it to show the values."""

import collections
import os
import re

WORKERS = (1, 2, 3, 4)
STREAMS = (b"out", b"err")
BIG_LINE = b"".join(b"%07d," % i for i in range(131072))  # what edges.yml's big() prints
assert len(BIG_LINE) == 1 << 20
BIG_RANKS = {1, 2}  # rank 1 writes BIG_LINE on stdout, rank 2 on stderr
BIG_FIELD = re.compile(rb"[0-9]{7},")  # only the big lines hold one
SHORT_LINES = 20000
HEAD_LINES = [b"head begin", b"head end"]


def tail(rank, stream):
    return b"tail rank=%d stream=%s, no newline" % (rank, stream)


def worker_lines(rank):
    """Every line worker `rank` writes in edges.yml, both streams."""
    lines = [b"marker rank=%d stream=%s" % (rank, s) for s in STREAMS]
    if rank in BIG_RANKS:
        lines.append(BIG_LINE)
    else:
        lines += [b"short rank=%d stream=%s n=%d" % (rank, s, i) for s in STREAMS for i in range(SHORT_LINES)]
    return lines + [tail(rank, s) for s in STREAMS]


def read_lines(path):
    """The lines of a log, bytes without their newlines (an unterminated
    last line counts as a line)."""
    assert path.exists(), "%s was not fetched" % path
    lines = path.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def show(lines, limit=30):
    """Lines for an assertion message: the first `limit`, each cut short."""
    lines = list(lines)
    shown = [line[:120] + (b"... (%d bytes)" % len(line) if len(line) > 120 else b"") for line in lines[:limit]]
    more = ["... and %d more" % (len(lines) - limit)] if len(lines) > limit else []
    return "\n".join([repr(line) for line in shown] + more)


def same_lines(got, want):
    """'' when the two lists hold the same lines as often, else what differs."""
    got, want = collections.Counter(got), collections.Counter(want)
    extra, missing = got - want, want - got
    if not extra and not missing:
        return ""
    return "unexpected or duplicated:\n%s\nmissing:\n%s" % (
        show(extra.elements()), show(missing.elements()))


def big_line_problem(lines, ranks):
    """'' when the lines of a log holding the output of `ranks` have each of
    their 1 MiB lines as one line of exactly its bytes and no piece of one."""
    whole, want = lines.count(BIG_LINE), len(set(ranks) & BIG_RANKS)
    if whole != want:
        return "%d whole 1 MiB lines, expected %d" % (whole, want)
    pieces = [line for line in lines if line != BIG_LINE and BIG_FIELD.search(line)]
    return "pieces of a big line:\n%s" % show(pieces) if pieces else ""


def tail_problem(lines, ranks):
    """'' when the lines of a log holding the output of `ranks` have every
    unterminated last line (each worker's, both streams) as a line of its
    own with exactly its bytes."""
    holding = sorted(line for line in lines if b"no newline" in line)
    if holding == sorted(tail(r, s) for r in ranks for s in STREAMS):
        return ""
    return "lines holding an unterminated last line:\n%s" % show(holding)


def ends_with_newline(path):
    """Whether the log ends with a newline: the runtime ends a worker's
    unterminated last line with one, so the next writer starts a line of its
    own. An empty log raises (it should hold lines)."""
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read() == b"\n"
