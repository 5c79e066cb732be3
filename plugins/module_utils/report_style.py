# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""How a run's report (run_report.py) shows what its record holds: a
state's colour and words, a rank's outcome, times and durations, and text
made safe to put in a page. Shared by the page, its graph (run_graph.py)
and its timeline (run_timeline.py); durations by the controller's job
tables too (plugins/plugin_utils/job_report.py). Pure logic."""

from __future__ import annotations

import html
import re
from typing import Any, Dict, Optional

from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of

# Each state's fill; the page always writes the state's name beside it
# (colour is never the only sign). A job WAITING is pending.
STATE_COLOURS = {
    "WAITING": "#e4e4e4", "RUNNING": "#9cc8f5", "FINISHED": "#9fdc9a", "FAILED": "#f29b9b",
    "CANCELED": "#f5cf7f", "NOT_RUN": "#ffffff", "LOST": "#c8a4dc", "SKIPPED": "#cfe8cc",
    "TIMEOUT": "#f4b183",
}
UNKNOWN_COLOUR = "#ffffff"
# Characters a page or an SVG must not carry raw: C0 controls but tab and
# newline, DEL, C1 controls (XML refuses most of them; a terminal acts on them).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def colour(state: Optional[str]) -> str:
    return STATE_COLOURS.get(str(state), UNKNOWN_COLOUR)


def clean(value: Any) -> str:
    """Any value of the record as text, its control characters written out (\\x1b)."""
    return _CONTROLS.sub(lambda found: "\\x%02x" % ord(found.group()), "" if value is None else str(value))


def esc(value: Any) -> str:
    """Text for HTML or SVG: markup characters and quotes as entities."""
    return html.escape(clean(value), quote=True)


def format_duration(seconds: Optional[float]) -> str:
    """4.2 s, 1m30s, 2h03m04s (as the end-of-job table); '' for none."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "%.1f s" % seconds
    seconds = int(seconds)
    if seconds < 3600:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm%02ds" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


def number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def job_duration(entry: Dict[str, Any], now: float) -> Optional[float]:
    """A job's seconds: its recorded duration, else from its start to its end
    (to `now` while it runs)."""
    if number(entry.get("duration")) is not None:
        return number(entry.get("duration"))
    start = seconds_of(entry.get("start"))
    end = seconds_of(entry.get("end")) or (now if entry.get("state") == "RUNNING" else None)
    return None if start is None or end is None else max(0.0, end - start)


def rank_outcome(rank: Dict[str, Any]) -> str:
    """A rank's or task's outcome in words: `exit 0`, `killed`, `not started`,
    or `running` (it started and has no end yet)."""
    if rank.get("state") == "exited":
        return "exit %s" % clean(rank.get("status"))
    if rank.get("state"):
        return clean(rank.get("state"))
    return "running" if rank.get("start") and not rank.get("end") else "-"


def rank_state(rank: Dict[str, Any]) -> str:
    """The job state whose colour a rank's bar takes."""
    if rank.get("state") == "exited":
        return "FINISHED" if rank.get("status") == 0 else "FAILED"
    if rank.get("state") == "killed":
        return "CANCELED"
    if rank.get("state") == "not started":
        return "NOT_RUN"
    return "RUNNING" if rank.get("start") and not rank.get("end") else "WAITING"
