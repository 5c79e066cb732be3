"""Local mode, worker streams (the `quoting` share of conftest.py's
finishing workflow also holds molecule/streams' edges jobs, 5 ranks): with
MULTINODE_WRAPPER_FORWARD_STREAMS=1 every line a worker writes to stdout or
stderr reaches the job log exactly once, whole; without it, only the
worker's rank log; the rank log always. In local mode the lines travel
through the head's launch socket instead of ssh."""

import sys

import pytest

import local_jobs as lj

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from stream_checks import (  # noqa: E402  (the edges jobs' lines and checks, shared with molecule/streams)
    HEAD_LINES,
    WORKERS,
    big_line_problem,
    ends_with_newline,
    read_lines,
    same_lines,
    tail_problem,
    worker_lines,
)


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
        for problem in (big_line_problem(lines, ranks), tail_problem(lines, ranks)):
            assert not problem, "%s: %s" % (path, problem)
        assert ends_with_newline(path), "%s does not end with a newline" % path


def test_no_carriage_return_or_transport_chatter_in_any_log(finished):
    for job in ("streams-off", "streams-on"):
        for path in [job_log(finished, job)] + [rank_log(finished, job, r) for r in WORKERS]:
            data = path.read_bytes()
            assert b"\r" not in data, path
            for word in (b"Traceback", b"fuzz.multinode: ", b"launch.sock", b"ssh: "):
                assert word not in data, (path, word)
