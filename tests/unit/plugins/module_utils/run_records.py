"""Run records for the record's tests (test_run_record.py,
test_run_recovery.py): a workflow of three jobs, prepare -> solve ->
report, and this process or a dead one as its owner."""

import os
import subprocess
import sys

from ansible_collections.fuzz.multinode.plugins.module_utils import run_record as rr
from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_entry

RUN = "20261204T080102Z-a1b2c3"


def job(name, depends=(), kind=None, **more):
    entry = {"name": name, "nodes": 2, "depends_on": [{"name": dep, "status": "FINISHED"} for dep in depends]}
    if kind:
        entry["kind"] = kind
    entry.update(more)
    return entry


JOBS = [job("prepare"), job("solve", ["prepare"]), job("report", ["solve"])]


def this_process():
    return [process_entry("playbook", os.getpid())]


def a_dead_process():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return [process_entry("playbook", child.pid)]


def new_record(tmp_path):
    fuzzfile = b"version: v4\njobs: {}\n"
    argv = ["ansible-playbook", "run-job.yml", "-e", "fuzzfile=wf.yml", "-e", "fuzz_multinode_secrets={\"t\": 1}"]
    return rr.open_record(str(tmp_path / "runs"), RUN, fuzzfile, argv, JOBS, "wf", str(tmp_path / "logs"),
                          this_process(), fuzzfile_path="/home/me/wf.yml")
