"""A run's report page (plugins/module_utils/run_report.py, run_graph.py,
run_timeline.py) from recorded runs (report_runs.py): what a user reads on
it, parsed as HTML and SVG (never compared as bytes): every job, the
graph's edges with their conditions and each node's state, the rank and
task rows, a service's phases, the reload while the run runs, relative
links to the logs, and no markup from the record reaching the page. The
graph is drawn by the real Graphviz `dot`; the page in a real browser is
test_run_report_browser.py."""

import os
import re
import stat
import xml.etree.ElementTree as ET
from urllib.parse import unquote, urlparse

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils import run_graph, run_report
from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import clean

from report_runs import EDGES, HOSTILE, HOSTILE_LOG, JOBS, Page, finished_run, running_run, write_logs

SVG = "{http://www.w3.org/2000/svg}"
NOW = 1796371300.0  # 2026-12-04T08:01:40Z, while running_run runs


def no_drawing(source):
    raise run_graph.DrawingError("no drawing in this test")


def svg_of(page, pattern):
    found = re.search(pattern, page, re.S)
    assert found, pattern
    return ET.fromstring(found.group(1))


def texts(element):
    return ["".join(text.itertext()) for text in element.iter(SVG + "text")]


def graph_of(page):
    """The drawn graph: {name: (state label, fill)} and {(from, to, condition)}."""
    root = svg_of(page, r'<div class="graph">(<svg.*?</svg>)</div>')
    names, nodes = {}, {}
    for group in root.iter(SVG + "g"):
        if group.get("class") == "node":
            label = texts(group)
            names[group.find(SVG + "title").text] = label[0].replace("service ", "")
            shape = next(shape for shape in group if shape.tag != SVG + "title" and shape.get("fill"))
            nodes[label[0].replace("service ", "")] = (label[1], shape.get("fill"))
    edges = set()
    for group in root.iter(SVG + "g"):
        if group.get("class") == "edge":
            source, target = group.find(SVG + "title").text.split("->")
            edges.add((names[source], names[target], texts(group)[0]))
    return nodes, edges


def rows_of(page):
    """The timeline's rows: (kind, label, [bar tooltips])."""
    root = svg_of(page, r'(<svg[^>]*class="timeline".*?</svg>)')
    return [(group.get("class").split()[1], "".join(group.find(SVG + "text").itertext()),
             [rect.find(SVG + "title").text for rect in group.iter(SVG + "rect")])
            for group in root.iter(SVG + "g") if "row" in (group.get("class") or "").split()]


@pytest.fixture
def page(tmp_path):
    state = finished_run(str(tmp_path))
    write_logs(state)
    return run_report.render(state, run_graph.dot_svg, exists=os.path.exists)


def test_every_job_has_its_section_graph_node_and_timeline_row(page):
    parsed = Page(page)
    headings = [attrs for attrs in parsed.all("section") if "job" in (attrs.get("class") or "")]
    assert len(headings) == len(JOBS)
    nodes, _unused = graph_of(page)
    assert set(nodes) == set(JOBS)
    job_rows = [label.split(":")[0].replace("service ", "") for kind, label, bars in rows_of(page) if kind == "job"]
    assert job_rows == ["prepare", "db", "simulate", "sweep", "collect"]  # the workflow's order
    assert "Run 20261204T080102Z-a1b2c3" in parsed.text and "fan-out" in parsed.text


def test_the_graph_drawn_by_dot_has_every_dependency_with_its_condition(page):
    _unused, edges = graph_of(page)
    assert edges == EDGES


def test_each_node_says_its_state_and_duration_not_only_its_colour(page):
    nodes, _unused = graph_of(page)
    assert nodes == {"db": ("FINISHED 37.5 s", "#9fdc9a"), "prepare": ("FINISHED 6.2 s", "#9fdc9a"),
                     "simulate": ("FAILED 26.9 s", "#f29b9b"), "sweep": ("FINISHED 20.4 s", "#9fdc9a"),
                     "collect": ("NOT_RUN", "#ffffff")}


def test_a_running_run_reloads_itself_and_shows_running_and_waiting_jobs(tmp_path):
    running = run_report.render(running_run(str(tmp_path)), run_graph.dot_svg, now=NOW)
    refresh = [attrs for attrs in Page(running).all("meta") if attrs.get("http-equiv") == "refresh"]
    assert refresh == [{"http-equiv": "refresh", "content": "5"}]
    nodes, _unused = graph_of(running)
    assert nodes["simulate"] == ("RUNNING 30.0 s", "#9cc8f5")  # from its start to now
    assert nodes["collect"] == ("WAITING", "#e4e4e4")
    assert ("rank", "rank 1 simulate-1 on node-2: running", ["rank 1 simulate-1 on node-2: running"]) \
        in rows_of(running)
    ended = run_report.render(finished_run(str(tmp_path)), no_drawing)
    assert not [attrs for attrs in Page(ended).all("meta") if attrs.get("http-equiv") == "refresh"]


def test_a_multinode_job_has_a_row_per_rank_with_host_inventory_host_and_exit_status(page):
    rows = [(label, bars) for kind, label, bars in rows_of(page) if kind == "rank"]
    assert ("rank 0 simulate-0 on node-1: exit 0 25.6 s", ["rank 0 simulate-0 on node-1: exit 0 25.6 s"]) in rows
    assert ("rank 1 simulate-1 on node-2: exit 3 18.6 s", ["rank 1 simulate-1 on node-2: exit 3 18.6 s"]) in rows
    table = re.search(r"<h3>simulate .*?</section>", page, re.S).group(0)
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r'<tr class="rank">(.*?)</tr>', table)]
    assert [cell[:5] for cell in cells] == [["0", "simulate-0", "node-1", "exit 0", "25.6 s"],
                                            ["1", "simulate-1", "node-2", "exit 3", "18.6 s"]]


def test_a_task_array_has_a_row_per_task(page):
    rows = [label for kind, label, bars in rows_of(page) if kind == "task"]
    assert [row.split(":")[0] for row in rows] == ["task %d sweep-%d on node-%d" % (index, index, 1 + (index - 1) % 2)
                                                   for index in range(1, 5)]
    assert all(": exit 0" in row for row in rows)


def test_a_service_row_shows_it_starting_ready_and_stopping(page):
    (label, bars), = [(label, bars) for kind, label, bars in rows_of(page) if label.startswith("service db")]
    assert label == "service db: FINISHED 37.5 s, ready +4.0 s, stopping +36.0 s"
    assert bars == ["starting 4.0 s", "ready, serving 32.0 s", "stopping 2.0 s"]


def test_each_job_shows_its_failure_message_hosts_and_logs_as_relative_links(tmp_path, page):
    parsed = Page(page)
    assert HOSTILE.replace("\x1b", "\\x1b") in parsed.text  # the message, as text
    assert "node-1, node-2" in parsed.text
    links = [attrs["href"] for attrs in parsed.all("a")]
    for href in links:
        assert not urlparse(href).scheme and not href.startswith("/") and ".." not in href.split("/")
        assert os.path.isfile(os.path.join(str(tmp_path), *unquote(href).split("/"))), href
    expected = {"prepare.log", "db.log", "simulate.log", "sweep.log", "simulate/" + HOSTILE_LOG}
    expected |= {"sweep/task-%d.log" % index for index in range(1, 5)}
    assert {unquote(href) for href in links} == expected
    assert "simulate/rank-%3Cb%20onmouseover%3Dalert%283%29%3E1%20%26amp%3B%20%27q%27.log" in links


def test_a_log_outside_the_page_s_folder_or_not_written_is_named_not_linked(tmp_path):
    state = finished_run(str(tmp_path / "logs"))
    state["jobs"]["prepare"]["log"] = "/elsewhere/prepare.log"
    parsed = Page(run_report.render(state, no_drawing, exists=lambda path: not path.endswith("sweep.log")))
    hrefs = [attrs["href"] for attrs in parsed.all("a")]
    assert not any(href.endswith("prepare.log") or href == "sweep.log" for href in hrefs)
    assert "/elsewhere/prepare.log (job log; outside this page's folder)" in parsed.text
    assert "sweep.log (job log; not written yet)" in parsed.text


def test_no_markup_from_the_record_reaches_the_page(tmp_path, page):
    state = finished_run(str(tmp_path))
    state["workflow"] = state["user"] = state["canceled_by"] = HOSTILE
    state["jobs"]["simulate"]["hosts"] = [HOSTILE]
    state["jobs"]["simulate"]["ranks"][1]["node"] = HOSTILE
    state["jobs"]["prepare"]["image"] = HOSTILE
    for drawn in (page, run_report.render(state, run_graph.dot_svg), run_report.render(state, no_drawing)):
        parsed = Page(drawn)
        tags = {tag for tag, attrs in parsed.elements}
        assert "script" not in tags and "img" not in tags and "b" not in tags
        assert tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "dl", "dt",
                        "dd", "span", "section", "div", "p", "pre", "a", "table", "tr", "th", "td", "ul", "li",
                        "footer", "svg", "g", "text", "polygon", "path", "ellipse", "line", "rect"}
        attributes = {name for tag, attrs in parsed.elements for name in attrs}
        assert not [name for name in attributes if name.startswith("on") or name in ("src", "style")]
        assert HOSTILE.replace("\x1b", "\\x1b") in parsed.text
        assert "\x1b" not in drawn
    for svg in re.findall(r"(<svg.*?</svg>)", run_report.render(state, run_graph.dot_svg), re.S):
        ET.fromstring(svg)  # well-formed: no text of the record broke out of it


def test_dot_shows_any_text_exactly_as_given():
    source = "digraph { n0 [label=%s]; }" % run_graph.dot_string(HOSTILE + "\nsecond line")
    svg = ET.fromstring(run_graph.vetted_svg(run_graph.dot_svg(source)))
    assert texts(svg) == [clean(HOSTILE), "second line"]


def test_without_dot_the_graph_is_a_list_of_edges_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot there
    parsed = Page(run_report.render(finished_run(str(tmp_path)), run_graph.dot_svg))
    assert "The graph is listed, not drawn: Graphviz's dot is not installed on this controller" in parsed.text
    for source, target, condition in EDGES:
        assert "%s \u2192 %s (when %s is %s)" % (source, target, source, condition) in parsed.text
    assert "simulate: FAILED 26.9 s" in parsed.text


def test_a_drawing_that_is_more_than_shapes_and_text_is_not_used(tmp_path):
    for drawing, why in (('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "script"),
                         ('<svg xmlns="http://www.w3.org/2000/svg"><g onload="alert(1)"/></svg>', "onload"),
                         ("<svg><text>unclosed", "no well-formed SVG")):
        parsed = Page(run_report.render(finished_run(str(tmp_path)), lambda source, drawing=drawing: drawing))
        assert "script" not in {tag for tag, attrs in parsed.elements}
        assert "The graph is listed, not drawn" in parsed.text and why in parsed.text


def test_a_run_whose_jobs_have_not_started_has_no_timeline_yet(tmp_path):
    state = running_run(str(tmp_path))
    for entry in state["jobs"].values():
        entry.update(state="WAITING", start=None, end=None, ranks=[], ready=None, stopping=None)
    parsed = Page(run_report.render(state, run_graph.dot_svg, now=NOW))
    assert "No job has started yet." in parsed.text


def test_write_report_writes_the_page_whole_and_private_from_a_record(tmp_path):
    record = tmp_path / "record"
    record.mkdir()
    state = finished_run(str(tmp_path / "logs"))
    (record / "state.json").write_text(__import__("json").dumps(state))
    out = tmp_path / "logs" / "report.html"
    assert run_report.write_report(str(record), str(out), draw_graph=no_drawing) == str(out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "simulate" in Page(out.read_text()).text
    assert sorted(os.listdir(out.parent)) == ["report.html"]  # no temporary left
    run_report.write_report(running_run(str(tmp_path / "logs")), str(out), draw_graph=no_drawing)
    assert 'http-equiv="refresh"' in out.read_text()


def test_write_report_says_why_a_record_cannot_be_used(tmp_path):
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(run_report.ReportError, match="is corrupt"):
        run_report.write_report(str(tmp_path), str(tmp_path / "report.html"))
    with pytest.raises(run_report.ReportError, match="cannot be read"):
        run_report.write_report(str(tmp_path / "nothing"), str(tmp_path / "report.html"))
    assert not (tmp_path / "report.html").exists()
