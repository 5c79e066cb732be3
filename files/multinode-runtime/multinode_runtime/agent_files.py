"""The agent directory of a job (registry.AGENT_DIR: the job user's, mode
0700), through which the head's agent (agent.py) and its client, plain sh
(files/ssh-wrapper), talk; and the pool of reply FIFOs in it. Its files:

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

Everything in the directory but the pool's FIFOs is written by the job
user: the agent opens a file there only if it is the job user's (or root's)
and of the kind it expects, never through a link, never waiting on a FIFO
(open_own).
"""

import os
import stat

from . import registry

MAX_ARGV_BYTES = 1 << 20
POOL_MIN, POOL_MAX = 16, 256  # reply FIFOs made ahead: one per slot of the job's ranks, within these


class AgentFiles:
    """The files of one job's agent directory."""

    def __init__(self, spec, user):
        self.user = user
        self.directory = registry.job_path(spec.job, registry.AGENT_DIR)
        self.requests_path = os.path.join(self.directory, registry.AGENT_REQUESTS)
        self.pool_size = max(POOL_MIN, min(POOL_MAX, sum(rank.slots for rank in spec.ranks)))
        self.pool = []  # slot: the agent's fd of its reply FIFO (open_pool)

    # -- a client's files --------------------------------------------------

    def open_own(self, name, is_kind, flags):
        """An fd of the client's file `name` in the agent directory, if it
        is of the right kind and the job user's (never a link to something
        else)."""
        return registry.open_owned(os.path.join(self.directory, name), flags, (self.user.pw_uid, 0), is_kind)

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

    def take_argv(self, pid):
        """The arguments in the client's own argv file (b"": none), which
        goes: the call is taken (Agent.ended tells so)."""
        data = b""
        fd = self.open_own("%d.argv" % pid, stat.S_ISREG, os.O_RDONLY)
        if fd is not None:
            with os.fdopen(fd, "rb", buffering=0) as handle:
                data = handle.read(MAX_ARGV_BYTES + 1)
        self.unlink("%d.argv" % pid)
        return data

    def claimant(self, name):
        """The pid in claim file `name`, or None (none written yet)."""
        pid = (self.read_own(name, 32) or b"").split(b"\0", 1)[0]
        return int(pid) if pid.isdigit() else None

    def unlink_call_files(self, pid):
        self.unlink("%d.reply" % pid)
        self.unlink("%d.argv" % pid)

    def unlink(self, name):
        """Remove `name` from the agent directory, if it is there."""
        try:
            os.unlink(os.path.join(self.directory, name))
        except OSError:
            pass

    # -- the pool of reply FIFOs -------------------------------------------

    def slot_name(self, slot, kind):
        return "pool-%d.%s" % (slot, kind)

    def slot_path(self, slot, kind):
        return os.path.join(self.directory, self.slot_name(slot, kind))

    def make_pool(self):
        """The pool's FIFOs, the job user's (the supervisor, before the
        directory is the job user's: no race)."""
        for slot in range(self.pool_size):
            path = self.slot_path(slot, "reply")
            os.mkfifo(path, 0o600)
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def open_pool(self):
        """Open the pool's FIFOs, here in the agent: only a client holds one
        open once the agent is gone (Agent.ended)."""
        for slot in range(self.pool_size):
            fd = self.open_own(self.slot_name(slot, "reply"), stat.S_ISFIFO, os.O_RDWR)
            if fd is None:
                break  # the pool ends here
            self.pool.append(fd)

    def take_claim(self, pid, slot):
        """The arguments in the slot's claim, which is cut to the pid: the
        call is taken (Agent.ended tells so). None if it is not pid's claim."""
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

    def release(self, slot):
        """The slot's client ended: its FIFO emptied (an answer it did not
        read), then its claim removed, so that the next client claims it."""
        try:
            while os.read(self.pool[slot], 1 << 16):
                pass
        except BlockingIOError:
            pass
        self.unlink(self.slot_name(slot, "claim"))

    def reclaim(self, busy, alive):
        """Free the slots claimed by clients that died before they asked (of
        the slots not in `busy`, those of the calls in flight): the pid in
        the claim is gone (`alive(pid)` says not), or no pid was written and
        no process holds the claim open (its client died between the claim
        and the write)."""
        for slot in range(len(self.pool)):
            if slot in busy:
                continue
            name = self.slot_name(slot, "claim")
            data = self.read_own(name, 32)
            if data is None:
                continue  # free
            pid = data.split(b"\0", 1)[0]
            if pid.isdigit():
                if not alive(int(pid)):
                    self.release(slot)
            elif not held_open(self.slot_path(slot, "claim")) and self.read_own(name, 32) == b"":
                self.release(slot)


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
