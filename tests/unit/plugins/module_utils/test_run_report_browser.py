"""A run's report in a real browser: Debian's chromium, headless, opens
report.html of a recorded run (report_runs.py: a fan-out, a failed job, a
service, a task array), its graph drawn by the real Graphviz `dot`, its
logs beside it. The page loads with a clean console (no error, no blocked
request: it needs nothing from outside), every job's name is in the DOM
the browser built, the failure message is text there, and a screenshot is
kept (under $FUZZ_MULTINODE_TEST_ARTIFACTS when set, else the test's
temporary directory). scripts/setup installs chromium and graphviz."""

import os
import re
import sys

from ansible_collections.fuzz.multinode.plugins.module_utils import run_graph, run_report

from report_runs import HOSTILE, JOBS, Page, finished_run, write_logs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                "molecule", "shared"))
import browser  # noqa: E402


def browse(tmp_path, page, *what):
    return browser.browse(tmp_path / "chromium-profile", page, *what)


def test_the_console_check_sees_an_error_on_a_page_that_has_one(tmp_path):
    """The check below would see a broken page (so a clean console means something)."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><p>x</p><script>nowhere();</script>")
    _unused, console = browse(tmp_path, str(broken), "--dump-dom")
    assert any("Uncaught ReferenceError: nowhere is not defined" in line for line in console)


def test_the_report_opens_in_chromium_with_a_clean_console_and_every_job(tmp_path):
    state = finished_run(str(tmp_path / "logs"))
    write_logs(state)
    report = run_report.write_report(state, str(tmp_path / "logs" / "report.html"), draw_graph=run_graph.dot_svg)
    dom, console = browse(tmp_path, report, "--dump-dom")
    assert console == []
    parsed = Page(dom)
    headings = [text.strip() for text in re.findall(r"<h3>(.*?)<span", dom)]
    assert headings == ["prepare", "service db", "simulate", "sweep", "collect"]
    graph = re.search(r'<div class="graph">(<svg.*?</svg>)</div>', dom, re.S).group(1)  # drawn by dot
    for name in JOBS:
        assert ">%s<" % name in graph or ">service %s<" % name in graph, name
    tags = {tag for tag, attrs in parsed.elements}
    assert "script" not in tags and "img" not in tags and "b" not in tags
    assert not [name for tag, attrs in parsed.elements for name in attrs if name.startswith("on")]
    assert HOSTILE.replace("\x1b", "\\x1b") in parsed.text  # the failure message, as text
    artifacts = os.environ.get("FUZZ_MULTINODE_TEST_ARTIFACTS") or str(tmp_path)
    os.makedirs(artifacts, exist_ok=True)
    screenshot = os.path.join(artifacts, "report.png")
    _unused, console = browse(tmp_path, report, "--screenshot=" + screenshot)
    assert console == []
    with open(screenshot, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(screenshot) > 20000  # a page, not a blank
