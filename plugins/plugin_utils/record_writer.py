# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The workflow runner's (plugins/action/workflow_jobs.py) writes to the
run record (module_utils/run_record.py): its jobs' and services' states as
they change. Best effort: a record that cannot be written is warned of
once, and never stops a run."""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr

display = Display()


class RecordWriter:
    def __init__(self, path, run):
        self.record = rr.Record(path, run) if path else None
        self.warned = False

    def _write(self, change, *args):
        if self.record is None:
            return
        try:
            change(self.record, *args)
        except (OSError, rr.RecordError) as exc:
            if not self.warned:
                display.warning("The run record %s cannot be written: %s" % (self.record.path, exc))
            self.warned = True
        if self.record.report_problem and not self.warned:
            display.warning(self.record.report_problem)
            self.warned = True

    def started(self, name, hosts):
        self._write(rr.job_started, name, hosts)

    def ended(self, name, outcome, ranks=None, duration=None):
        self._write(rr.job_ended, name, outcome["status"], outcome.get("message") or "", duration, ranks)

    def event(self, name, event):
        """A service's `ready` or `stopping`."""
        self._write(rr.job_event, name, event)

    def canceled(self, why):
        self._write(rr.run_ended, rr.CANCELED, why)
