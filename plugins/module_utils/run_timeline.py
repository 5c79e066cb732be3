# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A run's timeline (a Gantt chart) for its report (run_report.py), as
inline SVG written here (a few rectangles and lines need no library): a
row per job or service, a bar from its start to its end (to now while it
runs) in its state's colour, a service's bar cut at `ready` and
`stopping`; under a job a row per rank (a task array: per task). Each row
says in words what its colour says: the job's state and duration, the
rank's host name, inventory host and exit status. All text is escaped."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of
from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import (
    clean,
    colour,
    esc,
    format_duration,
    job_duration,
    number,
    rank_outcome,
    rank_state,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.run_graph import ordered

WIDTH, LABEL_WIDTH, ROW, BAR, AXIS = 1000, 440, 20, 14, 26
CHART = WIDTH - LABEL_WIDTH - 20
LABEL_CHARS = 64  # longer labels are cut (the whole text is the row's tooltip)
TICKS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
# A service's phases: starting (to `ready`), serving, stopping.
STARTING, STOPPING = "#dde8f3", "#eeeeee"


def _times(state: Dict[str, Any], now: float) -> Optional[Tuple[float, float]]:
    """The chart's first and last second (None: nothing has started)."""
    jobs = [entry for entry in (state.get("jobs") or {}).values() if isinstance(entry, dict)]
    stamps = [state.get("started")] + [entry.get("start") for entry in jobs]
    stamps += [rank.get("start") for entry in jobs for rank in _ranks(entry)]
    starts = [seconds for seconds in map(seconds_of, stamps) if seconds is not None]
    if not any(entry.get("start") for entry in jobs) or not starts:
        return None
    ends = [seconds_of(stamp) for stamp in [state.get("ended")] + [entry.get("end") for entry in jobs]
            + [rank.get("end") for entry in jobs for rank in _ranks(entry)]]
    last = max([end for end in ends if end is not None] + ([now] if state.get("state") == "RUNNING" else []))
    first = min(starts)
    return first, max(last, first + 1.0)


def _ranks(entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [rank for rank in entry.get("ranks") or [] if isinstance(rank, dict)]


def _tick_text(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%s" % (seconds // 60, "%02ds" % (seconds % 60) if seconds % 60 else "")
    return "%dh%s" % (seconds // 3600, "%02dm" % (seconds // 60 % 60) if seconds // 60 % 60 else "")


class _Chart:
    def __init__(self, first: float, last: float):
        self.first, self.scale = first, CHART / (last - first)
        self.parts: List[str] = []
        self.y = AXIS

    def x(self, seconds: float) -> float:
        return LABEL_WIDTH + (seconds - self.first) * self.scale

    def axis(self, span: float) -> List[str]:
        """The time axis (drawn under the rows, once their height is known)."""
        step = next((tick for tick in TICKS if span / tick <= 8), TICKS[-1])
        return ['<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#cccccc"/>'
                '<text x="%.1f" y="14" text-anchor="middle">+%s</text>'
                % (self.x(self.first + index * step), AXIS - 6, self.x(self.first + index * step), self.y,
                   self.x(self.first + index * step), _tick_text(index * step))
                for index in range(int(span // step) + 1)]

    def row(self, label: str, kind: str, bars: List[Tuple[float, float, str, str]], indent: int = 0) -> None:
        """A row: its label (cut to LABEL_CHARS, whole in its tooltip) and its bars
        (start, end, fill, what the bar is, in words)."""
        shown = label if len(label) <= LABEL_CHARS - indent else label[:LABEL_CHARS - indent - 1] + "\u2026"
        self.parts.append('<g class="row %s"><title>%s</title><text x="%d" y="%d">%s</text>'
                          % (kind, esc(label), 4 + indent * 7, self.y + BAR - 2, esc(shown)))
        for start, end, fill, words in bars:
            left = self.x(start)
            self.parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#555555">'
                              '<title>%s</title></rect>'
                              % (left, self.y + 1, max(2.0, self.x(end) - left), BAR, fill, esc(words)))
        self.parts.append("</g>")
        self.y += ROW


def _job_bars(entry: Dict[str, Any], now: float, last: float) -> List[Tuple[float, float, str, str]]:
    start = seconds_of(entry.get("start"))
    if start is None:
        return []
    end = seconds_of(entry.get("end")) or (now if entry.get("state") == "RUNNING" else last)
    state = clean(entry.get("state"))
    if entry.get("kind") != "service":
        return [(start, end, colour(state), "%s %s" % (state, format_duration(end - start)))]
    ready, stopping = seconds_of(entry.get("ready")), seconds_of(entry.get("stopping"))
    serving_from = ready if ready is not None else end
    serving_to = stopping if stopping is not None else end
    bars = [(start, serving_from, STARTING, "starting %s" % format_duration(serving_from - start))]
    if ready is not None:
        bars.append((ready, serving_to, colour(state), "ready, serving %s" % format_duration(serving_to - ready)))
    if stopping is not None:
        bars.append((stopping, end, STOPPING, "stopping %s" % format_duration(end - stopping)))
    return bars


def job_label(name: str, entry: Dict[str, Any], now: float) -> str:
    duration = format_duration(job_duration(entry, now))
    label = "%s%s: %s%s" % ("service " if entry.get("kind") == "service" else "", clean(name),
                            clean(entry.get("state") or "-"), " " + duration if duration else "")
    if entry.get("kind") == "service":
        marks = [(word, seconds_of(entry.get(key)), seconds_of(entry.get("start")))
                 for word, key in (("ready", "ready"), ("stopping", "stopping"))]
        label += "".join(", %s +%s" % (word, format_duration(at - start))
                         for word, at, start in marks if at is not None and start is not None)
    return label


def rank_label(rank: Dict[str, Any], task_array: bool) -> str:
    """`rank 1 host-1 on node-2: exit 0 0.2 s` (a task: `task 3 ...`)."""
    which = "task %s" % clean(rank.get("task_id")) if task_array else "rank %s" % clean(rank.get("rank"))
    duration = format_duration(number(rank.get("duration")))
    return "%s %s on %s: %s%s" % (which, clean(rank.get("name") or "-"), clean(rank.get("node") or "-"),
                                  rank_outcome(rank), " " + duration if duration else "")


def timeline_svg(state: Dict[str, Any], now: float) -> str:
    """The timeline as an <svg> element, or a sentence when nothing has started."""
    times = _times(state, now)
    if times is None:
        return '<p class="empty">No job has started yet.</p>'
    first, last = times
    chart = _Chart(first, last)
    jobs = state.get("jobs") or {}
    for name in ordered(state):
        entry = jobs[name] if isinstance(jobs[name], dict) else {}
        chart.row(job_label(name, entry, now), "job", _job_bars(entry, now, last))
        for rank in _ranks(entry):
            start = seconds_of(rank.get("start"))
            end = seconds_of(rank.get("end")) or (now if entry.get("state") == "RUNNING" else last)
            label = rank_label(rank, bool(entry.get("task_array")))
            bars = [] if start is None else [(start, end, colour(rank_state(rank)), label)]
            chart.row(label, "task" if entry.get("task_array") else "rank", bars, indent=2)
    body = "".join(chart.axis(last - first) + chart.parts)
    return ('<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" '
            'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" role="img" '
            'aria-label="timeline of the run\'s jobs, services, ranks and tasks">%s</svg>'
            % (WIDTH, chart.y + 4, WIDTH, chart.y + 4, body))
