# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.run_record: the run record's writer in
the run's own playbook (run-job.yml, the workflow role; the workflow
runner writes its jobs' states through plugin_utils/record_writer.py).
The record's logic is module_utils/run_record.py's; this plugin gives it
the playbook's process and command line, and starts a detached run
(plugin_utils/background_run.py)."""

from __future__ import annotations

import os
import sys

from ansible import constants as C
from ansible import context
from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr
from ansible_collections.fuzz.multinode.plugins.module_utils import run_recovery as recovery
from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import RUN_RECORD_ARGUMENT_SPEC
from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_entry
from ansible_collections.fuzz.multinode.plugins.plugin_utils import background_run
from ansible_collections.fuzz.multinode.plugins.plugin_utils.child_playbook import NotPassable
from ansible_collections.fuzz.multinode.plugins.plugin_utils.record_action import RecordAction

display = Display()


class ActionModule(RecordAction):
    ARGUMENT_SPEC = RUN_RECORD_ARGUMENT_SPEC
    REFUSALS = (rr.RecordError, NotPassable)

    @staticmethod
    def os_error(args, exc):
        return "the run record of %s cannot be written: %s" % (args["run"], exc)

    def work(self, args):
        if args["event"] == "open":
            return self._open(args)
        self._write(args)
        return {}

    def _open(self, args):
        directory = rr.runs_dir(args["runs_dir"])
        playbook = [process_entry("playbook", os.getppid())]  # this worker's parent: ansible-playbook
        if args["resume"]:
            record = rr.find(directory, args["run"])
            skip = recovery.resume_plan(recovery.settle(record), args["jobs"])
            if not args["detach"]:
                recovery.resumed(record, skip, playbook, args["log_dir"])
            display.display("run %s resumed: %s" % (args["run"], "skipping %s, FINISHED in it" % ", ".join(skip)
                                                    if skip else "no job of it had FINISHED"))
        else:
            skip = []
        with open(args["fuzzfile"], "rb") as handle:
            fuzzfile = handle.read()
        workflow = os.path.splitext(os.path.basename(args["fuzzfile"]))[0]
        argv = [os.path.basename(sys.argv[0])] + sys.argv[1:]
        if args["detach"]:
            return self._detach(args, directory, fuzzfile, workflow, argv, skip)
        if not args["resume"]:
            record = rr.open_record(directory, args["run"], fuzzfile, argv, args["jobs"], workflow,
                                    args["log_dir"], playbook, fuzzfile_path=args["fuzzfile"])
        rr.scrub_runner_command(record)
        return {"changed": True, "record": record.path, "skip": skip}

    def _detach(self, args, directory, fuzzfile, workflow, argv, skip):
        extra = {"fuzz_multinode_detach": "false", "fuzz_multinode_detached_run": args["run"],
                 "fuzzfile": args["fuzzfile"], "log_dir": args["log_dir"]}
        if args["resume"]:
            record = rr.find(directory, args["run"])
            extra["resume"] = args["run"]
        else:
            record = rr.submitted(directory, args["run"], fuzzfile, argv, workflow, args["log_dir"],
                                  fuzzfile_path=args["fuzzfile"])
        pid = background_run.start(record.runner_dir, extra, context.CLIARGS, sys.argv[1:], C.HOST_KEY_CHECKING)
        if not args["resume"]:
            rr.take_over(record, [process_entry("runner", pid)])
        display.display("run %s %s in the background (ansible-runner, pid %d)\n  record: %s\n"
                        "  ansible-playbook fuzz.multinode.status -e run=%s\n"
                        "  ansible-playbook fuzz.multinode.logs -e run=%s -e follow=true\n"
                        "  ansible-playbook fuzz.multinode.cancel -e run=%s"
                        % (args["run"], "resumed" if args["resume"] else "submitted", pid, record.path,
                           args["run"], args["run"], args["run"]))
        return {"changed": True, "record": record.path, "skip": skip, "detached": True, "runner_pid": pid}

    def _write(self, args):
        if not args["record"]:
            return
        record = rr.Record(args["record"], args["run"])
        if args["event"] == "job_started":
            rr.job_started(record, args["job"], args["hosts"])
        elif args["event"] == "job_ended":
            duration = args["duration"]
            rr.job_ended(record, args["job"], args["status"] or "FAILED", args["why"],
                         float(duration) if duration not in (None, "", "-") else None, args["ranks"])
        else:
            rr.run_ended(record, rr.workflow_state(args["outcomes"], args["transfer_failures"]))
