"""The wrapper client: MULTINODE_SSH_WRAPPER HOST CMD [ARGS...], run as the
job user inside a rank, and `task JOB INDEX`, the head's way of starting a
task of a task array. Each sends one launch request to the target rank's
node (transport.py) and relays the framed answer as whole lines.
"""

import json
import os
import select
import socket
import subprocess
import time

from . import registry
from .calls import record_call
from .errors import PROG, RuntimeFailure
from .processes import last_line
from .spec import load_spec
from .transport import transport_for
from .wire import (
    FRAME_ERROR,
    FRAME_EXIT,
    FRAME_STDERR,
    FRAME_STDOUT,
    FrameReader,
    LineWriter,
    read_chunk,
    widen_pipe,
    write_all,
)

# ssh's options (OpenSSH 9), so the wrapper takes ssh's whole argv syntax:
# MPICH Hydra calls `LAUNCHER -x HOST CMD...`, other launchers pass -q, -o ...
SSH_FLAGS = "46AaCfGgKkMNnqsTtVvXxYy"
SSH_OPTIONS_WITH_VALUE = "BbcDEeFIiJLlmOoPpQRSWw"


def current_job():
    """The job and rank this process belongs to, from its rank host name."""
    name = socket.gethostname()
    for job in registry.registered_jobs():
        if name.startswith(job + "-"):
            try:
                spec = load_spec(job)
            except (RuntimeFailure, OSError, ValueError):
                continue
            for rank in spec.ranks:
                if rank.name == name:
                    return spec, rank
    raise RuntimeFailure("not inside a fuzz.multinode job (host name %s)" % name)


def find_rank(spec, host):
    for key in ("name", "node", "address"):
        for rank in spec.ranks:
            if getattr(rank, key) == host:
                return rank
    raise RuntimeFailure("unknown host %r: job %s has ranks %s" % (
        host, spec.job, ", ".join(r.name for r in spec.ranks)))


def parse_ssh_argv(args):
    """(host, command words) from ssh-style arguments `[OPTIONS] HOST CMD...`.

    Options are accepted and not applied: the connection is always the
    cluster's own (its key, pinned host keys, no X11/agent forwarding)."""
    args = list(args)
    while args and args[0].startswith("-") and args[0] != "-":
        word = args.pop(0)
        if word == "--":
            break
        for i, letter in enumerate(word[1:], 1):
            if letter in SSH_OPTIONS_WITH_VALUE:
                if i == len(word) - 1:  # value is the next word: -o Foo=bar
                    if not args:
                        raise RuntimeFailure("option -%s needs a value" % letter)
                    args.pop(0)
                break  # value attached: -oFoo=bar
            if letter not in SSH_FLAGS:
                raise RuntimeFailure("unknown ssh option -%s" % letter)
    if len(args) < 2:
        raise RuntimeFailure("usage: %s [SSH OPTIONS] HOST COMMAND [ARGS...]" % PROG)
    return args[0], args[1:]


def wrapper(args):
    """One wrapper call; returns its exit status (the remote command's)."""
    spec, me = current_job()
    try:
        host, words = parse_ssh_argv(args)
        target = find_rank(spec, host)
    except RuntimeFailure as exc:
        # A call that cannot be made fails the job like a failing worker
        # command would; a launcher waiting for it (mpiexec) would hang.
        if me.rank == 0:
            report_failure(spec, me, 255, "a wrapper call on %s failed: %s" % (me.name, exc))
        raise
    request = {
        "job": spec.job,
        "run": spec.run,
        "rank": target.rank,
        "command": " ".join(words),  # ssh joins the words; sh -c splits
        "forward": os.environ.get("MULTINODE_WRAPPER_FORWARD_STREAMS") == "1",
    }
    status, reason, lost = call_rank(spec, target, request)
    if status != 0 and me.rank == 0:
        report_failure(spec, target, status, reason, lost)
    return status


def run_task(job, index):
    """`task JOB INDEX` (job user, started by the head's task-array
    supervisor): run task INDEX of JOB on its node, like a wrapper call."""
    spec = load_spec(job)
    task = spec.rank_numbered(index)
    if spec.task_array is None or task is None or not task.is_task:
        raise RuntimeFailure("job %s has no task %s" % (job, index))
    request = {"job": spec.job, "run": spec.run, "rank": task.rank, "task": True, "forward": False}
    return call_rank(spec, task, request)[0]


def call_rank(spec, target, request):
    """Send one launch request to the target rank's node and relay its
    output; returns (exit status, reason when it is not 0, lost: the node
    did not answer). Launcher errors and lost connections are also written
    to stderr. The call is recorded for the job's summary (record_call)."""
    record = {"rank": target.rank, "start": time.time()}
    record_call(spec.job, record)
    ssh = subprocess.Popen(transport_for(spec, target).command(request),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    if request.get("forward"):
        # Forwarded output moves in large chunks. Only then: the job user's
        # pipes count against its limit of pipe memory.
        widen_pipe(ssh.stdout.fileno())
    status, error, ssh_errors = relay(ssh)
    status, reason, lost, ended = call_outcome(
        record, target, status, error,
        last_line(ssh_errors) or "ssh exited with status %d" % ssh.returncode)
    record_call(spec.job, ended)
    if error or status == 255:
        write_all(2, ("%s: %s\n" % (PROG, reason)).encode())
    return status, reason, lost


def call_outcome(record, target, status, error, lost_why):
    """How a call ended, from the launcher's exit status (None: the node did
    not answer, for `lost_why`) and error: (status, reason, lost, the
    ended call record)."""
    where = "rank %d (%s on %s)" % (target.rank, target.name, target.node)
    lost = status is None
    ended = dict(record, end=time.time(), status=255 if lost else status)
    if lost:
        status = 255
        reason = "lost connection to %s: %s" % (where, error or lost_why)
        ended["lost"] = reason  # the job cannot have finished (supervisor.py)
    elif error:
        reason = "%s: %s" % (where, error)
    else:
        reason = "%s exited with status %d" % (where, status)
    return status, reason, lost, ended


def relay(ssh):
    """Copy framed worker output to our stdout/stderr as whole lines; returns
    (remote exit status or None, launcher error or None, ssh's stderr)."""
    out, err = LineWriter(1), LineWriter(2)
    frames = FrameReader()
    status = error = None
    ssh_errors = b""
    frames_fd, chatter_fd = ssh.stdout.fileno(), ssh.stderr.fileno()
    watched = [frames_fd, chatter_fd]
    while frames_fd in watched:
        for fd in select.select(watched, [], [])[0]:
            data = read_chunk(fd)
            if not data:
                watched.remove(fd)
            elif fd == chatter_fd:
                ssh_errors = (ssh_errors + data)[-4096:]  # client chatter: never logged
            else:
                for kind, payload in frames.feed(data):
                    if kind == FRAME_STDOUT:
                        out.feed(payload)
                    elif kind == FRAME_STDERR:
                        err.feed(payload)
                    elif kind == FRAME_EXIT:
                        status = int(payload)
                    elif kind == FRAME_ERROR:
                        error = payload.decode(errors="replace")
    out.flush()
    err.flush()
    ssh.stdin.close()
    ssh.wait()
    # ssh's last words, unless a persisted master process holds the pipe.
    while chatter_fd in watched and select.select([chatter_fd], [], [], 0)[0]:
        data = os.read(chatter_fd, 1 << 16)
        if not data:
            break
        ssh_errors = (ssh_errors + data)[-4096:]
    return status, error, ssh_errors


def report_failure(spec, target, status, reason, lost=False):
    """Tell the head's supervisor that a worker failed: it stops the job."""
    record = target.summary(status)
    record["message"] = reason
    record["lost"] = lost  # the node did not answer: do not wait for it again
    name = os.path.join(registry.job_path(spec.job, registry.EVENTS_DIR),
                        "%.6f-%d" % (time.time(), os.getpid()))
    try:
        registry.write_file(name + ".json", json.dumps(record), 0o600)
    except OSError:
        pass  # the job is already being torn down
