"""Verifier of the streams scenario: worker stdout and stderr on their way to
the logs, on a real 5-node container cluster (the head and four workers),
each job run through run-job.yml exactly as a user runs it.

Three jobs, each run once, on first use:
- streams-off and streams-on (tests/fuzzfiles/streams/edges.yml): the same
  script with forwarding off and on: a marker line per worker and stream, a
  1 MiB line (rank 1 on stdout, rank 2 on stderr) while ranks 3 and 4 write
  20000 short lines to both streams, and an unterminated last line on both
  streams of every worker;
- streams-load (tests/fuzzfiles/streams/load.yml): four workers each write
  over 25 MB of numbered lines to stdout and as much to stderr at once,
  forwarded into the job log (200 MB).

What "byte-exact" means for an unterminated last line: the logs are line
records that several writers append to (the job log: rank 0 and every
forwarding wrapper; a rank log: the rank's stdout and stderr), so the
runtime writes a worker's unterminated last line, at the end of its stream,
with its bytes unchanged and a newline after them. The line arrives whole
and the next line in the log starts a line of its own instead of being glued
to it. Every log therefore ends with a newline.

The load logs are about 200 MB: they are read line by line, never held
whole, and a sequence number's arrivals are counted in a bytearray.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from stream_checks import (  # noqa: E402  (the edges jobs' lines and checks, shared with tests/local)
    HEAD_LINES,
    STREAMS,
    WORKERS,
    big_line_problem,
    ends_with_newline,
    read_lines,
    same_lines,
    show,
    tail_problem,
    worker_lines,
)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "streams"
FUZZFILE_OF = {"streams-off": "edges.yml", "streams-on": "edges.yml", "streams-load": "load.yml"}

# What ssh's client says on its stderr in one situation or another; none of
# it may reach a log (the lower-case ones are prefixes of its error lines).
SSH_CHATTER = [b"Warning: Permanently added", b"Connection to ", b"Pseudo-terminal",
               b"Shared connection", b"Session open refused", b"mux_client", b"ControlSocket",
               b"Connection closed", b"kex_exchange_identification", b"Authenticated to",
               b"ssh: ", b"debug1:"]


# -- running jobs -----------------------------------------------------------------

class Run:
    """One finished run of run-job.yml and the logs it fetched."""

    def __init__(self, job, logs, rc, output, seconds):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds

    @property
    def job_log_path(self):
        return self.logs / (self.job + ".log")

    def rank_log_path(self, rank):
        return self.logs / self.job / ("rank-%d.log" % rank)

    def log_paths(self):
        return [self.job_log_path] + [self.rank_log_path(r) for r in WORKERS]

    def __repr__(self):  # shown by pytest when an assertion fails
        failed = self.output.find("fatal: ")
        return "Run(%s, rc=%s, %.1f s)\n--- output ---\n%s" % (
            self.job, self.rc, self.seconds,
            self.output[failed:failed + 4000] if failed >= 0 else self.output[-2000:])


class Jobs:
    def __init__(self, root):
        self.root, self.runs = root, {}

    def get(self, job):
        if job not in self.runs:
            logs = self.root / job
            logs.mkdir()
            self.runs[job] = Run(job, logs, *user_playbook.run_job(FUZZFILES / FUZZFILE_OF[job], logs, job))
            print("%s: run-job.yml took %.1f s" % (job, self.runs[job].seconds))
        run = self.runs[job]
        assert run.rc == 0, run
        return run


@pytest.fixture(scope="session")
def jobs():
    """Logs go to the scenario's ephemeral directory (pruned by Molecule after
    destroy), not pytest's temporary directories: those are shared by every
    pytest run of the user, which deletes all but the newest three."""
    root = EPHEMERAL / "streams-logs"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    return Jobs(root)


# -- the edges jobs: forwarding off and on, a 1 MiB line, unterminated lines --------

@pytest.fixture(params=["streams-off", "streams-on"])
def edges(request, jobs):
    return jobs.get(request.param)


def test_forwarding_off_keeps_worker_output_out_of_the_job_log(jobs):
    """Without MULTINODE_WRAPPER_FORWARD_STREAMS=1 the job log holds the
    head's output only."""
    run = jobs.get("streams-off")
    assert read_lines(run.job_log_path) == HEAD_LINES


def test_forwarding_on_puts_worker_output_in_the_job_log(jobs):
    """With forwarding, every line of every worker (both streams) is in the
    job log exactly once, between the head's lines before and after it."""
    run = jobs.get("streams-on")
    lines = read_lines(run.job_log_path)
    want = HEAD_LINES + [line for rank in WORKERS for line in worker_lines(rank)]
    problem = same_lines(lines, want)
    assert not problem, problem
    assert (lines[0], lines[-1]) == tuple(HEAD_LINES)


@pytest.mark.parametrize("rank", WORKERS)
def test_worker_output_is_in_its_rank_log(edges, rank):
    """With forwarding off or on, a worker's rank log holds everything it
    wrote to stdout and stderr, exactly once, and nothing else."""
    problem = same_lines(read_lines(edges.rank_log_path(rank)), worker_lines(rank))
    assert not problem, problem


def logs_of(run):
    """(what, path, ranks whose output it holds) of every log of an edges job."""
    found = [("rank-%d.log" % r, run.rank_log_path(r), [r]) for r in WORKERS]
    if run.job == "streams-on":
        found.insert(0, ("job log", run.job_log_path, list(WORKERS)))
    return found


def test_a_1_MiB_line_arrives_byte_exact(edges):
    """Rank 1's 1 MiB stdout line and rank 2's 1 MiB stderr line are each one
    line of exactly those bytes, in the job log (forwarding on) and in the
    rank logs."""
    for what, path, ranks in logs_of(edges):
        problem = big_line_problem(read_lines(path), ranks)
        assert not problem, "%s: %s" % (what, problem)


def test_unterminated_last_lines_arrive_whole(edges):
    """A worker's last output without a newline, on stdout and on stderr,
    is a line of its own with exactly its bytes, terminated by a newline,
    never glued to the line that follows it in the log."""
    for what, path, ranks in logs_of(edges):
        problem = tail_problem(read_lines(path), ranks)
        assert not problem, "%s: %s" % (what, problem)
        assert ends_with_newline(path), "%s does not end with a newline" % what


# -- the load job: 4 workers x 2 streams x 25 MB at once ----------------------------

LOAD = yaml.safe_load((FUZZFILES / "load.yml").read_text())["jobs"]["streams-load"]
LOAD_LINES = int(dict(item.split("=", 1) for item in LOAD["env"])["LOAD_LINES"])
LETTERS = b"abcdefghijklmnopqrstuvwxyz"
PADS = [bytes([LETTERS[n % 26]]) * (n * 50 % 61) for n in range(LOAD_LINES + 1)]
PREFIX = len(b"load r=1 s=out n=")  # then 7 digits, a space, the pad, " end\n"


def load_line(rank, stream, n):
    """The exact bytes load.yml's awk writes as line n of (rank, stream)."""
    return b"load r=%d s=%s n=%07d %s end\n" % (rank, stream, n, PADS[n])


def test_load_writes_over_25_MB_per_stream():
    """The load job writes what the issue asks for: 25 MB per stream."""
    assert sum(len(load_line(1, b"out", n)) for n in range(1, LOAD_LINES + 1)) > 25_000_000


class LoadScan:
    """Reads a load log once, line by line: counts every well-formed load
    line per (rank, stream, n), notes sequence numbers arriving out of order
    within their stream, keeps the first malformed lines and every line that
    is not a load line."""

    KEEP = 20

    def __init__(self, path, ranks):
        self.seen = {(r, s): bytearray(LOAD_LINES + 1) for r in ranks for s in STREAMS}
        self.last = dict.fromkeys(self.seen, 0)
        self.malformed, self.malformed_count = [], 0
        self.others, self.others_count = [], 0
        self.out_of_order = 0
        # Per line: the stream from the fixed-width prefix, n from the next 7
        # bytes, then the rest must be exactly that line's rest.
        streams = {b"load r=%d s=%s n=" % key: (self.seen[key], key) for key in self.seen}
        ends = [b" %s end\n" % pad for pad in PADS]
        last = self.last
        with open(path, "rb") as handle:
            for line in handle:
                found = streams.get(line[:PREFIX])
                if found is None:
                    self.others_count += 1
                    if len(self.others) < self.KEEP:
                        self.others.append(line)
                    continue
                counts, key = found
                digits = line[PREFIX:PREFIX + 7]
                n = int(digits) if digits.isdigit() else 0
                if 1 <= n <= LOAD_LINES and line[PREFIX + 7:] == ends[n]:
                    if counts[n] < 255:
                        counts[n] += 1
                    if n <= last[key]:
                        self.out_of_order += 1
                    last[key] = n
                else:
                    self.malformed_count += 1
                    if len(self.malformed) < self.KEEP:
                        self.malformed.append(line)

    def missing(self):
        """{(rank, stream): how many sequence numbers never arrived}"""
        return {key: counts.count(0) - 1 for key, counts in self.seen.items() if counts.count(0) > 1}

    def duplicated(self):
        """{(rank, stream): how many sequence numbers arrived more than once}"""
        found = {key: LOAD_LINES - counts.count(0, 1) - counts.count(1, 1) for key, counts in self.seen.items()}
        return {key: count for key, count in found.items() if count}


@pytest.fixture(scope="module")
def load(jobs):
    return jobs.get("streams-load")


@pytest.fixture(scope="module")
def load_job_log(load):
    return LoadScan(load.job_log_path, WORKERS)


def test_load_arrives_complete_in_the_job_log(load, load_job_log):
    """Every (rank, stream, n) of the 200 MB is in the job log exactly once,
    each stream's lines in the order they were written."""
    scan = load_job_log
    assert (scan.missing(), scan.duplicated()) == ({}, {})
    assert scan.out_of_order == 0


def test_load_has_no_torn_or_merged_line_in_the_job_log(load_job_log):
    """Every line is a whole load line or one of the head's two lines, in
    their place: nothing torn, merged, or from anywhere else."""
    scan = load_job_log
    assert scan.malformed_count == 0, show(scan.malformed)
    assert (scan.others_count, scan.others) == (2, [b"load begin\n", b"load end\n"]), show(scan.others)


@pytest.mark.parametrize("rank", WORKERS)
def test_load_rank_logs_hold_the_same_lines(load, rank):
    """A worker's rank log holds its own 2 x 25 MB exactly once, whole, in
    order, and nothing else."""
    scan = LoadScan(load.rank_log_path(rank), [rank])
    assert (scan.missing(), scan.duplicated()) == ({}, {})
    assert scan.out_of_order == 0
    assert (scan.malformed_count, scan.others_count) == (0, 0), show(scan.malformed + scan.others)


# -- every log of every job ------------------------------------------------------------

@pytest.mark.parametrize("job", list(FUZZFILE_OF))
def test_no_carriage_return_or_ssh_chatter_in_any_log(jobs, job):
    """No \\r is injected (no pseudo-terminal) and nothing ssh's client says
    reaches the job log or a rank log."""
    overlap = max(len(word) for word in SSH_CHATTER + [b"\r"]) - 1
    for path in jobs.get(job).log_paths():
        assert path.exists(), "%s was not fetched" % path
        with open(path, "rb") as handle:
            before = b""
            while True:
                chunk = handle.read(1 << 20)
                if not chunk:
                    break
                window = before + chunk
                found = [word for word in SSH_CHATTER if word in window]
                assert not found, "%s: %s" % (path, found)
                assert b"\r" not in chunk, path
                before = window[-overlap:]
