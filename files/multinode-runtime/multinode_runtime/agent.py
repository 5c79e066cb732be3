"""The head's agent: the job's wrapper calls from the head, made by one warm
process per job instead of a Python start per call.

The head supervisor starts the agent once its transports are open
(transport.py) and before rank 0 starts; the agent makes each call over the
channel to the target's node (channel.py), with the wrapper client's logic
(wrapper.py: ssh argv, target lookup, call record, failure report). Its
client is files/ssh-wrapper, plain sh, which talks to it through the agent
directory of the job (registry.AGENT_DIR: the job user's, mode 0700):

  <pid>.reply    a FIFO the client makes, where it reads its answer
  <pid>.argv     the client's arguments, each ending in a NUL byte
  requests       the agent's FIFO: the client writes "<pid> <host name>\\n"
                 (one write shorter than PIPE_BUF: never mixed with another)

The answer is one line, "STATUS MESSAGE": the call's exit status and what
the client prints on its stderr (a launcher error, a lost connection; may be
empty); or "slow": the agent does not make this call (the target's node has
no channel, the caller is not one of the job's ranks), and the client runs
the Python wrapper instead. The call ends when the client process does
(pidfd): a client killed before its answer cancels the remote command, as
the end of its ssh session would.
"""

import os
import select
import signal
import stat
import time

from . import registry
from .calls import record_call
from .errors import PROG, RuntimeFailure
from .processes import send_signal
from .transport import Lost
from .wire import FRAME_ERROR, FRAME_EXIT
from .wrapper import call_outcome, find_rank, parse_ssh_argv, report_failure

MAX_ARGV_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 4000  # an answer stays one write to the client's FIFO
STOP_CHECK_SECONDS = 0.2


class Call:
    """One wrapper call the agent is making."""

    def __init__(self, call_id, pid, pidfd, reply_fd):
        self.id, self.pid, self.pidfd, self.reply_fd = call_id, pid, pidfd, reply_fd
        self.me = self.target = self.record = self.node = None
        self.status = self.error = None
        self.answered = False


class Agent:
    """The supervisor's handle on its agent process (start, stop,
    calls_in_flight) and, in that process, the agent itself (serve)."""

    def __init__(self, spec, user, transports):
        self.spec, self.user, self.transports = spec, user, transports
        self.directory = registry.job_path(spec.job, registry.AGENT_DIR)
        self.pid = None
        self.calls = {}  # call id: Call
        self.channels = {}  # node: its channel (the live ones)
        self.next_id = 1
        self.stopping = False

    # -- the supervisor's side ---------------------------------------------

    def start(self):
        """Make the agent directory and its request FIFO, and fork the agent."""
        os.makedirs(self.directory, 0o700)
        requests_path = os.path.join(self.directory, registry.AGENT_REQUESTS)
        os.mkfifo(requests_path, 0o600)
        # Held open for reading and writing: a client's open never blocks,
        # and no client's line is lost between two of them.
        requests = os.open(requests_path, os.O_RDWR | os.O_NONBLOCK)
        os.chown(requests_path, self.user.pw_uid, self.user.pw_gid)
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                self.serve(requests, supervisor)
                status = 0
            finally:
                os._exit(status)
        os.close(requests)
        self.pid = pid
        # Open to the job user last: a client finds the FIFO served.
        os.chown(self.directory, self.user.pw_uid, self.user.pw_gid)

    def calls_in_flight(self):
        """Whether a call through the agent is still being made: its
        client's reply FIFO is there until the client ends (one left by a
        client killed before it asked does not count)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return False
        return any(name.endswith(".reply") and name[:-6].isdigit()
                   and os.path.exists("/proc/" + name[:-6]) for name in names)

    def stop(self):
        """After the teardown's kill: the agent is gone, and so is its
        directory (a later client takes the slow path)."""
        if self.pid is not None:
            send_signal(self.pid, signal.SIGKILL)
        try:
            for name in os.listdir(self.directory):
                os.unlink(os.path.join(self.directory, name))
            os.rmdir(self.directory)
        except OSError:
            pass

    # -- the agent process -------------------------------------------------

    def serve(self, requests, supervisor):
        """Make calls until the supervisor asks the agent to stop (SIGTERM,
        the teardown: no new calls, exit once the ones in flight ended) or
        is gone."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.channels = {node: transport.channel() for node, transport in self.transports.items()}
        supervisor_gone = os.pidfd_open(supervisor)
        pending = b""
        try:
            while True:
                if self.stopping and requests is not None:
                    os.unlink(os.path.join(self.directory, registry.AGENT_REQUESTS))
                    os.close(requests)
                    requests = None
                if self.stopping and not self.calls:
                    return
                watched = [supervisor_gone] + [c.pidfd for c in self.calls.values()]
                watched += [fd for channel in self.channels.values() for fd in channel.fds()]
                if requests is not None:
                    watched.append(requests)
                for fd in select.select(watched, [], [], STOP_CHECK_SECONDS)[0]:
                    if fd == supervisor_gone:
                        return
                    if fd == requests:
                        pending += os.read(requests, 1 << 16)
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            self.accept(line)
                    else:
                        self.readable(fd)
        finally:
            if requests is not None:  # later clients take the slow path
                self.unlink(os.path.join(self.directory, registry.AGENT_REQUESTS))
            for call in self.calls.values():
                if not call.answered and call.node in self.channels:
                    self.channels[call.node].cancel(call.id)

    def _on_stop(self, signum, frame):
        self.stopping = True

    def readable(self, fd):
        for call in list(self.calls.values()):
            if fd == call.pidfd:
                return self.client_ended(call)
        for node, channel in list(self.channels.items()):
            if fd in channel.fds():
                try:
                    frames = channel.read(fd)
                except Lost as exc:
                    return self.channel_lost(node, str(exc))
                for call_id, kind, payload in frames:
                    call = self.calls.get(call_id)
                    if call is None or call.answered:
                        continue  # its client is gone
                    if kind == FRAME_ERROR:
                        call.error = payload.decode(errors="replace")
                    elif kind == FRAME_EXIT:
                        self.finish(call, int(payload))
                return None
        return None

    def accept(self, line):
        """A client's request line: open its reply FIFO, read its argv, and
        make the call (or answer at once)."""
        try:
            pid_text, name = line.decode().split(" ", 1)
            pid = int(pid_text)
        except ValueError:
            return
        base = os.path.join(self.directory, "%d." % pid)
        reply_fd = self.open_own(base + "reply", stat.S_ISFIFO, os.O_RDWR)
        if reply_fd is None:
            return  # nowhere to answer
        argv_fd = self.open_own(base + "argv", stat.S_ISREG, os.O_RDONLY)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # the client is gone already
            for fd in (reply_fd, argv_fd):
                if fd is not None:
                    os.close(fd)
            self.unlink(base + "reply")
            self.unlink(base + "argv")
            return
        call = Call(self.next_id, pid, pidfd, reply_fd)
        self.next_id += 1
        self.calls[call.id] = call
        try:
            return self.make(call, argv_fd, name, base)
        except Exception as exc:  # the client must get an answer, the agent go on
            return self.answer(call, "255 %s: the job's agent failed: %s" % (PROG, exc))

    def make(self, call, argv_fd, name, base):
        """What the Python wrapper does for its call, up to sending it."""
        args = None
        if argv_fd is not None:
            with os.fdopen(argv_fd, "rb") as handle:
                data = handle.read(MAX_ARGV_BYTES + 1)
            if len(data) <= MAX_ARGV_BYTES and data.endswith(b"\0"):
                args = [os.fsdecode(word) for word in data[:-1].split(b"\0")]
        self.unlink(base + "argv")
        call.me = next((rank for rank in self.spec.ranks if rank.name == name), None)
        if args is None or call.me is None:
            return self.answer(call, "slow")
        try:
            host, words = parse_ssh_argv(args)
            call.target = find_rank(self.spec, host)
        except RuntimeFailure as exc:
            if call.me.rank == 0:
                report_failure(self.spec, call.me, 255, "a wrapper call on %s failed: %s" % (call.me.name, exc))
            return self.answer(call, "255 %s: %s" % (PROG, exc))
        channel = self.channels.get(call.target.node)
        if channel is None:
            return self.answer(call, "slow")
        call.node = call.target.node
        call.record = {"rank": call.target.rank, "start": time.time()}
        record_call(self.spec.job, call.record, call.pid)
        channel.start(call.id, {"job": self.spec.job, "run": self.spec.run, "rank": call.target.rank,
                                "command": " ".join(words), "forward": False})
        return None

    def open_own(self, path, is_kind, flags):
        """An fd of the client's file `path`, if it is of the right kind and
        the job user's (never a link to something else)."""
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        info = os.fstat(fd)
        if not is_kind(info.st_mode) or info.st_uid not in (self.user.pw_uid, 0):
            os.close(fd)
            return None
        return fd

    def finish(self, call, status, lost_why=None):
        """The call ended: record it, report a failure, answer the client."""
        status, reason, lost, ended = call_outcome(call.record, call.target, status, call.error, lost_why)
        record_call(self.spec.job, ended, call.pid)
        message = "%s: %s" % (PROG, reason) if call.error or status == 255 or lost else ""
        if status != 0 and call.me.rank == 0:
            report_failure(self.spec, call.target, status, reason, lost)
        self.answer(call, "%d %s" % (status, message))

    def answer(self, call, text):
        data = " ".join(text.split("\n")).encode()[:MAX_MESSAGE_BYTES] + b"\n"
        try:
            os.write(call.reply_fd, data)
        except OSError:
            pass  # the client is gone
        call.answered = True

    def client_ended(self, call):
        """The client process ended (answered, or killed before)."""
        if not call.answered and call.node in self.channels:
            self.channels[call.node].cancel(call.id)
        os.close(call.pidfd)
        os.close(call.reply_fd)
        self.unlink(os.path.join(self.directory, "%d.reply" % call.pid))
        del self.calls[call.id]

    def channel_lost(self, node, why):
        """The node's channel is gone: every call to it lost its connection;
        later calls to the node take the slow path (a fresh ssh)."""
        del self.channels[node]
        for call in list(self.calls.values()):
            if call.node == node and not call.answered:
                self.finish(call, None, why)

    @staticmethod
    def unlink(path):
        try:
            os.unlink(path)
        except OSError:
            pass
