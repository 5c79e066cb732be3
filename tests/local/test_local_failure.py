"""Local mode, failure propagation and cleanup (the `failures` share of
conftest.py's failing workflow: molecule/failure's jobs; every job runs,
each fails or finishes on its own): a failing worker fails its job at once,
naming `rank N (<job>-N on localhost) exited with status S`, and stops the
head within 2 s; a failing head fails it; a wrapper call to an unknown host
fails it; and no process of any job survives, setsid'ed and SIGTERM-ignoring
ones included, no /etc/hosts block and no job directory remains."""

import re

import pytest

import local_jobs as lj

WORKER_FAILURE_STOPS_HEAD_WITHIN = 2  # seconds: worker exits non-zero -> head told to stop

# From exec_rankN, and from a bare wrapper call whose status the head
# never looks at.
WORKER_FAILURES = pytest.mark.parametrize("job", ["worker-fails-rankn", "worker-fails-bare"])

# What the workflow must report: every job that fails, with its message.
FAILED = {
    "worker-fails-rankn": "rank 1 (worker-fails-rankn-1 on localhost) exited with status 3",
    "worker-fails-bare": "rank 1 (worker-fails-bare-1 on localhost) exited with status 3",
    "head-fails": "rank 0 (head-fails-0 on localhost) exited with status 7",
    "wrapper-unknown-host": "a wrapper call on wrapper-unknown-host-0 failed: unknown host 'no-such-rank'",
    "term-ignored-fails": "rank 1 (term-ignored-fails-1 on localhost) exited with status 4",
}


def timestamp(text, label):
    found = re.findall(r"^%s (\d+\.\d+)$" % re.escape(label), text or "", re.M)
    assert len(found) == 1, "expected one line %r <time> in:\n%s" % (label, text)
    return float(found[0])


def test_the_playbook_fails_and_names_exactly_the_failed_jobs(failures):
    """ansible-playbook exits non-zero; the jobs that must fail failed with
    their messages, the other (term-ignored-ends) finished."""
    assert failures.rc != 0, failures
    assert set(failures.failed_jobs()) == set(FAILED), failures


@pytest.mark.parametrize("job", sorted(FAILED))
def test_failed_job_is_reported_naming_rank_host_name_and_status(failures, job):
    assert failures.failed_jobs().get(job, "").startswith(FAILED[job]), failures


@WORKER_FAILURES
def test_failing_worker_stops_the_head_long_before_its_work_ends(failures, job):
    """The head had 120 s of work left when the worker exited 3."""
    log = failures.log(job)
    assert "head starts" in log and "head after sleep" not in log, (log, failures)
    # The outcome table's row: job, status, start, end, seconds, details.
    job_seconds = re.search(r"^\s*- %s +FAILED +\S+ +\S+ +([0-9.]+) " % re.escape(job), failures.output, re.M)
    assert job_seconds and float(job_seconds.group(1)) < 60, failures


@WORKER_FAILURES
def test_failing_worker_stops_the_head_within_2_seconds(failures, job):
    worker_exit = timestamp(failures.rank_log(job, 1), "worker exits at")
    head_stopped = timestamp(failures.log(job), "head terminated at")
    print("%s: head got SIGTERM %.3f s after the worker exited" % (job, head_stopped - worker_exit))
    assert 0 <= head_stopped - worker_exit < WORKER_FAILURE_STOPS_HEAD_WITHIN, (worker_exit, head_stopped)


def test_wait_rank0_passes_the_head_status_through(failures):
    """head-fails: rank 0 exits 7 while the worker is still busy; nothing
    after wait_rank0 runs."""
    assert "head fails" in failures.log("head-fails"), failures
    assert "not reached" not in failures.log("head-fails"), failures
    assert "worker is busy" in (failures.rank_log("head-fails", 1) or ""), failures


def test_wrapper_call_to_an_unknown_host_stops_the_head(failures):
    log = failures.log("wrapper-unknown-host")
    assert "head starts" in log and "head after sleep" not in log, (log, failures)


def test_term_ignoring_processes_ran(failures):
    """They did run (and ignored SIGTERM; term-ignored-ends also left a
    setsid'ed sleep on each rank), so their absence afterwards means the
    runtime killed them."""
    for job in ("term-ignored-ends", "term-ignored-fails"):
        assert "%s-0 ignores TERM" % job in failures.log(job), failures
        assert "%s-1 ignores TERM" % job in (failures.rank_log(job, 1) or ""), failures


@pytest.mark.parametrize("job", ["worker-fails-rankn", "worker-fails-bare", "head-fails",
                                 "wrapper-unknown-host", "term-ignored-ends", "term-ignored-fails"])
def test_no_process_of_the_job_survives(failures, job):
    """Not the ranks' commands, nor what they left behind with setsid or
    while ignoring SIGTERM, nor the runtime's own processes."""
    assert failures.state["processes"][job] == [], failures.state["processes"][job]


def test_no_hosts_block_or_job_directory_is_left_and_the_host_name_is_unchanged(failures):
    assert failures.state["hosts"] == {}, failures.state
    assert failures.state["job_dirs"] == [], failures.state
    assert failures.state["hostname"] == failures.hostname_before
    assert failures.state == lj.cleaned(failures.state, failures.jobs), failures.state
