"""How wrapper calls reach a rank's node: the two transports behind one
interface.

- SshTransport, a worker's node: ssh with the cluster key (sshd runs the
  runtime's `launch` as the key's forced command).
- LocalTransport, this node (local mode: every rank is on the head): the
  head's local launch socket (local_socket.py, which the head supervisor
  starts as a worker's sshd is there already) stands in for sshd, and the
  head's agent runs calls itself.

Each transport offers the same two ways in:
- command(request): the argv of a process that carries one launch request
  and relays the launcher's frames on its stdout, ending the launch when its
  stdin closes (the slow path: wrapper.py's one-shot calls, task-array
  tasks);
- open() at job start, then channel(): the job's channel that carries many
  calls at once (channel.py), for the head's agent (agent.py); ssh: the
  `hold` session of the job's ControlMaster; this node: calls forked from
  the agent. close() at the job's teardown.
transport_for and open_transports are the only places that know which
transport a job uses. The transports are below what serves their requests
(launch.py, local_socket.py): they only reach it.
"""

import json
import os
import select
import subprocess
import time

from . import registry, run_token
from .channel import CALL, CANCEL, TAGGED, TEARDOWN, ForkedCalls, send_tagged, untag
from .errors import RuntimeFailure
from .inputs import DEFAULT_PATH, rank_environment
from .processes import last_line, spawn_as, which
from .wire import FRAME_ERROR, FRAME_STDOUT, READY, FrameReader, encode_request, read_chunk, widen_pipe

CONNECT_WITHIN = 60  # seconds a worker node has to accept the job's connection
HOLD_END_SECONDS = 1.0  # seconds the holds have to end after the teardown


class Lost(Exception):
    """The channel to a node is gone; the message says why."""


def ssh_command(job, node, address):
    # Host keys are pinned per node under its inventory name (HostKeyAlias),
    # whatever name or address the rank is reached by; the job's connections
    # are its own (its control directory). ssh is looked up on the system
    # PATH: the job's PATH may not have it.
    return [which("ssh", DEFAULT_PATH) or "ssh", "-F", registry.SSH_CONFIG, "-o", "HostKeyAlias=" + node,
            "-o", "ControlPath=%s/%%C" % registry.control_dir(job), "root@" + address]


class SshTransport:
    """A worker's node, over ssh with the cluster key."""

    def __init__(self, spec, rank):
        self.spec, self.node, self.address = spec, rank.node, rank.address
        self.proc = None  # the hold session (open .. close)
        self.frames = FrameReader()

    def command(self, request, fresh=False):
        """ssh through the job's ControlMaster, or with `fresh` over a
        connection of its own (teardown: the master may be gone)."""
        fresh_options = ["-o", "ControlMaster=no", "-o", "ControlPath=none"] if fresh else []
        return ssh_command(self.spec.job, self.node, self.address) + fresh_options + [
            "-T", encode_request(run_token.with_token(self.spec.job, request))]

    def open(self, user, agent=False):
        """Start the job's ControlMaster to the node with its first session,
        the `hold` (the job's lifeline to the node and its channel; with
        `agent`, the head's, it also starts the node's agent where the job
        runs in its image: worker_agent.py). Its answer is awaited by
        open_transports."""
        request = {"job": self.spec.job, "run": self.spec.run, "hold": True}
        if agent:
            request["agent"] = True
        hold = encode_request(run_token.with_token(self.spec.job, request))
        # The master is this process itself (not persisted in the
        # background): the teardown spares it by its pid while it kills
        # the job's processes on the head, and asks the node over it.
        argv = ssh_command(self.spec.job, self.node, self.address) + ["-M", "-o", "ControlPersist=no", "-T", hold]
        self.proc = spawn_as(user, argv, rank_environment(self.spec, self.spec.head, user),
                             "/", subprocess.PIPE, subprocess.PIPE, subprocess.PIPE)
        widen_pipe(self.proc.stdout.fileno())  # forwarded output moves in large chunks
        return self.proc.stdout.fileno()

    def opened(self, data):
        """None while the hold's answer is incomplete, True once it is in
        place, else why it failed."""
        answer = []
        for frame in self.frames.feed(data):
            answer.append(frame)
            if frame == (FRAME_STDOUT, READY):
                return True
        if data and not answer:
            return None
        for kind, payload in answer:
            if kind == FRAME_ERROR:
                return payload.decode(errors="replace")
        try:
            _unused, err = self.proc.communicate(timeout=5)  # closes its stdin: the lifeline
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _unused, err = self.proc.communicate()
        return last_line(err) or "ssh exited with status %d" % self.proc.returncode

    def channel(self):
        return SshChannel(self)

    def pids(self):
        """The processes of the job's connection to the node (its master)."""
        return {self.proc.pid} if self.proc is not None else set()

    def send_teardown(self, request):
        """Ask the node for the job's teardown over the hold (channel.py's
        TEARDOWN; the head's agent is stopped); returns the fd its answer
        comes on, or None when the hold is gone or not taking it now."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        into = self.proc.stdin.fileno()
        os.set_blocking(into, False)  # a node that reads nothing never holds the teardown up
        try:
            send_tagged(into, 0, TEARDOWN, json.dumps(request).encode())  # under PIPE_BUF: whole or not at all
        except BlockingIOError:
            return None
        return self.proc.stdout.fileno()

    def close(self):
        """End the hold after the teardown: its stdin closed, the node ends
        it (close_transports waits for that)."""
        if self.proc is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


class SshChannel:
    """The head's end of a worker node's channel: the hold session."""

    def __init__(self, transport):
        self.transport = transport
        self.proc = transport.proc
        self.frames = transport.frames  # what followed READY
        self.into = self.proc.stdin.fileno()
        self.out = self.proc.stdout.fileno()

    def fds(self):
        return [self.out]

    def start(self, call_id, request):
        self._send(call_id, CALL, json.dumps(request).encode())

    def cancel(self, call_id):
        self._send(call_id, CANCEL)

    def _send(self, call_id, kind, payload=b""):
        try:
            send_tagged(self.into, call_id, kind, payload)
        except OSError:
            pass  # the channel is gone: read() says so

    def read(self, fd):
        data = read_chunk(fd)
        if not data:
            raise Lost(self.why_lost())
        return [untag(payload) for kind, payload in self.frames.feed(data) if kind == TAGGED]

    def why_lost(self):
        err = b""
        stderr = self.proc.stderr.fileno()
        while select.select([stderr], [], [], 0)[0]:
            chunk = os.read(stderr, 1 << 16)
            if not chunk:
                break
            err = (err + chunk)[-4096:]
        status = self.proc.poll()
        if status is None:
            time.sleep(0.1)
            status = self.proc.poll()
        return last_line(err) or "ssh exited with status %s" % (
            status if status is not None else "unknown")


class LocalTransport:
    """This node, in local mode: every rank is on the head."""

    proc = None  # no hold: the calls are forked here

    def __init__(self, spec, rank):
        self.spec = spec
        self.user = None

    def command(self, request, fresh=False):
        return registry.runtime_command("connect", self.spec.job, encode_request(request))

    def open(self, user, agent=False):
        self.user = user
        return None  # in place at once: the supervisor started the launch socket

    def pids(self):
        return set()

    def send_teardown(self, request):
        return None  # local mode has no other node

    def channel(self):
        # Here, not at the top: the Python wrapper, which imports this
        # module for every call, need not load what runs a call.
        from .rank_call import serve_call
        node = registry.this_node(self.spec.job)
        return ForkedCalls(lambda request: serve_call(self.spec, node, request, 1, self.user))

    def close(self):
        """Nothing: the supervisor stops the launch socket."""


def transport_for(spec, rank):
    """The transport that reaches the node of `rank`."""
    return LocalTransport(spec, rank) if spec.local else SshTransport(spec, rank)


def open_transports(spec, user, nodes, agents=False):
    """Open the transport of every node of `nodes` ({node: a rank on it})
    at job start, in parallel; returns {node: transport}. A node we cannot
    reach fails the job now, with the reason. In local mode every rank is on
    this node: one local transport. `agents`: the head's transports, whose
    holds start the nodes' agents."""
    if spec.local:
        nodes = {spec.head.node: spec.head}
    opened = {node: transport_for(spec, rank) for node, rank in nodes.items()}
    waiting = {}
    for node, transport in opened.items():
        fd = transport.open(user, agents)
        if fd is not None:
            waiting[fd] = (nodes[node], transport)
    errors = []
    deadline = time.monotonic() + CONNECT_WITHIN
    while waiting:
        left = deadline - time.monotonic()
        ready = select.select(list(waiting), [], [], max(0, left))[0] if left > 0 else []
        if not ready:
            for rank, _unused in waiting.values():
                errors.append("cannot connect to node %s (%s) for rank %s: no connection within %d s" % (
                    rank.node, rank.address, rank.name, CONNECT_WITHIN))
            break
        for fd in ready:
            rank, transport = waiting[fd]
            answer = transport.opened(os.read(fd, 1 << 16))
            if answer is None:
                continue
            del waiting[fd]
            if answer is not True:
                errors.append("cannot connect to node %s (%s) for rank %s: %s" % (
                    rank.node, rank.address, rank.name, answer))
    if errors:
        raise RuntimeFailure("; ".join(errors))
    return opened


def close_transports(transports, within=HOLD_END_SECONDS):
    """End the holds of `transports` ({node: transport}) after the job's
    teardown: each one's node ends it once its stdin is closed; one still
    there after `within` seconds is killed."""
    for transport in transports.values():
        transport.close()
    deadline = time.monotonic() + within
    for transport in transports.values():
        proc = transport.proc
        if proc is None:
            continue
        try:
            proc.wait(timeout=max(0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
