"""Local mode, worker streams (the `quoting` share of conftest.py's
finishing workflow also holds molecule/streams' edges jobs, 5 ranks): with
MULTINODE_WRAPPER_FORWARD_STREAMS=1 every line a worker writes to stdout or
stderr reaches the job log exactly once, whole; without it, only the
worker's rank log; the rank log always. In local mode the lines travel
through the head's launch socket instead of ssh."""

import collections
import os
import re

import pytest

WORKERS = (1, 2, 3, 4)
STREAMS = (b"out", b"err")
BIG_LINE = b"".join(b"%07d," % i for i in range(131072))  # what edges.yml's big() prints
assert len(BIG_LINE) == 1 << 20
BIG_FIELD = re.compile(rb"[0-9]{7},")
SHORT_LINES = 20000
HEAD_LINES = [b"head begin", b"head end"]


def tail(rank, stream):
    return b"tail rank=%d stream=%s, no newline" % (rank, stream)


def worker_lines(rank):
    """Every line worker `rank` writes in edges.yml, both streams."""
    lines = [b"marker rank=%d stream=%s" % (rank, s) for s in STREAMS]
    if rank in (1, 2):
        lines.append(BIG_LINE)
    else:
        lines += [b"short rank=%d stream=%s n=%d" % (rank, s, i) for s in STREAMS for i in range(SHORT_LINES)]
    return lines + [tail(rank, s) for s in STREAMS]


def read_lines(path):
    assert path.exists(), "%s was not fetched" % path
    lines = path.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def same_lines(got, want):
    """'' when the two lists hold the same lines as often, else what differs."""
    got, want = collections.Counter(got), collections.Counter(want)
    extra, missing = list((got - want).elements()), list((want - got).elements())
    if not extra and not missing:
        return ""
    cut = [line[:120] for line in extra[:20]], [line[:120] for line in missing[:20]]
    return "%d unexpected or duplicated, e.g. %r\n%d missing, e.g. %r" % (len(extra), cut[0], len(missing), cut[1])


@pytest.fixture
def finished(quoting):
    assert quoting.rc == 0 and quoting.failed_jobs() == {}, quoting
    return quoting


def job_log(run, job):
    return run.logs / (job + ".log")


def rank_log(run, job, rank):
    return run.logs / job / ("rank-%d.log" % rank)


def test_forwarding_off_keeps_worker_output_out_of_the_job_log(finished):
    """The head's own lines only (each worker's are in its rank log: below)."""
    assert read_lines(job_log(finished, "streams-off")) == HEAD_LINES


def test_forwarding_on_puts_every_worker_line_in_the_job_log_once(finished):
    """Every line of every worker (both streams, 80000 short lines, two
    1 MiB lines, unterminated last lines) exactly once, between the head's
    lines before and after it."""
    lines = read_lines(job_log(finished, "streams-on"))
    problem = same_lines(lines, HEAD_LINES + [line for rank in WORKERS for line in worker_lines(rank)])
    assert not problem, problem
    assert (lines[0], lines[-1]) == tuple(HEAD_LINES)


@pytest.mark.parametrize("job", ["streams-off", "streams-on"])
def test_worker_output_is_in_its_rank_log_once(finished, job):
    for rank in WORKERS:
        problem = same_lines(read_lines(rank_log(finished, job, rank)), worker_lines(rank))
        assert not problem, "%s rank %d: %s" % (job, rank, problem)


@pytest.mark.parametrize("job", ["streams-off", "streams-on"])
def test_big_lines_and_unterminated_lines_arrive_whole(finished, job):
    """A 1 MiB line is one line of exactly its bytes, never in pieces; an
    unterminated last line is a line of its own, and every log ends with a
    newline."""
    logs = [(rank_log(finished, job, r), [r]) for r in WORKERS]
    if job == "streams-on":
        logs.append((job_log(finished, job), list(WORKERS)))
    for path, ranks in logs:
        lines = read_lines(path)
        assert lines.count(BIG_LINE) == len(set(ranks) & {1, 2}), path
        assert not [line for line in lines if line != BIG_LINE and BIG_FIELD.search(line)], path
        assert sorted(line for line in lines if b"no newline" in line) == sorted(
            tail(r, s) for r in ranks for s in STREAMS), path
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            assert handle.read() == b"\n", "%s does not end with a newline" % path


def test_no_carriage_return_or_transport_chatter_in_any_log(finished):
    for job in ("streams-off", "streams-on"):
        for path in [job_log(finished, job)] + [rank_log(finished, job, r) for r in WORKERS]:
            data = path.read_bytes()
            assert b"\r" not in data, path
            for word in (b"Traceback", b"fuzz.multinode: ", b"launch.sock", b"ssh: "):
                assert word not in data, (path, word)
