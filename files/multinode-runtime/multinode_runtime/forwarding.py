"""Forwarded output of the head agent's calls (MULTINODE_WRAPPER_FORWARD_STREAMS=1).

The agent writes a call's forwarded lines straight into its client's stdout
and stderr, opened again through /proc/<client>/fd/{1,2}, so they cross no
process of their own on the head: what the client's fd is (the job log,
a pipe to mpirun, a terminal) gets them as the Python wrapper would write
them, whole lines in one write(2) each (wire.LineWriter). The agent never
waits for a slow reader: each output keeps a queue that is written when its
fd takes more; while one of a node's calls has more than QUEUE_LIMIT
queued, the agent stops reading that node's channel (agent.py), so ssh's
flow control holds the worker's commands back.
"""

import collections
import contextlib
import os
import select
import stat

from .wire import LineWriter

QUEUE_LIMIT = 8 << 20  # bytes queued for one output before its node's channel waits


def fd_flags(pid, fd):
    """The open flags of fd `fd` of process `pid` (its fdinfo)."""
    with open("/proc/%d/fdinfo/%d" % (pid, fd)) as handle:
        for line in handle:
            if line.startswith("flags:"):
                return int(line.split()[1], 8)
    raise OSError("no flags in the fdinfo of %d/%d" % (pid, fd))


@contextlib.contextmanager
def acting_as(user):
    """The job user's rights, for its client's /proc entries (root in a
    container may not look into another user's process: no CAP_SYS_PTRACE)."""
    if os.geteuid() != 0 or user.pw_uid == 0:
        yield
        return
    os.setegid(user.pw_gid)
    os.seteuid(user.pw_uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def open_client_outputs(pid, pidfd, user, job_log, job_log_pipes=()):
    """[Output of the client's stdout, of its stderr], or None when they
    cannot be written from here and the Python wrapper relays the call
    instead: a socket (it cannot be opened again), an fd opened only for
    reading, a regular file opened without O_APPEND (its offset would not be
    shared with the client's fd). Each is opened again through /proc as the
    job user; the job log, which is root's, is opened by its path, appending
    as the client's fd does; so is it for a pipe of `job_log_pipes` ((st_dev,
    st_ino) of rank 0's stdout and stderr, relayed into the job log as
    whole lines): the lines go beside rank 0's, never into the middle of
    one. The client's pidfd tells that `pid` is still the client."""
    fds = []
    try:
        for number in (1, 2):
            with acting_as(user):
                flags = fd_flags(pid, number)
                if flags & os.O_ACCMODE == os.O_RDONLY:
                    raise OSError("fd %d is not open for writing" % number)
                info = os.stat("/proc/%d/fd/%d" % (pid, number))
                mode = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (flags & os.O_APPEND)
                relayed = (info.st_dev, info.st_ino) in job_log_pipes
                if stat.S_ISREG(info.st_mode) and not flags & os.O_APPEND:
                    raise OSError("fd %d is a file not opened for appending" % number)
                if not relayed:
                    try:
                        fds.append(os.open("/proc/%d/fd/%d" % (pid, number), mode))
                        continue
                    except PermissionError:
                        pass
            log = os.stat(job_log)
            if relayed:
                mode |= os.O_APPEND
            elif not (flags & os.O_APPEND and (info.st_dev, info.st_ino) == (log.st_dev, log.st_ino)):
                raise OSError("fd %d cannot be opened again" % number)
            fds.append(os.open(job_log, mode))
        if select.select([pidfd], [], [], 0)[0]:
            raise OSError("the client ended")
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        return None
    return [Output(fd) for fd in fds]


class Output:
    """One output of a forwarded call: its whole lines, queued until its fd
    takes them (the fd is non-blocking)."""

    def __init__(self, fd):
        self.fd = fd
        self.queue = collections.deque()
        self.queued = 0  # bytes
        self.lines = LineWriter(fd, self.enqueue)

    def enqueue(self, data):
        if data and self.fd is not None:
            self.queue.append(memoryview(data))
            self.queued += len(data)

    def feed(self, data):
        """A chunk of the call's stream: its whole lines go out (or queue)."""
        self.lines.feed(data)
        self.write_some()

    def end(self):
        """The stream ended: its unterminated tail goes out too."""
        self.lines.flush()
        self.write_some()

    def write_some(self):
        """Write as much of the queue as the fd takes now. A reader that is
        gone gets nothing more (as write_all)."""
        while self.queue:
            try:
                written = os.write(self.fd, self.queue[0])
            except BlockingIOError:
                return
            except OSError:
                self.queue.clear()
                self.queued = 0
                return
            self.queued -= written
            if written < len(self.queue[0]):
                self.queue[0] = self.queue[0][written:]
                return  # full for now
            self.queue.popleft()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.queue.clear()
            self.queued = 0
