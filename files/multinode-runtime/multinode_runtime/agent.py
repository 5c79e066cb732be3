"""The head's agent: the job's wrapper calls from the head, made by one warm
process per job instead of a Python start per call.

The head supervisor starts the agent once its transports are open
(transport.py) and before rank 0 starts; the agent makes each call over the
channel to the target's node (channel.py), with the wrapper client's logic
(wrapper.py: ssh argv, target lookup, call record, failure report). Its
client is files/ssh-wrapper, plain sh, which talks to it through the agent
directory of the job (registry.AGENT_DIR: the job user's, mode 0700):

  pool-<k>.reply the pool's reply FIFOs (k from 0), the agent's, made at
                 its start, each held open by the agent and used by one
                 call at a time: the call that holds
  pool-<k>.claim made by the client with a no-clobber redirection (O_EXCL:
                 no exec), its pid and its arguments, each ending in a NUL
                 byte; the agent cuts it to the pid when it takes the call,
                 and removes it (after emptying the FIFO) once the client
                 ended, or once a client that died before it asked is gone
                 (reclaim)
  <pid>.reply    with every slot of the pool claimed: a FIFO the client
  <pid>.argv     makes (mkfifo), and its arguments; the agent removes the
                 argv file when it takes the call
  requests       the agent's FIFO: the client writes "<pid> <host name>
                 <forward> [<k>]\\n", forward 1 with
                 MULTINODE_WRAPPER_FORWARD_STREAMS=1, else 0, k its claimed
                 slot (one write shorter than PIPE_BUF: never mixed with
                 another)

A forwarded call's output goes straight into the client's stdout and
stderr (forwarding.py), before its answer; where that is rank 0's output
pipe (the supervisor's LineRelay), into the job log itself.

The answer is one line, "STATUS MESSAGE": the call's exit status and what
the client prints on its stderr (a launcher error, a lost connection; may be
empty); or "slow": the agent does not make this call (the target's node has
no channel, the caller is not one of the job's ranks), and the client runs
the Python wrapper instead. The call ends when the client process does
(pidfd): a client killed before its answer cancels the remote command, as
the end of its ssh session would.

The supervisor keeps the request FIFO open too, so a client's open of it
never waits, even when the agent was killed (the OOM killer): the
supervisor then answers every client waiting in the directory (check):
"slow" to one whose call the agent had not taken, else that the agent
ended before the call did.
"""

import functools
import os
import select
import signal
import stat
import time

from . import registry
from .calls import record_call
from .errors import PROG, RuntimeFailure
from .forwarding import QUEUE_LIMIT, open_client_outputs
from .processes import send_signal
from .transport import Lost
from .wire import FRAME_ERROR, FRAME_EXIT, FRAME_STDERR, FRAME_STDOUT
from .wrapper import call_outcome, find_rank, parse_ssh_argv, report_failure

MAX_ARGV_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 4000  # an answer stays one write to the client's FIFO
STOP_CHECK_SECONDS = 0.2
POOL_MIN, POOL_MAX = 16, 256  # reply FIFOs made ahead: one per slot of the job's ranks, within these
RECLAIM_SECONDS = 1.0  # how often an idle agent looks for claims of clients that died before they asked
AGENT_ENDED = "255 %s: the job's agent ended before the call did" % PROG


class Call:
    """One wrapper call the agent is making."""

    def __init__(self, call_id, pid, pidfd, reply_fd, forward=False, slot=None):
        self.id, self.pid, self.pidfd, self.reply_fd = call_id, pid, pidfd, reply_fd
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

    def __init__(self, spec, user, transports, job_log_pipes=()):
        self.spec, self.user, self.transports = spec, user, transports
        self.job_log_pipes = set(job_log_pipes)  # (st_dev, st_ino) of pipes relayed into the job log
        self.directory = registry.job_path(spec.job, registry.AGENT_DIR)
        self.requests_path = os.path.join(self.directory, registry.AGENT_REQUESTS)
        self.pid = None
        self.exited = None  # a pidfd of the agent process
        self.requests = None  # the request FIFO's fd: the supervisor's, and the agent's own
        self.calls = {}  # call id: Call
        self.forwarded = {}  # call id: Call, of the calls with forwarded outputs open
        self.channels = {}  # node: its channel (the live ones)
        self.next_id = 1
        self.stopping = False
        self.pool_size = max(POOL_MIN, min(POOL_MAX, sum(rank.slots for rank in spec.ranks)))
        self.pool = []  # slot: the agent's fd of its reply FIFO (open_pool)
        self.slot_calls = {}  # slot: the Call that holds it
        self.reclaimed_at = 0.0

    # -- the supervisor's side ---------------------------------------------

    def start(self, close=()):
        """Make the agent directory and its request FIFO, and fork the agent
        (which closes the supervisor's fds `close`)."""
        os.makedirs(self.directory, 0o700)
        os.mkfifo(self.requests_path, 0o600)
        for slot in range(self.pool_size):  # the directory is not the job user's yet: no race
            path = self.slot_path(slot, "reply")
            os.mkfifo(path, 0o600)
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
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
                pid = self.claimant(name)
            else:
                continue
            if pid is not None and os.path.exists("/proc/%d" % pid):
                return True
        return False

    def claimant(self, name):
        """The pid in claim file `name`, or None (none written yet)."""
        pid = (self.read_own(name, 32) or b"").split(b"\0", 1)[0]
        return int(pid) if pid.isdigit() else None

    def check(self):
        """On each poll of the supervisor: if the agent process ended before
        the teardown (killed), answer the clients waiting for it (ended)."""
        if self.exited is not None and select.select([self.exited], [], [], 0)[0]:
            self.ended()

    def stop(self):
        """After the teardown's kill: the agent is gone, and so is its
        directory (a later client takes the slow path)."""
        if self.pid is not None:
            send_signal(self.pid, signal.SIGKILL)
        if self.exited is not None:
            os.close(self.exited)
            self.exited = None
        self.close_requests()
        try:
            for name in os.listdir(self.directory):
                self.unlink(name)
            os.rmdir(self.directory)
        except OSError:
            pass

    def ended(self):
        """The agent process ended before the teardown: later clients take
        the slow path, and every client waiting at its reply FIFO gets an
        answer (on each poll: a client that was about to open it is
        answered on the next)."""
        self.unlink(registry.AGENT_REQUESTS)
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
                claim = self.read_own(key + ".claim", 32)
                taken = claim is None or not claim.endswith(b"\0")
            try:
                os.write(reply, ((AGENT_ENDED if taken else "slow") + "\n").encode())
            except OSError:
                pass
            os.close(reply)
            if key.isdigit():
                self.unlink_call_files(int(key))
            else:  # no later client uses the pool (no request FIFO): never answered twice
                self.unlink(name)
                self.unlink(key + ".claim")

    # -- the agent process -------------------------------------------------

    def serve(self, supervisor):
        """Make calls until the supervisor asks the agent to stop (SIGTERM,
        the teardown: no new calls, exit once the ones in flight ended) or
        is gone."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.channels = {node: transport.channel() for node, transport in self.transports.items()}
        supervisor_gone = os.pidfd_open(supervisor)
        self.pending = b""
        self.open_pool()
        try:
            while True:
                if self.stopping:
                    self.close_requests()
                    if not self.calls:
                        return
                handlers, writers = self.handlers(), self.writers()
                handlers[supervisor_gone] = None
                readable, writable, _ = select.select(list(handlers), list(writers), [], STOP_CHECK_SECONDS)
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
            pid = int(pid_text)
            slot = int(rest[1]) if len(rest) > 1 else None
        except ValueError:
            return
        if slot is None:
            self.reclaim()  # the pool ran dry: a client that died may hold a slot
            reply_fd = self.open_own("%d.reply" % pid, stat.S_ISFIFO, os.O_RDWR)
            data = self.take_argv(pid)
        elif 0 <= slot < len(self.pool) and self.slot_free(slot):
            reply_fd = self.pool[slot]
            data = self.take_claim(pid, slot)
            if data is None:
                return  # not the client's claim: never answered on another call's FIFO
        else:
            return  # not a slot of the pool, or one in use
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # the client is gone already
            if slot is not None:
                self.release(slot)
            else:
                if reply_fd is not None:
                    os.close(reply_fd)
                self.unlink_call_files(pid)
            return
        if reply_fd is None:
            os.close(pidfd)
            return  # nowhere to answer
        call = Call(self.next_id, pid, pidfd, reply_fd, rest[:1] == ["1"], slot)
        self.next_id += 1
        self.calls[call.id] = call
        if slot is not None:
            self.slot_calls[slot] = call
        try:
            return self.make(call, data, name)
        except Exception as exc:  # the client must get an answer, the agent go on
            return self.answer(call, "255 %s: the job's agent failed: %s" % (PROG, exc))

    def take_argv(self, pid):
        """The arguments in the client's own argv file (b"": none), which
        goes: the call is taken (ended() tells so)."""
        data = b""
        fd = self.open_own("%d.argv" % pid, stat.S_ISREG, os.O_RDONLY)
        if fd is not None:
            with os.fdopen(fd, "rb", buffering=0) as handle:
                data = handle.read(MAX_ARGV_BYTES + 1)
        self.unlink("%d.argv" % pid)
        return data

    def take_claim(self, pid, slot):
        """The arguments in the slot's claim, which is cut to the pid: the
        call is taken (ended() tells so). None if it is not pid's claim."""
        fd = self.open_own(self.slot_name(slot, "claim"), stat.S_ISREG, os.O_RDWR)
        if fd is None:
            return None
        mine = b"%d\0" % pid
        with os.fdopen(fd, "r+b", buffering=0) as handle:
            data = handle.read(len(mine) + MAX_ARGV_BYTES + 1)
            if not data.startswith(mine):
                return None
            os.ftruncate(fd, len(mine) - 1)
        return data[len(mine):]

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
        channel = self.channels.get(call.target.node)
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

    def open_own(self, name, is_kind, flags):
        """An fd of the client's file `name` in the agent directory, if it
        is of the right kind and the job user's (never a link to something
        else)."""
        try:
            fd = os.open(os.path.join(self.directory, name), flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
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
        if self.calls.get(call.id) is not call:
            return  # ended already (an earlier handler of the same select)
        if not call.answered and call.node in self.channels:
            self.channels[call.node].cancel(call.id)
        self.close_outputs(call)
        os.close(call.pidfd)
        del self.calls[call.id]
        if call.slot is not None:
            del self.slot_calls[call.slot]
            self.release(call.slot)
        else:
            if call.reply_fd is not None:
                os.close(call.reply_fd)
            self.unlink_call_files(call.pid)

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

    # -- the pool of reply FIFOs -------------------------------------------

    def slot_name(self, slot, kind):
        return "pool-%d.%s" % (slot, kind)

    def slot_path(self, slot, kind):
        return os.path.join(self.directory, self.slot_name(slot, kind))

    def open_pool(self):
        """Open the pool's FIFOs (start made them), here in the agent: only
        a client holds one open once the agent is gone (ended())."""
        for slot in range(self.pool_size):
            fd = self.open_own(self.slot_name(slot, "reply"), stat.S_ISFIFO, os.O_RDWR)
            if fd is None:
                break  # the pool ends here
            self.pool.append(fd)

    def slot_free(self, slot):
        """Whether no call holds the slot: none took it, or the one that
        did was answered "slow" and its client gave the slot back (removed
        its claim, after it read the answer) before it ended."""
        holder = self.slot_calls.get(slot)
        if holder is None:
            return True
        if not holder.answered or self.read_own(self.slot_name(slot, "claim"), 32) == b"%d" % holder.pid:
            return False
        del self.slot_calls[slot]
        holder.slot = holder.reply_fd = None  # the pool's FIFO is no longer its
        return True

    def release(self, slot):
        """The slot's client ended: its FIFO emptied (an answer it did not
        read), then its claim removed, so that the next client claims it."""
        try:
            while os.read(self.pool[slot], 1 << 16):
                pass
        except BlockingIOError:
            pass
        self.unlink(self.slot_name(slot, "claim"))

    def reclaim(self):
        """Free the slots claimed by clients that died before they asked:
        the pid in the claim is gone, or no pid was written and no process
        holds the claim open (its client died between the claim and the
        write)."""
        self.reclaimed_at = time.monotonic()
        for slot in range(len(self.pool)):
            if slot in self.slot_calls:
                continue
            name = self.slot_name(slot, "claim")
            data = self.read_own(name, 32)
            if data is None:
                continue  # free
            pid = data.split(b"\0", 1)[0]
            if pid.isdigit():
                if not os.path.exists("/proc/%d" % int(pid)):
                    self.release(slot)
            elif not held_open(self.slot_path(slot, "claim")) and self.read_own(name, 32) == b"":
                self.release(slot)

    def read_own(self, name, size):
        """The first `size` bytes of the job user's regular file `name`, or
        None."""
        fd = self.open_own(name, stat.S_ISREG, os.O_RDONLY)
        if fd is None:
            return None
        try:
            return os.read(fd, size)
        finally:
            os.close(fd)

    def close_requests(self):
        """No more requests: the request FIFO goes (a later client takes the
        slow path)."""
        if self.requests is not None:
            self.unlink(registry.AGENT_REQUESTS)
            os.close(self.requests)
            self.requests = None

    def unlink_call_files(self, pid):
        self.unlink("%d.reply" % pid)
        self.unlink("%d.argv" % pid)

    def unlink(self, name):
        """Remove `name` from the agent directory, if it is there."""
        try:
            os.unlink(os.path.join(self.directory, name))
        except OSError:
            pass


def held_open(path):
    """Whether a process other than this one has `path` open."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == path:
                    return True
            except OSError:
                continue
    return False
