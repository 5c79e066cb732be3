"""One run of run-job.yml on a whole workflow in the workflow scenario,
for its test modules: exit status, output, the logs it fetched, the job
user's processes on every node right after, and what the play reported
(the jobs it started, the outcome table, the failure)."""

import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from concurrency import outcome_table, started_on  # noqa: E402  (the workflow runner's lines, shared with tests/local)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "workflow"
NODES = ["fmn-workflow-node-1", "fmn-workflow-node-2", "fmn-workflow-node-3"]
NO_PROCESSES = {name: [] for name in NODES}


def docker(*args):
    return subprocess.run(["docker"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120, check=False)


def job_processes(node):
    """Processes of the job user on a node, zombies included."""
    out = docker("exec", node, "ps", "-e", "-o", "user=,pid=,stat=,args=").stdout
    return [line for line in out.splitlines() if line.split()[:1] == ["fuzz"]]


def processes_on_all_nodes():
    return {node: job_processes(node) for node in NODES}


class WorkflowRun:
    """One finished run of run-job.yml on a workflow: exit status, output,
    the logs it fetched and the job user's processes right after."""

    def __init__(self, fuzzfile, logs, job=None, args=()):
        """fuzzfile: a path, relative to tests/fuzzfiles/workflow; args:
        more ansible-playbook arguments (-e @FILE)."""
        self.logs = logs
        self.rc, self.output, self.seconds = user_playbook.run_job(FUZZFILES / fuzzfile, logs, job, args=args)
        (logs / "ansible-playbook.out").write_text(self.output)  # the whole output, for a look after a failure
        self.leftovers = processes_on_all_nodes()

    def log(self, job):
        return (self.logs / (job + ".log")).read_text()

    def started(self):
        """The jobs in the order the run started them: the workflow runner's
        `[job] started on hosts ...` lines, or (jobs one at a time in the
        play) the job role's task that starts each."""
        return [job for job, _unused in started_on(self.output)] or re.findall(
            r"^TASK \[fuzz.multinode.job : Run rank 0 on the head and supervise job ([-a-z0-9]+)\]", self.output, re.M)

    def hosts(self, job):
        """The hosts the workflow runner started a job on, rank 0's first."""
        return dict(started_on(self.output))[job]

    def outcome_rows(self):
        """The outcome table's rows: {job: status}."""
        return {job: row[0] for job, row in outcome_table(self.output).items()}

    def failure(self):
        marker = "TASK [fuzz.multinode.workflow : Report the workflow's result]"
        tail = self.output[self.output.rfind(marker):] if marker in self.output else ""
        found = re.search(r"^\[ERROR\]: Task failed: Action failed: (.*)$", tail, re.M)
        return found.group(1) if found else ""

    def __repr__(self):  # shown by pytest when an assertion fails
        return "WorkflowRun(rc=%s, %.1f s)\n--- output ---\n%s" % (self.rc, self.seconds, self.output[-8000:])
