"""The head's agent: the job's wrapper calls from the head, made by one warm
process per job instead of a Python start per call.

The head supervisor starts the agent once its transports are open
(transport.py) and before rank 0 starts; the agent makes each call over the
channel to the target's node (channel.py), with the wrapper client's logic
(wrapper.py: ssh argv, target lookup, call record, failure report). Its
client is files/ssh-wrapper, plain sh, which talks to it through the agent
directory of the job (agent_files.py says what is in it).

A forwarded call's output goes straight into the client's stdout and
stderr (forwarding.py), before its answer; where that is rank 0's output
pipe (the supervisor's LineRelay), into the job log itself.

The answer is one line, "STATUS MESSAGE": the call's exit status and what
the client prints on its stderr (a launcher error, a lost connection; may be
empty); or "slow": the agent does not make this call (no channel to the
target's node, the caller is not a rank), and the client runs the Python
wrapper instead. A client killed before its answer (pidfd) cancels the
remote command, as the end of its ssh session would.

The supervisor keeps the request FIFO open too, so a client's open never
waits, even when the agent was killed (the OOM killer): the supervisor then
answers every client waiting (check): "slow" if the agent had not taken
its call, else that the agent ended before the call did.
"""

import functools
import os
import select
import signal
import stat
import time

from . import registry
from .agent_files import MAX_ARGV_BYTES, AgentFiles
from .calls import record_call
from .channel import ForkedCalls
from .errors import PROG, RuntimeFailure
from .forwarding import QUEUE_LIMIT, open_client_outputs
from .processes import send_signal
from .rank_call import serve_call
from .sandbox import job_sandbox
from .transport import Lost
from .wire import FRAME_ERROR, FRAME_EXIT, FRAME_STDERR, FRAME_STDOUT
from .wrapper import call_outcome, find_rank, parse_ssh_argv, report_failure

MAX_MESSAGE_BYTES = 4000  # an answer stays one write to the client's FIFO
STOP_CHECK_SECONDS = 0.2
RECLAIM_SECONDS = 1.0  # how often an idle agent looks for claims of clients that died before they asked
AGENT_ENDED = "255 %s: the job's agent ended before the call did" % PROG


class Call:
    """One wrapper call the agent is making."""

    def __init__(self, call_id, pid, pidfd, reply_fd, forward=False, slot=None, client=None):
        self.id, self.pid, self.pidfd, self.reply_fd = call_id, pid, pidfd, reply_fd
        # The client's pid as it wrote it (its own PID namespace's: the
        # container's, where the job runs in its image): the agent
        # directory's files name it so; `pid` is the host's.
        self.client = pid if client is None else client
        self.forward = forward
        self.slot = slot  # its claimed slot of the pool (reply_fd the pool's), or None
        self.me = self.target = self.record = self.node = None
        self.status = self.error = None
        self.outputs = {}  # forwarded: FRAME_STDOUT/FRAME_STDERR: forwarding.Output
        self.exited = False  # its exit status came (answered once its outputs are written)
        self.answered = False

    def queued(self):
        return sum(output.queued for output in self.outputs.values())

    def close_outputs(self):
        for output in self.outputs.values():
            output.close()


class Agent:
    """The supervisor's handle on its agent process (start, stop,
    calls_in_flight) and, in that process, the agent itself (serve)."""

    def __init__(self, spec, user, transports, job_log_pipes=(), node=None):
        self.spec, self.user, self.transports = spec, user, transports
        self.node = node or spec.head.node  # the agent's own node
        self.sandbox = job_sandbox(spec.job)
        self.job_log_pipes = set(job_log_pipes)  # (st_dev, st_ino) of pipes relayed into the job log
        self.files = AgentFiles(spec, user)
        self.directory, self.requests_path = self.files.directory, self.files.requests_path
        self.pid = None
        self.exited = None  # a pidfd of the agent process
        self.requests = None  # the request FIFO's fd: the supervisor's, and the agent's own
        self.calls = {}  # call id: Call
        self.forwarded = {}  # call id: Call, of the calls with forwarded outputs open
        self.channels = {}  # node: its channel (the live ones)
        self.next_id, self.stopping, self.reclaimed_at = 1, False, 0.0
        self.slot_calls = {}  # slot: the Call that holds it

    # -- the supervisor's side ---------------------------------------------

    def start(self, close=()):
        """Make the agent directory and its request FIFO, and fork the agent
        (which closes the supervisor's fds `close`)."""
        os.makedirs(self.directory, 0o700)
        os.mkfifo(self.requests_path, 0o600)
        self.files.make_pool()
        # Held open for reading and writing, here and in the agent, until
        # the agent's end: a client's open never blocks, and no client's
        # line is lost between two of them.
        self.requests = os.open(self.requests_path, os.O_RDWR | os.O_NONBLOCK)
        os.chown(self.requests_path, self.user.pw_uid, self.user.pw_gid)
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                for fd in close:
                    os.close(fd)
                self.serve(supervisor)
                status = 0
            finally:
                os._exit(status)
        self.pid = pid
        self.exited = os.pidfd_open(pid)
        # Open to the job user last: a client finds the FIFO served.
        os.chown(self.directory, self.user.pw_uid, self.user.pw_gid)

    def calls_in_flight(self):
        """Whether a call through the agent is still being made: its
        client's claim, or its own reply FIFO, is there until the client
        ends (one left by a client killed before it asked does not count)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return False
        for name in names:
            if name.endswith(".reply") and name[:-6].isdigit():
                pid = int(name[:-6])
            elif name.startswith("pool-") and name.endswith(".claim"):
                pid = self.files.claimant(name)
            else:
                continue
            if pid is not None and self.client_alive(pid):
                return True
        return False

    def client_alive(self, pid):
        """Whether the client whose pid (its own) is `pid` lives."""
        return self.sandbox.has_pid(pid) if self.sandbox else os.path.exists("/proc/%d" % pid)

    def client_host_pid(self, pid):
        """The host pid of the client whose own pid is `pid`, or None."""
        return self.sandbox.host_pid(pid, self.user) if self.sandbox else pid

    def check(self):
        """On each poll of the supervisor: if the agent process ended before
        the teardown (killed), answer the clients waiting for it (ended)."""
        if self.exited is not None and select.select([self.exited], [], [], 0)[0]:
            self.ended()

    def stop(self, within=0.0):
        """After the teardown's kill: the agent is gone, and so is its
        directory (a later client takes the slow path). With `within`, it
        is asked to end first (SIGTERM: it ends between two steps, never
        within a frame it sends) and killed after so many seconds. Whether
        it ended as asked: then its channels are whole for the teardown."""
        asked = False
        if self.exited is not None:
            if within and not select.select([self.exited], [], [], 0)[0]:
                send_signal(self.pid, signal.SIGTERM)
                asked = bool(select.select([self.exited], [], [], within)[0])
            send_signal(self.pid, signal.SIGKILL)
            os.close(self.exited)
            self.exited = None
        self.close_requests()
        try:
            for name in os.listdir(self.directory):
                self.files.unlink(name)
            os.rmdir(self.directory)
        except OSError:
            pass
        return asked

    def ended(self):
        """The agent process ended before the teardown: later clients take
        the slow path, and every client waiting at its reply FIFO gets an
        answer (on each poll: a client that was about to open it is
        answered on the next)."""
        self.files.unlink(registry.AGENT_REQUESTS)
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            key = name[:-len(".reply")]
            if not (name.endswith(".reply") and (key.isdigit() or key.startswith("pool-"))):
                continue
            try:  # only a reply FIFO that its client holds open
                reply = os.open(os.path.join(self.directory, name), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            except OSError:
                continue
            if key.isdigit():
                taken = not os.path.exists(os.path.join(self.directory, key + ".argv"))
            else:  # a claim the agent took is cut to the pid
                claim = self.files.read_own(key + ".claim", 32)
                taken = claim is None or not claim.endswith(b"\0")
            try:
                os.write(reply, ((AGENT_ENDED if taken else "slow") + "\n").encode())
            except OSError:
                pass
            os.close(reply)
            if key.isdigit():
                self.files.unlink_call_files(int(key))
            else:  # no later client uses the pool (no request FIFO): never answered twice
                self.files.unlink(name)
                self.files.unlink(key + ".claim")

    # -- the agent process -------------------------------------------------

    def serve(self, supervisor):
        """Make calls until the supervisor asks the agent to stop (SIGTERM,
        the teardown: no new calls, exit once the ones in flight ended) or
        is gone."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        # The stop ends the select at once (the teardown waits for it; a
        # select a handler interrupted runs on for the rest of its timeout).
        woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake)
        self.channels = {node: transport.channel() for node, transport in self.transports.items()}
        supervisor_gone = os.pidfd_open(supervisor)
        self.pending = b""
        self.files.open_pool()
        try:
            while True:
                if self.stopping:
                    self.close_requests()
                    if not self.calls:
                        return
                handlers, writers = self.handlers(), self.writers()
                handlers[supervisor_gone] = None
                handlers[woken] = functools.partial(os.read, woken, 64)
                readable, writable, _unused = select.select(list(handlers), list(writers), [], STOP_CHECK_SECONDS)
                if not readable and not writable and time.monotonic() - self.reclaimed_at > RECLAIM_SECONDS:
                    self.reclaim()
                for fd in writable:
                    writers[fd]()
                for fd in readable:
                    if fd == supervisor_gone:
                        return
                    handlers[fd]()
        finally:
            self.close_requests()  # later clients take the slow path
            for call in self.calls.values():
                if not call.answered and call.node in self.channels:
                    self.channels[call.node].cancel(call.id)

    def _on_stop(self, signum, frame):
        self.stopping = True

    def handlers(self):
        """{fd: what to do when it is readable} of what the agent watches:
        its request FIFO, every client (its pidfd), every channel."""
        handlers = {call.pidfd: functools.partial(self.client_ended, call) for call in self.calls.values()}
        # A node one of whose forwarded outputs' readers is behind is not
        # read: ssh holds the node back.
        held = {call.node for call in self.forwarded.values() if call.queued() > QUEUE_LIMIT}
        for node, channel in self.channels.items():
            if node in held:
                continue
            for fd in channel.fds():
                handlers[fd] = functools.partial(self.channel_readable, node, channel, fd)
        if self.requests is not None:
            # Last: taking a call opens fds, which may get the numbers of fds
            # that the handlers before it closed.
            handlers[self.requests] = self.read_requests
        return handlers

    def writers(self):
        """{fd: what to do when it is writable} of the forwarded outputs
        with lines queued."""
        return {output.fd: functools.partial(self.output_writable, call, output)
                for call in self.forwarded.values() for output in call.outputs.values() if output.queue}

    def readable(self, fd):
        """Handle one fd the agent watches that is readable."""
        self.handlers()[fd]()

    def output_writable(self, call, output):
        if output.fd is None:
            return  # closed since the select
        output.write_some()
        self.answer_when_written(call)

    def read_requests(self):
        self.pending += os.read(self.requests, 1 << 16)
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self.accept(line)

    def channel_readable(self, node, channel, fd):
        if self.channels.get(node) is not channel or fd not in channel.fds():
            return None  # gone since the select (an earlier fd's handler)
        try:
            frames = channel.read(fd)
        except Lost as exc:
            return self.channel_lost(node, str(exc))
        return self.on_frames(frames)

    def on_frames(self, frames):
        """[(call id, kind, payload)] that came from a channel."""
        for call_id, kind, payload in frames:
            call = self.calls.get(call_id)
            if call is None or call.answered:
                continue  # its client is gone
            if kind in call.outputs:
                call.outputs[kind].feed(payload)
            elif kind == FRAME_ERROR:
                call.error = payload.decode(errors="replace")
            elif kind == FRAME_EXIT:
                call.status, call.exited = int(payload), True
                for output in call.outputs.values():
                    output.end()
                self.answer_when_written(call)
        return None

    def answer_when_written(self, call):
        """A call whose exit status came is finished once its forwarded
        output is written, so that its client ends after its output."""
        if call.exited and not call.answered and not call.queued():
            self.close_outputs(call)
            self.finish(call, call.status)

    def accept(self, line):
        """A client's request line: take its claimed slot (or open its own
        reply FIFO), read its argv, and make the call (or answer at once)."""
        try:
            pid_text, name, *rest = line.decode().split(" ")
            client = int(pid_text)
            slot = int(rest[1]) if len(rest) > 1 else None
        except ValueError:
            return
        if slot is None:
            self.reclaim()  # the pool ran dry: a client that died may hold a slot
            reply_fd = self.files.open_own("%d.reply" % client, stat.S_ISFIFO, os.O_RDWR)
            data = self.files.take_argv(client)
        elif 0 <= slot < len(self.files.pool) and self.slot_free(slot):
            reply_fd = self.files.pool[slot]
            data = self.files.take_claim(client, slot)
            if data is None:
                return  # not the client's claim: never answered on another call's FIFO
        else:
            return  # not a slot of the pool, or one in use
        pid = self.client_host_pid(client)
        try:
            if pid is None:
                raise ProcessLookupError
            pidfd = os.pidfd_open(pid)
        except OSError:  # the client is gone already
            if slot is not None:
                self.files.release(slot)
            else:
                if reply_fd is not None:
                    os.close(reply_fd)
                self.files.unlink_call_files(client)
            return
        if reply_fd is None:
            os.close(pidfd)
            return  # nowhere to answer
        call = Call(self.next_id, pid, pidfd, reply_fd, rest[:1] == ["1"], slot, client)
        self.next_id += 1
        self.calls[call.id] = call
        if slot is not None:
            self.slot_calls[slot] = call
        try:
            return self.make(call, data, name)
        except Exception as exc:  # the client must get an answer, the agent go on
            return self.answer(call, "255 %s: the job's agent failed: %s" % (PROG, exc))

    def make(self, call, data, name):
        """What the Python wrapper does for its call, up to sending it."""
        args = None
        if len(data) <= MAX_ARGV_BYTES and data.endswith(b"\0"):
            args = [os.fsdecode(word) for word in data[:-1].split(b"\0")]
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
        try:
            channel = self.channel_to(call.target)
        except RuntimeFailure as exc:
            return self.answer(call, "255 %s: %s" % (PROG, exc))
        if channel is None:
            return self.answer(call, "slow")
        if call.forward:
            outputs = open_client_outputs(call.pid, call.pidfd, self.user, registry.job_log_path(self.spec.job),
                                          self.job_log_pipes)
            if outputs is None:
                return self.answer(call, "slow")
            call.outputs = {FRAME_STDOUT: outputs[0], FRAME_STDERR: outputs[1]}
            self.forwarded[call.id] = call
        call.node = call.target.node
        call.record = {"rank": call.target.rank, "start": time.time()}
        record_call(self.spec.job, call.record, call.pid)
        channel.start(call.id, {"job": self.spec.job, "run": self.spec.run, "rank": call.target.rank,
                                "command": " ".join(words), "forward": call.forward})
        return None

    def channel_to(self, target):
        """The channel to the node of rank `target`, or None (the call takes
        the slow path). A call for a rank of this node is forked here, as a
        hold forks the calls that come over its channel: the job's sandbox
        has no key to reach its own node over ssh (and an image no ssh)."""
        channel = self.channels.get(target.node)
        if channel is None and target.node == self.node:
            channel = ForkedCalls(lambda request: serve_call(self.spec, self.node, request, 1, self.user))
            self.channels[target.node] = channel
        return channel

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
        if self.calls.get(call.id) is not call:
            return  # ended already (an earlier handler of the same select)
        if not call.answered and call.node in self.channels:
            self.channels[call.node].cancel(call.id)
        self.close_outputs(call)
        os.close(call.pidfd)
        del self.calls[call.id]
        if call.slot is not None:
            del self.slot_calls[call.slot]
            self.files.release(call.slot)
        else:
            if call.reply_fd is not None:
                os.close(call.reply_fd)
            self.files.unlink_call_files(call.client)

    def close_outputs(self, call):
        call.close_outputs()
        self.forwarded.pop(call.id, None)

    def channel_lost(self, node, why):
        """The node's channel is gone: every call to it lost its connection;
        later calls to the node take the slow path (a fresh ssh)."""
        del self.channels[node]
        for call in list(self.calls.values()):
            if call.node == node and not call.answered:
                for output in call.outputs.values():
                    output.end()  # what came, as far as its reader takes it now
                self.close_outputs(call)
                self.finish(call, None, why)

    def reclaim(self):
        """Free the pool's slots whose clients died before they asked."""
        self.reclaimed_at = time.monotonic()
        self.files.reclaim(self.slot_calls, self.client_alive)

    def slot_free(self, slot):
        """Whether no call holds the slot: none took it, or the one that
        did was answered "slow" and its client gave the slot back (removed
        its claim, after it read the answer) before it ended."""
        holder = self.slot_calls.get(slot)
        if holder is None:
            return True
        if not holder.answered or self.files.read_own(self.files.slot_name(slot, "claim"), 32) == b"%d" % holder.client:
            return False
        del self.slot_calls[slot]
        holder.slot = holder.reply_fd = None  # the pool's FIFO is no longer its
        return True

    def close_requests(self):
        """No more requests: the request FIFO goes (a later client takes the
        slow path)."""
        if self.requests is not None:
            self.files.unlink(registry.AGENT_REQUESTS)
            os.close(self.requests)
            self.requests = None
