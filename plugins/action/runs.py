# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.runs: what the collection's playbooks
runs, status, logs and cancel show of the run records on this controller
(module_utils/run_record.py, run_views.py), and cancel itself: SIGINT to
the run's ansible-playbook, as a terminal's Ctrl-C, so that it cancels its
jobs on every host and cleans up exactly as a foreground run does."""

from __future__ import annotations

import os
import signal
import socket
import time

from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr
from ansible_collections.fuzz.multinode.plugins.module_utils import run_recovery as recovery
from ansible_collections.fuzz.multinode.plugins.module_utils import run_report
from ansible_collections.fuzz.multinode.plugins.module_utils import run_views as views
from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import RUNS_ARGUMENT_SPEC
from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_alive
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import shown_on_terminal
from ansible_collections.fuzz.multinode.plugins.plugin_utils.record_action import RecordAction

display = Display()
# Seconds between looks at a followed log and at a run being canceled.
POLL = 0.5


class ActionModule(RecordAction):
    ARGUMENT_SPEC = RUNS_ARGUMENT_SPEC

    def work(self, args):
        directory = rr.runs_dir(args["runs_dir"])
        if args["command"] == "list":
            runs = views.list_runs(directory)
            display.display("\n".join(views.runs_lines(runs)))
            return {"runs": runs}
        if not args["run"]:
            raise rr.RecordError("which run? -e run=ID (`ansible-playbook fuzz.multinode.runs` lists them)")
        record = rr.find(directory, args["run"])
        state = recovery.settle(record)
        done = {}
        if args["command"] == "status":
            display.display("\n".join(views.status_lines(state) + self._page(state)))
        elif args["command"] == "logs":
            self._logs(record, state, args["job"], args["follow"])
        elif args["command"] == "cancel":
            state = self._cancel(record, state, args["wait"])
            done["changed"] = True
        return dict(done, state=state, record=record.path)

    @staticmethod
    def _page(state):
        """The run's page written anew from the state shown (a run that
        ended before pages existed gets one too): where it is, or why not."""
        where = rr.report_path(state)
        if where is None:
            return []
        try:
            return ["", "page: %s" % run_report.write_report(state, where)]
        except run_report.ReportError as exc:
            return ["", "page: not written: %s" % exc]

    def _logs(self, record, state, job, follow):
        """The job's log (every job's, in the run's order, without `job`) as
        the foreground run streamed it (`[job] line`); with `follow`, what
        comes next too, until the job has ended."""
        for name in views.logged_jobs(state, job):
            state = self._job_log(record, state, name, follow)

    def _job_log(self, record, state, name, follow):
        while follow and state["jobs"][name].get("state") == rr.WAITING:
            time.sleep(POLL)  # not started yet
            state = recovery.settle(record)
        path = views.job_log_path(state, name)
        prefix = "[%s] " % name
        offset, pending = 0, b""
        while True:
            ended = state["jobs"][name].get("state") not in (rr.WAITING, rr.RUNNING)
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except FileNotFoundError:
                data = b""
                if not follow or ended:
                    break  # a job not run, or refused by its nodes, has none
            offset += len(data)
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            if lines:
                display.display("\n".join(prefix + shown_on_terminal(line.decode(errors="replace"))
                                          for line in lines))
            if not follow or ended:
                break
            time.sleep(POLL)
            state = recovery.settle(record)
        if pending:
            display.display(prefix + shown_on_terminal(pending.decode(errors="replace")))
        return state

    def _cancel(self, record, state, wait):
        """Ask the run's playbook to stop as Ctrl-C would, and wait (up to
        `wait` seconds) until it has canceled its jobs and ended."""
        views.cancelable(state)
        by = "%s@%s" % (rr.user_name(), socket.gethostname())
        rr.request_cancel(record, by)
        deadline = time.monotonic() + wait
        # Submitted a moment ago: its background playbook may not have
        # taken the record yet (it will, within seconds).
        while not self._alive(state, "playbook") and self._alive(state, "runner") \
                and time.monotonic() < deadline:
            time.sleep(POLL)
            state = record.state()
        for entry in self._alive(state, "playbook") or self._alive(state, "runner"):
            self._interrupt(entry["pid"])
        display.display("run %s: canceling (SIGINT to its ansible-playbook, as Ctrl-C)" % state["run"])
        while time.monotonic() < deadline:
            state = recovery.settle(record)
            if state["state"] != rr.RUNNING and not self._alive(state, "playbook") and not self._alive(state, "runner"):
                break
            time.sleep(POLL)
        else:
            raise rr.RecordError("run %s: still stopping after %d s; `ansible-playbook fuzz.multinode.status -e "
                                 "run=%s` says when it has" % (state["run"], wait, state["run"]))
        display.display("\n".join(views.status_lines(state)))
        return state

    @staticmethod
    def _alive(state, role):
        return [entry for entry in state.get("owner") or [] if entry.get("role") == role and process_alive(entry)]

    @staticmethod
    def _interrupt(pid):
        """SIGINT to the playbook's process group when it leads one (a
        terminal's Ctrl-C: ansible-playbook and its workers); else to it."""
        try:
            os.killpg(pid, signal.SIGINT) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
