# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The members of a workflow run, as the workflow runner
(plugins/action/workflow_jobs.py) sees them: a job's entry in the plan
(plan_entry, for workflow_schedule.Schedule), its ansible-playbook
(Member: its process group, its lines on the way to the screen, its
report file) and its outcome (outcome, reported: the row of the
workflow's outcome table)."""

from __future__ import annotations

import json
import os
import signal
import time

from ansible_collections.fuzz.multinode.plugins.module_utils import device_fit
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import shown_on_terminal
from ansible_collections.fuzz.multinode.plugins.plugin_utils.workflow_schedule import FINISHED


def utc_clock(when):
    return time.strftime("%H:%M:%S", time.gmtime(when)) if when else "-"


def plan_entry(job, node_devices, local, pinned):
    """A job's or service's entry in the plan (workflow_schedule.Schedule):
    it needs its nodes (a task array up to max_hosts, fewer when the play
    has fewer; local mode the one machine) of the hosts that can hold its
    devices (`hosts`: all of them for a job without devices)."""
    dependencies = job.get("depends_on") or []
    able, count, _unused = device_fit.placement(job, node_devices, local)
    entry = {"name": job["name"], "needs": count,
             "depends_on": [dep["name"] for dep in dependencies if dep.get("status", "FINISHED") != "RUNNING"],
             "running_deps": [dep["name"] for dep in dependencies if dep.get("status") == "RUNNING"],
             "pinned": pinned and bool(job.get("volumes")),
             "service": job.get("kind") == "service", "persist": bool(job.get("persist"))}
    if job.get("devices"):
        entry["hosts"] = able
    return entry


def outcome(name, status, message="", started=None, ended=None, duration=None,
            row_format="%s  %s  %s  %s  %s  %s  %s", waits_for="-"):
    """A job's entry in the workflow's outcomes, as roles/workflow/tasks/step.yml
    records it for a job run in the play."""
    seconds = "%.1f" % float(duration) if duration is not None else "-"
    details = "" if status == FINISHED else message
    return {"status": status, "message": message,
            "start": utc_clock(started), "end": utc_clock(ended), "seconds": seconds,
            "summary": name + " " + status + ("" if status == FINISHED else ": " + message),
            "row": (row_format % (name, status, utc_clock(started), utc_clock(ended), seconds, waits_for,
                                  details)).strip()}


def reported(name, report, returncode):
    """(status, message, duration) of a member that ended on its own, from
    its callback's report."""
    launch = report.get("launch") or {}
    if launch.get("status"):
        return launch["status"], launch.get("message") or launch.get("msg") or "", launch.get("duration")
    why = report.get("failure") or ("its ansible-playbook ended with status %s; see its lines above" % returncode)
    return "FAILED", "job %s did not run to the end: %s" % (name, why), None


class Member:
    """One job's ansible-playbook: its process (a process group of its
    own), its output on the way to the screen, its report file."""

    def __init__(self, name, hosts, process, report_path, ready_file=None, stop_file=None):
        self.name, self.hosts, self.process, self.report_path = name, hosts, process, report_path
        self.started = time.time()
        self.ended = None
        self.pending = b""
        self.output_open = True
        self.exited_at = None
        self.stopped = None  # why it was told to stop (an interrupt)
        # A service's: the files its launch_job creates once it is ready, and
        # that this runner creates to stop it (Member.no_longer_needed).
        self.ready_file, self.stop_file = ready_file, stop_file
        self.no_longer_needed = None  # why this runner stopped the service

    def is_ready(self):
        return self.ready_file is not None and os.path.exists(self.ready_file)

    def stop_service(self, why):
        """Stop a service the workflow no longer needs, as its own launch_job
        stops a job (the supervisor cancels it; teardown and logs as usual)."""
        self.no_longer_needed = why
        # Whole or not at all: launch_job reads it as soon as it is there.
        with open(self.stop_file + ".new", "w") as handle:
            handle.write("the workflow: %s\n" % why)
        os.replace(self.stop_file + ".new", self.stop_file)

    @property
    def prefix(self):
        return "[%s] " % self.name

    def lines(self, data):
        """The complete lines of `data` (with what came before), each with
        the job's name in front; an unterminated last line waits for the
        rest (at the end of the output it is shown as it is)."""
        if data:
            parts = (self.pending + data).split(b"\n")
            self.pending = parts.pop()
        else:
            parts, self.pending = ([self.pending] if self.pending else []), b""
        shown = []
        for part in parts:
            line = shown_on_terminal(part.decode(errors="replace"))
            shown.append(line if line.startswith(self.prefix) else self.prefix + line)
        return shown

    def stop(self, signum=signal.SIGINT):
        """Tell the member to cancel its job, as a Ctrl-C would (the whole
        process group, as a terminal signals it)."""
        try:
            os.killpg(self.process.pid, signum)
        except OSError:
            pass

    def report(self):
        try:
            with open(self.report_path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}
