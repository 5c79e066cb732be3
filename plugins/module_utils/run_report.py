# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A run as a page: report.html, drawn from the run's record (state.json,
module_utils/run_record.py) and written beside the run's job logs, in its
log directory. One self-contained HTML file (no script, no request for
anything: it opens on an offline laptop, and its folder can be copied or
served as is):

- the run: id, workflow, state, times;
- the workflow's graph (run_graph.py: drawn by Graphviz's dot, or listed
  where dot is missing);
- the timeline of its jobs, services, ranks and tasks (run_timeline.py);
- per job: kind, image, nodes and hosts, times, the failure message, its
  ranks or tasks, and a link to each of its log files.

While the run is RUNNING the page reloads itself every 5 seconds: whoever
writes the record writes the page again.

Links to logs are relative to the page's folder (`report_dir`, the run's
log_dir unless told): the record names logs by absolute path; a log inside
that folder is linked by its path from there (each part percent-encoded);
a log outside it (another log_dir) is named, not linked, as a link to it
would break once the folder is copied.

Everything from the record is text to the page: escaped for HTML and SVG,
and passed to dot as DOT strings; the page's Content-Security-Policy
forbids scripts as well."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from typing import Any, Callable, Dict, Optional

from ansible_collections.fuzz.multinode.plugins.module_utils.private_files import write_private
from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of, utc
from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import (
    STATE_COLOURS,
    clean,
    esc,
    format_duration,
    job_duration,
    number,
    rank_outcome,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.run_graph import (
    DrawingError,
    dependencies,
    dot_source,
    dot_svg,
    edge_list,
    ordered,
    vetted_svg,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.run_timeline import timeline_svg

REPORT_FILE = "report.html"
STATE_FILE = "state.json"
REFRESH_SECONDS = 5
STYLE = """
body { font: 14px/1.4 sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
h1 { font-size: 1.4em; margin: 0 0 .3em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
h3 { font-size: 1em; margin: 0 0 .4em; }
.state { display: inline-block; padding: 0 .5em; border: 1px solid #555; border-radius: 3px;
         font-weight: bold; font-size: .9em; }
%s
.job { border: 1px solid #ccc; border-radius: 4px; padding: .7em 1em; margin: .8em 0; }
dl { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; margin: .3em 0; }
dt { color: #555; } dd { margin: 0; }
pre.message { background: #fff3f3; border-left: 4px solid #c33; padding: .4em .6em; white-space: pre-wrap;
              overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: .4em 0; } th, td { border: 1px solid #ccc; padding: .1em .5em; }
th { background: #f2f2f2; text-align: left; }
.graph svg, .timeline { max-width: 100%%; height: auto; }
.note { color: #7a4b00; }
footer { margin-top: 2em; color: #666; font-size: .85em; }
"""


class ReportError(Exception):
    """The report cannot be written; the message says why, for the user."""


def _state_class(state: Any) -> str:
    return "s-%s" % str(state).lower() if str(state) in STATE_COLOURS else "s-unknown"


def _state_badge(state: Any) -> str:
    return '<span class="state %s">%s</span>' % (_state_class(state), esc(state or "-"))


def link_path(path: Any, report_dir: Optional[str]) -> Optional[str]:
    """A log's link from the page's folder (parts percent-encoded), or None
    when it is not inside that folder."""
    if not path or not report_dir:
        return None
    report_dir = os.path.normpath(report_dir)
    full = os.path.normpath(os.path.join(report_dir, clean(path)))
    relative = os.path.relpath(full, report_dir)
    if relative in (os.curdir, os.pardir) or relative.startswith(os.pardir + os.sep):
        return None
    return "/".join(urllib.parse.quote(part) for part in relative.split(os.sep))


def _log_item(path: Any, what: str, report_dir: Optional[str], exists: Callable[[str], bool]) -> str:
    """A log file as a link (or its path, where it cannot be one), and `what` it is."""
    href = link_path(path, report_dir)
    said = esc(what + "; ") if what else ""
    if href is None:
        return "%s <span class=\"note\">(%soutside this page's folder)</span>" % (esc(path), said)
    if not exists(os.path.join(report_dir or "", *urllib.parse.unquote(href).split("/"))):
        return "%s <span class=\"note\">(%snot written yet)</span>" % (esc(os.path.basename(clean(path))), said)
    return '<a href="%s">%s</a>%s' % (esc(href), esc(href), " (%s)" % esc(what) if what else "")


def rank_log(entry: Dict[str, Any], rank: Dict[str, Any]) -> Optional[str]:
    """A rank's or task's log on the controller: rank 0 of a job's is the
    job log; the others are in the job's rank log folder."""
    if rank.get("rank") == 0 and not entry.get("task_array"):
        return clean(entry["log"]) if entry.get("log") else None
    if entry.get("rank_logs") and rank.get("log"):
        return os.path.join(clean(entry["rank_logs"]), clean(rank["log"]))
    return None


def _when(stamp: Any, start: Optional[float]) -> str:
    """A time of the record, and how long after the job's start it was."""
    seconds = seconds_of(stamp)
    if seconds is None:
        return "-"
    after = " (+%s)" % format_duration(seconds - start) if start is not None and seconds >= start else ""
    return "%s%s" % (esc(stamp), esc(after))


def _ranks_table(entry: Dict[str, Any], report_dir: Optional[str], exists: Callable[[str], bool]) -> str:
    ranks = [rank for rank in entry.get("ranks") or [] if isinstance(rank, dict)]
    if not ranks:
        return ""
    tasks = bool(entry.get("task_array"))
    rows = ["<tr><th>%s</th><th>host name</th><th>inventory host</th><th>exit status</th>"
            "<th>duration</th><th>log</th></tr>" % ("task" if tasks else "rank")]
    for rank in ranks:
        path = rank_log(entry, rank)
        log = _log_item(path, "", report_dir, exists) if path else "-"
        rows.append('<tr class="%s"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
            "task" if tasks else "rank", esc(rank.get("task_id") if tasks else rank.get("rank")),
            esc(rank.get("name") or "-"), esc(rank.get("node") or "-"), esc(rank_outcome(rank)),
            esc(format_duration(number(rank.get("duration"))) or "-"), log))
    return '<table class="ranks">%s</table>' % "".join(rows)


def job_section(index: int, name: str, entry: Dict[str, Any], now: float, report_dir: Optional[str],
                exists: Callable[[str], bool]) -> str:
    start = seconds_of(entry.get("start"))
    facts = [("kind", esc(entry.get("kind") or "job") + (" (task array)" if entry.get("task_array") else ""))]
    if entry.get("image"):
        facts.append(("image", esc(entry["image"])))
    facts.append(("nodes", esc(entry.get("nodes") if entry.get("nodes") is not None else "-")))
    facts.append(("hosts", esc(", ".join(clean(host) for host in entry.get("hosts") or []) or "-")))
    depends = ", ".join("%s (%s)" % (esc(dep), esc(condition)) for dep, condition in dependencies(entry))
    facts.append(("depends on", depends or "-"))
    facts.append(("started", _when(entry.get("start"), None)))
    if entry.get("kind") == "service":
        facts += [("ready", _when(entry.get("ready"), start)), ("stopping", _when(entry.get("stopping"), start))]
    facts.append(("ended", _when(entry.get("end"), start)))
    facts.append(("duration", esc(format_duration(job_duration(entry, now)) or "-")))
    parts = ['<section class="job" id="job-%d">' % index,
             "<h3>%s%s %s</h3>" % ("service " if entry.get("kind") == "service" else "", esc(name),
                                   _state_badge(entry.get("state"))),
             "<dl>%s</dl>" % "".join("<dt>%s</dt><dd>%s</dd>" % fact for fact in facts)]
    if entry.get("message") and entry.get("state") not in ("FINISHED", "SKIPPED"):
        parts.append('<pre class="message">%s</pre>' % esc(entry["message"]))
    if entry.get("log"):
        parts.append('<p class="logs">Job log: %s</p>' % _log_item(entry["log"], "job log", report_dir, exists))
    parts += [_ranks_table(entry, report_dir, exists), "</section>"]
    return "\n".join(part for part in parts if part)


def _graph(state: Dict[str, Any], draw_graph: Callable[[str], str], now: float) -> str:
    if not state.get("jobs"):
        return "<p>This run has no jobs.</p>"
    try:
        return '<div class="graph">%s</div>' % vetted_svg(draw_graph(dot_source(state, now)))
    except (DrawingError, OSError) as exc:
        return ('<p class="note">The graph is listed, not drawn: %s.</p>\n%s'
                % (esc(exc), edge_list(state, now)))


def _header(state: Dict[str, Any], now: float) -> str:
    started, ended = seconds_of(state.get("started")), seconds_of(state.get("ended"))
    end = ended if ended is not None else now if state.get("state") == "RUNNING" else None
    facts = [("workflow", esc(state.get("workflow") or "-")), ("state", _state_badge(state.get("state"))),
             ("started", esc(state.get("started") or "-")), ("ended", esc(state.get("ended") or "-")),
             ("duration", esc(format_duration(end - started) if started is not None and end is not None else "-"))]
    if state.get("user"):
        facts.append(("user", esc(state["user"])))
    if state.get("resumed"):
        facts.append(("resumed", esc(", ".join(clean(when) for when in state["resumed"]))))
    if state.get("canceled_by"):
        facts.append(("canceled by", esc(state["canceled_by"])))
    if state.get("message"):
        facts.append(("message", esc(state["message"])))
    if state.get("state") == "LOST":
        facts.append(("lost", "its ansible-playbook is gone; the times are when it was last heard of"))
    return "<h1>Run %s</h1>\n<dl class=\"run\">%s</dl>" % (
        esc(state.get("run") or "-"), "".join("<dt>%s</dt><dd>%s</dd>" % fact for fact in facts))


def render(state: Dict[str, Any], draw_graph: Callable[[str], str] = dot_svg, report_dir: Optional[str] = None,
           now: Optional[float] = None, exists: Callable[[str], bool] = lambda path: True) -> str:
    """The page of a run's record `state` (state.json's object). `draw_graph`
    turns DOT into SVG (dot_svg: Graphviz), `report_dir` is the page's
    folder (default: the run's log_dir), `now` the time of the drawing
    (epoch seconds), `exists` says whether a log file is there to link."""
    now = time.time() if now is None else now
    state = state if isinstance(state, dict) else {}
    report_dir = report_dir or (clean(state["log_dir"]) if state.get("log_dir") else None)
    jobs: Dict[str, Any] = state["jobs"] if isinstance(state.get("jobs"), dict) else {}
    state = dict(state, jobs={name: entry if isinstance(entry, dict) else {} for name, entry in jobs.items()})
    running = state.get("state") == "RUNNING"
    colours = "\n".join(".%s { background: %s; }" % (_state_class(name), fill) for name, fill in STATE_COLOURS.items())
    head = ['<!DOCTYPE html>', '<html lang="en">', "<head>", '<meta charset="utf-8">',
            # No script, no request: everything the page shows is in it.
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            'style-src \'unsafe-inline\'; img-src data:">']
    if running:
        head.append('<meta http-equiv="refresh" content="%d">' % REFRESH_SECONDS)
    head += ["<title>run %s: %s %s</title>" % (esc(state.get("run") or "-"), esc(state.get("workflow") or "-"),
                                               esc(state.get("state") or "-")),
             "<style>%s</style>" % (STYLE % colours), "</head>", "<body>", "<header>", _header(state, now),
             "</header>"]
    body = ['<section id="graph"><h2>Workflow graph</h2>', _graph(state, draw_graph, now), "</section>",
            '<section id="timeline"><h2>Timeline</h2>', timeline_svg(state, now), "</section>",
            '<section id="jobs"><h2>Jobs</h2>']
    body += [job_section(index, name, state["jobs"][name], now, report_dir, exists)
             for index, name in enumerate(ordered(state))]
    body += ["</section>", "<footer>Written %s from the run's record%s.</footer>" % (
        esc(utc(now)),
        "; this page reloads itself every %d s while the run is RUNNING" % REFRESH_SECONDS if running else ""),
        "</body>", "</html>"]
    return "\n".join(head + body) + "\n"


def read_state(record_dir: str) -> Dict[str, Any]:
    """A record's state.json, or ReportError saying why not."""
    path = os.path.join(record_dir, STATE_FILE)
    try:
        with open(path, "rb") as handle:
            state = json.loads(handle.read().decode())
    except OSError as exc:
        raise ReportError("the run record %s cannot be read: %s" % (path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise ReportError("the run record %s is corrupt: %s" % (path, exc)) from None
    if not isinstance(state, dict):
        raise ReportError("the run record %s is corrupt: no JSON object" % path)
    return state


def write_report(record_dir_or_state: Any, out_path: str, draw_graph: Callable[[str], str] = dot_svg,
                 now: Optional[float] = None) -> str:
    """Write the page of a run (its record's directory, or its state) at
    `out_path`, whole or not at all (a temporary name, then a rename),
    readable by its owner only; links are relative to `out_path`'s folder.
    Returns `out_path`; ReportError says why it could not be written."""
    state = read_state(record_dir_or_state) if isinstance(record_dir_or_state, str) else record_dir_or_state
    folder = os.path.dirname(os.path.abspath(out_path))
    page = render(state, draw_graph, report_dir=folder, now=now, exists=os.path.exists).encode()
    try:
        os.makedirs(folder, 0o700, exist_ok=True)
        write_private(out_path, page)
    except OSError as exc:
        raise ReportError("the run's report %s cannot be written: %s" % (out_path, exc.strerror or exc)) from None
    return out_path
