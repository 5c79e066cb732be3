"""One call on its target node: the command of a wrapper call (or a task of
a task array) runs in its rank's host name as the job user; its output goes
to the rank log and, when forwarding is on, back to the caller as frames;
stdin is the lifeline.

The launch server (launch.py) serves it for a request that came over ssh or
the local launch socket, or forks it for each call on the job's channel
(channel.py); the head's agent forks it for a call to a rank of its own
node (agent.py), and this node's transport in local mode (transport.py).
It knows nothing of how the request came: it is the bottom of those
layers.
"""

import os
import select

from . import registry
from .cgroups import place
from .errors import RuntimeFailure
from .execution import rank_sandbox, spawn_rank
from .inputs import job_command, job_environment, job_user
from .processes import (
    POLL_SECONDS,
    become_subreaper,
    enter_rank_namespace,
    exit_status,
    kill_job_processes,
    pids_in_namespaces,
    reap_children,
    release_namespace,
)
from .resources import bind_cpus
from .wire import (
    FRAME_ERROR,
    FRAME_EXIT,
    FRAME_STDERR,
    FRAME_STDOUT,
    LineWriter,
    read_chunk,
    send_frame,
    widen_pipe,
    write_all,
)


def serve_call(spec, node, request, out, user=None):
    """One call for a rank on this node: its frames on `out`, the last one
    its exit status; stdin is its lifeline."""
    try:
        if request.get("job") != spec.job:
            raise RuntimeFailure("a call of job %r on the channel of job %s" % (request.get("job"), spec.job))
        if not (request.get("task") is True or isinstance(request.get("command"), str)):
            raise RuntimeFailure("malformed launch request")
        check_request_run(spec, request, node)
        rank = spec.rank_numbered(request.get("rank"))
        if rank is None or rank.node != node:
            raise RuntimeFailure("rank %r of job %s does not run on node %s" % (
                request.get("rank"), spec.job, node))
        status = Launch(spec, rank, request, user).run()
    except RuntimeFailure as exc:
        send_frame(out, FRAME_ERROR, str(exc).encode())
        status = 255
    send_frame(out, FRAME_EXIT, str(status).encode())
    return 0


def check_request_run(spec, request, node):
    """Refuse a request of another run than the one holding the job here
    (the runtime's own requests name their run; one naming none is only
    checked as before runs had ids)."""
    if "run" in request and request["run"] != spec.run:
        raise RuntimeFailure("job %s on node %s belongs to run %s, not to run %s" % (
            spec.job, node, spec.run or "(no id)", request.get("run") or "(no id)"))


class Launch:
    """One wrapper call on its target node: the command runs in the rank's
    host name as the job user; its output goes to the rank log and, when
    forwarding is on, back to the wrapper; ssh's stdin is the lifeline."""

    def __init__(self, spec, rank, request, user=None):
        self.spec, self.rank, self.request = spec, rank, request
        self.user = user or job_user(spec)

    def run(self):
        job = self.spec.job
        namespace = enter_rank_namespace(job, self.rank.name)
        try:
            return self.run_in(namespace)
        finally:
            # Nothing of the call is left in its namespace (processes that
            # called setsid would be, for cleanup): unpin it now, so a job
            # making many wrapper calls holds no mount per call until cleanup.
            if not pids_in_namespaces({namespace}, {os.getpid()}, self.user):
                release_namespace(job, namespace)

    def command(self, env, in_image):
        if self.request.get("task"):
            if not self.rank.is_task:
                raise RuntimeFailure("%s is not a task of job %s" % (self.rank.name, self.spec.job))
            return job_command(self.spec.with_changes(argv=self.rank.argv,
                                                      secret_args=self.rank.secret_args or []), env,
                               "task %s" % self.rank.name, in_image)
        return ["/bin/sh", "-c", "--", self.request["command"]]

    def run_in(self, namespace):
        become_subreaper()
        bind_cpus(self.spec, self.rank)
        log_fd = os.open(registry.rank_log_path(self.spec.job, self.rank),
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o640)
        # This process, and so all the call starts, in the run's cgroups.
        for warning in place(self.spec, self.rank).join():
            write_all(log_fd, ("fuzz.multinode: warning: %s\n" % warning).encode())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        env = job_environment(self.spec, self.rank, self.user)
        sandbox = rank_sandbox(self.spec, self.rank)
        argv = self.command(env, sandbox.image is not None)
        try:
            child = spawn_rank(self.spec, self.rank, self.user, argv, env, sandbox, out_w, err_w)
        finally:
            os.close(out_w)
            os.close(err_w)
        forward = self.request.get("forward")
        for fd in (out_r, err_r, 1):  # output moves in large chunks
            widen_pipe(fd)
        logs = {out_r: (LineWriter(log_fd), FRAME_STDOUT), err_r: (LineWriter(log_fd), FRAME_STDERR)}
        open_fds = [out_r, err_r, 0]
        child_status = None
        while out_r in open_fds or err_r in open_fds:
            ready, _unused, _unused = select.select(open_fds, [], [], 0.5)
            for fd in ready:
                data = read_chunk(fd)
                if fd == 0:
                    if not data:  # ssh session gone: stop everything we started
                        kill_job_processes({namespace}, self.spec.kill_grace, self.user)
                        return 255
                    continue
                if not data:
                    open_fds.remove(fd)
                    logs[fd][0].flush()
                    continue
                logs[fd][0].feed(data)
                if forward:
                    send_frame(1, logs[fd][1], data)
            for pid, status in reap_children().items():
                if pid == child.pid:
                    child_status = exit_status(status)
        # Its output ended; wait for its exit (readable pidfd: not polled,
        # a fast call does not wait for a poll interval).
        exited = os.pidfd_open(child.pid) if child_status is None else None
        while child_status is None:
            if 0 in select.select([0, exited], [], [], POLL_SECONDS * 20)[0] and not os.read(0, 1 << 16):
                kill_job_processes({namespace}, self.spec.kill_grace, self.user)
                return 255
            for pid, status in reap_children().items():
                if pid == child.pid:
                    child_status = exit_status(status)
        if exited is not None:
            os.close(exited)
        child.returncode = child_status
        os.close(log_fd)
        return child_status
