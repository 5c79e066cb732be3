# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""What the controller shows of a job: its log, live, while it runs
(LiveLog, used by the fuzz.multinode.launch_job action plugin), and a
summary table with a row per rank when it has ended (summary_lines, the
fuzz.multinode.job_summary filter)."""

from __future__ import annotations

import os
import re
import time

from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import format_duration

PROGRESS_EVERY = 30  # seconds without output before "[job] still running, ..."
# What a terminal would act on rather than show: C0 controls but the tab,
# DEL and C1 controls (ESC starts every escape sequence; U+009B is a CSI).
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def shown_on_terminal(text):
    """`text` with every control character written out (\\x1b), so that
    job output shown on the operator's terminal can neither move the cursor,
    retitle the window nor hide lines; the saved log keeps the bytes. A
    carriage return that ends the line (CRLF output) is only dropped."""
    if text.endswith("\r"):
        text = text[:-1]
    return _CONTROLS.sub(lambda found: "\\x%02x" % ord(found.group()), text)


class LiveLog:
    """The job log on its way to the controller, a piece per poll: appended
    to `path` as it arrives, and every complete line shown (through `show`)
    as `[job] line`. After `progress_every` seconds without a line shown,
    `tick` shows `[job] still running, ELAPSED`.

    `offset` is how much of the log the controller holds: the size of the
    file on disk, so a write cut short (by Ctrl-C) is asked for again, never
    appended twice."""

    def __init__(self, job, path, show, progress_every=PROGRESS_EVERY, clock=time.monotonic):
        self.job, self.path, self.show = job, path, show
        self.progress_every, self.clock = progress_every, clock
        self.started = self.last_shown = clock()
        self.pending = b""
        self.size = 0  # the log's size on the head, as last reported
        self.received = 0
        self.quiet = False  # nothing is shown any more (the play was interrupted)
        self.fd = None
        if path:
            directory = os.path.dirname(path)
            if directory:
                os.makedirs(directory, 0o700, exist_ok=True)
            # The playbook user's only: the job may have printed anything.
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            os.fchmod(self.fd, 0o600)

    @property
    def offset(self):
        if self.fd is not None:
            return os.fstat(self.fd).st_size
        return self.received

    @property
    def behind(self):
        """The head has more of the log than the controller."""
        return self.offset < self.size

    def add(self, data, size):
        """A piece of the log that starts at `offset`, and the log's size."""
        self.size = size
        if not data:
            return
        if self.fd is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        else:
            self.received += len(data)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        if lines:
            self._show(lines)

    def tick(self):
        """Show the elapsed time if nothing was shown for a while."""
        now = self.clock()
        if self.progress_every and now - self.last_shown >= self.progress_every:
            self._show([("still running, %s" % format_duration(now - self.started)).encode()])

    def finish(self):
        """The log is complete: show an unterminated last line, close the file."""
        if self.pending:
            self._show([self.pending])
            self.pending = b""
        self.close()

    def close(self):
        if self.fd is not None:
            self.received = self.offset
            os.close(self.fd)
            self.fd = None

    def _show(self, lines):
        self.last_shown = self.clock()
        if not self.quiet:
            prefix = "[%s] " % self.job
            self.show("\n".join(prefix + shown_on_terminal(line.decode(errors="replace")) for line in lines))


def _outcome(entry):
    if entry is None:
        return "-"
    if entry.get("state") == "exited":
        return str(entry.get("status"))
    return entry.get("state") or "-"


def summary_lines(result, spec, log_file, exists=os.path.exists):
    """A job's summary, as lines of text: its status, then a table with a row
    per rank (or task): rank, host name, inventory host, exit status
    (`killed`: still running when the job was torn down; `not started`),
    duration, and its log on the controller (`-` where there is none).

    `result` is the launch_job result (its `ranks` from the head's
    supervisor, if it ran), `spec` the job spec (its ranks, even those that
    never ran), `log_file` the job log's controller path; the per-rank logs
    are beside it in a directory named after the job."""
    job = spec["job"]
    status = result.get("status") or ("FAILED" if result.get("failed") else "UNKNOWN")
    # Why a job failed is the play's failure message (or the workflow's
    # outcome table); here it would only be wrapped and quoted.
    title = "job %s %s" % (job, status)
    if result.get("duration") is not None:
        title += " after %s" % format_duration(float(result["duration"]))
    if result.get("ran_in"):
        title += ", " + result["ran_in"]  # in its image, or on the bare host
    outcomes = {entry.get("rank"): entry for entry in result.get("ranks") or []}
    tasks = bool(spec.get("task_array"))
    logs = os.path.splitext(log_file)[0]
    rows = [("task" if tasks else "rank", "host name", "inventory host", "exit status", "duration", "log")]
    for rank in spec["ranks"]:
        entry = outcomes.get(rank["rank"])
        if rank["rank"] == 0 and not tasks:
            path = log_file  # rank 0's output is the job log
        else:
            # Named by the runtime (a rank that never ran there has none).
            path = os.path.join(logs, entry["log"]) if entry and entry.get("log") else ""
        duration = entry.get("duration") if entry else None
        rows.append((str(rank["task_id"] if tasks else rank["rank"]), rank["name"], rank["node"],
                     _outcome(entry), "-" if duration is None else format_duration(float(duration)),
                     path if path and exists(path) else "-"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return [title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                      for row in rows]
