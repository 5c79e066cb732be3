"""A run you can look at (guide_running, "Looking at a run"): a real
local-mode workflow (a service, a fan-out with a failing 2-node job and a
task array, a job not run after them) leaves report.html beside its job
logs, written from its record as it went; Debian's chromium opens it with
a clean console, every job and service is in the page it built, with its
state; the job's output (which has markup in it) is not. The screenshot
is kept under $FUZZ_MULTINODE_TEST_ARTIFACTS (else the test's directory)."""

import os
import re
import shutil

import pytest

import browser
import local_jobs as lj

STATES = {"report-db": "FINISHED", "report-prepare": "FINISHED", "report-simulate": "FAILED",
          "report-sweep": "FINISHED", "report-collect": "NOT_RUN"}


@pytest.fixture(scope="module")
def report_run(workdir):
    directory = workdir / "report"
    directory.mkdir()
    logs = directory / "logs"
    fuzzfile = directory / "report.yml"  # its run's output is written beside it
    shutil.copy(lj.LOCAL_FUZZFILES / "report.yml", fuzzfile)
    run = lj.run_job(fuzzfile, logs)
    run.logs = logs
    return run


def test_the_run_leaves_its_page_beside_its_logs_private_and_finished(report_run):
    page = report_run.logs / "report.html"
    assert report_run.rc != 0, report_run.output[-4000:]
    assert oct(page.stat().st_mode & 0o777) == "0o600"
    text = page.read_text()
    assert 'http-equiv="refresh"' not in text  # the run is over: nothing more to show
    run = re.search(r"workflow run (\S+):", report_run.output).group(1)
    assert run in text


def test_the_terminals_outcome_table_shows_what_each_job_waited_for(report_run):
    """The end-of-run table in the workflow's order, its `after` column the
    workflow's graph (rows as Ansible shows them, wrapped: unwrapped here)."""
    table = report_run.output[report_run.output.rfind("Show the outcome of every job"):]
    table = table[:table.find("\nTASK ")]
    rows = [" ".join(item.split()).strip("'") for item in table.split("\n    - ")[2:]]
    after = {found.group(1): found.group(2) for found in
             (re.match(r"(report-\S+) [A-Z_]+ \S+ \S+ [-0-9.]+ (.*)", row) for row in rows) if found}
    expected = {"report-prepare": "-", "report-sweep": "report-prepare", "report-db": "-",
                "report-simulate": "report-prepare, report-db (RUNNING) rank 0",
                "report-collect": "report-simulate, report-sweep job report-collect not run"}
    assert sorted(after) == sorted(expected), rows
    for name, start in expected.items():
        assert after[name].startswith(start), (name, after[name])


def test_chromium_shows_every_job_with_its_state_and_a_clean_console(report_run, tmp_path):
    page = report_run.logs / "report.html"
    dom, console = browser.browse(tmp_path / "profile", page, "--dump-dom")
    assert console == [], console
    for name, state in STATES.items():
        section = re.search(r'<section[^>]*>\s*<h3>(?:service )?%s <.*?</section>' % re.escape(name), dom, re.S)
        assert section, (name, dom[-3000:])
        assert state in section.group(0), (name, section.group(0)[:2000])
    assert "<b>hard</b>" not in dom
    assert "<dt>image</dt><dd>docker://mirror.gcr.io/library/debian:bookworm</dd>" in dom
    artifacts = os.environ.get("FUZZ_MULTINODE_TEST_ARTIFACTS") or str(tmp_path)
    os.makedirs(artifacts, exist_ok=True)
    screenshot = os.path.join(artifacts, "report-local-run.png")
    _unused, console = browser.browse(tmp_path / "profile", page, "--screenshot=%s" % screenshot)
    assert console == [], console
    with open(screenshot, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    shutil.copy(page, os.path.join(artifacts, "report-local-run.html"))
