# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A run's workflow as a graph, for its report (run_report.py): jobs and
services are nodes, each filled with its state's colour and labelled with
its state and duration; `depends-on` entries are edges labelled with the
state they wait for (FINISHED, or RUNNING for a service). Graphviz's `dot`
draws it (`dot_svg`, the real drawer; the report takes any drawer, so its
tests can inject one); the SVG is used only if it holds nothing but
drawing. Where `dot` cannot draw, the page shows the edges as a list
(`edge_list`) and why.

Names and states reach `dot` as DOT strings (`dot_string`), never as DOT
syntax; node ids are n0, n1, ... so that no name is an id."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import (
    clean,
    colour,
    esc,
    format_duration,
    job_duration,
)

DOT_TIMEOUT = 30  # seconds; a workflow of a hundred jobs takes well under one
SVG = "{http://www.w3.org/2000/svg}"
# What dot's SVG may hold to be put in the page: shapes and text (no
# script, no foreignObject, no link), no event handler, no reference.
DRAWING = {"svg", "g", "title", "polygon", "polyline", "ellipse", "path", "text", "defs"}


class DrawingError(Exception):
    """The graph could not be drawn; the message says why, for the page."""


def dependencies(entry: Dict[str, Any]) -> List[Tuple[str, str]]:
    """A job's (dependency, state it waits for): the record's `depends_on`
    (names, FINISHED) and `running_deps` (names, RUNNING); an entry of the
    Fuzzfile's own form {name, status} is taken as well."""
    found = []
    for key, default in (("depends_on", "FINISHED"), ("running_deps", "RUNNING")):
        for dep in entry.get(key) or []:
            if isinstance(dep, dict):
                found.append((str(dep.get("name")), str(dep.get("status") or default)))
            else:
                found.append((str(dep), default))
    return found


def ordered(state: Dict[str, Any]) -> List[str]:
    """The run's jobs in the workflow's order, then any other, by name."""
    jobs: Dict[str, Any] = state["jobs"] if isinstance(state.get("jobs"), dict) else {}
    listed: List[Any] = state["order"] if isinstance(state.get("order"), list) else []
    order = [name for name in listed if isinstance(name, str) and name in jobs]
    return order + sorted(name for name in jobs if name not in order)


def edges(state: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(from, to, condition) for every dependency between the run's jobs."""
    jobs = state.get("jobs") or {}
    return [(dep, name, condition) for name in ordered(state)
            for dep, condition in dependencies(jobs[name] if isinstance(jobs[name], dict) else {})
            if dep in jobs]


def node_label(name: str, entry: Dict[str, Any], now: float) -> str:
    state = clean(entry.get("state") or "-")
    duration = format_duration(job_duration(entry, now))
    kind = "service " if entry.get("kind") == "service" else ""
    return "%s%s\n%s%s" % (kind, clean(name), state, " " + duration if duration else "")


def dot_string(text: str) -> str:
    """`text` as a quoted DOT string that Graphviz shows as is: backslashes
    and quotes escaped, `&` as an entity (dot reads entities in labels),
    newlines as dot's centred line breaks."""
    text = clean(text).replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    return '"%s"' % text.replace("\n", "\\n")


def dot_source(state: Dict[str, Any], now: float) -> str:
    jobs = state.get("jobs") or {}
    ids = {name: "n%d" % index for index, name in enumerate(ordered(state))}
    lines = ["digraph workflow {",
             '  graph [rankdir=LR, bgcolor="transparent", fontname="sans-serif", nodesep=0.3, ranksep=0.6];',
             '  node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=11];',
             '  edge [fontname="sans-serif", fontsize=9, color="#555555"];']
    for name, node in ids.items():
        entry = jobs[name] if isinstance(jobs[name], dict) else {}
        service = entry.get("kind") == "service"
        lines.append("  %s [label=%s, fillcolor=%s%s];" % (
            node, dot_string(node_label(name, entry, now)), dot_string(colour(entry.get("state"))),
            ", peripheries=2" if service else ""))
    for source, target, condition in edges(state):
        lines.append("  %s -> %s [label=%s];" % (ids[source], ids[target], dot_string(condition)))
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_svg(source: str, timeout: float = DOT_TIMEOUT) -> str:
    """Graphviz's drawing of `source` as SVG text; DrawingError says why not."""
    try:
        done = subprocess.run(["dot", "-Tsvg"], input=source.encode(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False, timeout=timeout)
    except FileNotFoundError:
        raise DrawingError("Graphviz's dot is not installed on this controller "
                           "(Debian, Ubuntu: apt-get install graphviz; Fedora: dnf install graphviz)") from None
    except subprocess.TimeoutExpired:
        raise DrawingError("Graphviz's dot took more than %d s" % timeout) from None
    except OSError as exc:
        raise DrawingError("Graphviz's dot could not run: %s" % exc) from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise DrawingError("Graphviz's dot failed (exit status %d)%s"
                           % (done.returncode, ": " + said[-1] if said else ""))
    return done.stdout.decode(errors="replace")


def vetted_svg(svg: str) -> str:
    """The <svg> element of a drawing, once checked to hold only drawing
    (DRAWING elements; no event handler, link or style attribute)."""
    start = svg.find("<svg")
    if start < 0:
        raise DrawingError("the drawing is no SVG")
    try:
        root = ET.fromstring(svg[start:])
    except ET.ParseError as exc:
        raise DrawingError("the drawing is no well-formed SVG: %s" % exc) from None
    for element in root.iter():
        tag = element.tag.replace(SVG, "") if isinstance(element.tag, str) else ""
        if tag not in DRAWING:
            raise DrawingError("the drawing holds a %s element" % clean(tag or "non-element"))
        for attribute in element.attrib:
            plain = attribute.rsplit("}", 1)[-1].lower()
            if plain.startswith("on") or plain in ("href", "style"):
                raise DrawingError("the drawing has a %s attribute" % clean(plain))
    return svg[start:].strip()


def edge_list(state: Dict[str, Any], now: float) -> str:
    """The graph as HTML, where it cannot be drawn: each job with its state,
    then each edge."""
    jobs = state.get("jobs") or {}
    items = ["<li>%s</li>" % esc(node_label(name, jobs[name] if isinstance(jobs[name], dict) else {}, now)
                                 .replace("\n", ": ")) for name in ordered(state)]
    links = ["<li>%s &rarr; %s <span class=\"condition\">(when %s is %s)</span></li>"
             % (esc(source), esc(target), esc(source), esc(condition)) for source, target, condition in edges(state)]
    return ('<ul class="nodes">%s</ul>\n<ul class="edges">%s</ul>'
            % ("".join(items), "".join(links) or "<li>no dependencies between the jobs</li>"))
