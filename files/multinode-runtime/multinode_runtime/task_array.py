"""Supervision of a task array from the head."""

import subprocess
import time

from . import registry
from .inputs import rank_environment
from .processes import POLL_SECONDS, exit_status, reap_children, spawn_as
from .supervisor import Supervisor
from .wire import write_all


class TaskArraySupervisor(Supervisor):
    """Runs a task array from the head. Its "ranks" are the tasks, each
    placed on a node; at most `concurrency` run at once, and the next task
    started is the next one of the least busy node. Every task, the ones on
    the head's own node included, is started the way a wrapper call is (an
    ssh launch: `multinode-runtime task JOB INDEX` as the job user), so it
    runs under its own host name <job>-<task id> with FB_TASK_ID set and
    writes task-<id>.log on its node. A failed task stops new tasks from
    starting; the job fails once every started task has ended."""

    PREFIX = "fuzz.multinode"

    def namespace_name(self):
        # The supervisor is not a task: its namespace is named after the job.
        return self.job

    def connect_nodes(self):
        nodes = {}
        for task in self.spec.ranks:
            nodes.setdefault(task.node, task)
        return nodes

    def say(self, log_fd, text):
        write_all(log_fd, ("%s: %s\n" % (self.PREFIX, text)).encode())

    def execute(self, log_fd):
        limit = self.spec.task_array.concurrency
        timeout_at = time.monotonic() + self.spec.timeout if self.spec.timeout else None
        env = rank_environment(self.spec, self.head, self.user)
        pending = list(self.spec.ranks)
        busy = {task.node: 0 for task in pending}
        running, failed = {}, []
        while running or (pending and not failed):
            self.check_stop(timeout_at)
            while pending and not failed and len(running) < limit:
                task = min(pending, key=lambda t: (busy[t.node], t.rank))
                pending.remove(task)
                busy[task.node] += 1
                proc = spawn_as(self.user, registry.runtime_command("task", self.job, str(task.rank)),
                                env, "/", subprocess.DEVNULL, log_fd, log_fd)
                # Keep the Popen: a dropped one is reaped by the subprocess
                # module behind our back, and its task's status lost.
                running[proc.pid] = (task, proc)
                self.say(log_fd, "task %s started on %s" % (task.name, task.node))
            for pid, status in reap_children().items():
                task, proc = running.pop(pid, (None, None))
                if task is None:
                    continue  # an orphan we reaped as subreaper
                proc.returncode = exit_status(status)
                busy[task.node] -= 1
                status = exit_status(status)
                if status == 0:
                    self.say(log_fd, "task %s finished" % task.name)
                else:
                    failed.append(task.summary(status))
                    self.say(log_fd, "task %s on %s exited with status %d" % (
                        task.name, task.node, status))
            time.sleep(POLL_SECONDS)
        total = len(self.spec.ranks)
        if not failed:
            return {"rc": 0, "status": "FINISHED",
                    "message": "job %s finished: %d tasks" % (self.job, total)}
        message = "task array %s: %d of %d tasks failed: %s" % (
            self.job, len(failed), total, ", ".join(
                "%s on %s (status %d)" % (f["name"], f["node"], f["status"]) for f in failed))
        if pending:
            message += "; %d not started" % len(pending)
        return {"rc": failed[0]["status"], "failed_rank": failed[0], "message": message}
