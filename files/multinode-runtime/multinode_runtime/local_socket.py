"""Local mode: the head's launch socket stands in for sshd.

In local mode every rank runs on this node, and no sshd is needed: the head
supervisor (root) listens on `launch.sock` in the job's directory, which
only the job user may connect to, and serves each connection like sshd's
forced command would (`serve_launch`, in a child of its own), for its own
job and run only, and only to processes of that job (another job's
processes run as the same user). The wrapper side (`connect`) behaves like
`ssh -T HOST REQUEST`.
"""

import os
import select
import signal
import socket
import struct
import time

from . import registry
from .errors import RuntimeFailure
from .launch import serve_launch
from .processes import process_in_namespaces, recorded_namespaces
from .wire import FRAME_ERROR, FRAME_EXIT, parse_launch_request, send_frame, write_all

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
REQUEST_WITHIN = 30  # seconds a connection has to send its request line


def connection_limit(spec):
    """How many connections the launch socket serves at once (each is a
    root process): a few per rank, as its wrapper calls are; more wait in
    the listen backlog, and a client's connect then waits too."""
    return 32 + 4 * len(spec.ranks)


def start_local_launcher(spec, user):
    """Listen on the job's launch socket and serve it in a forked process;
    returns that process's pid."""
    path = registry.job_path(spec.job, registry.LOCAL_SOCKET)
    if os.path.lexists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, 0o600)
    server.listen(64)
    pid = os.fork()
    if pid:
        server.close()
        return pid
    status = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        server.settimeout(0.5)
        limit, serving = connection_limit(spec), set()
        while True:
            conn = None
            if len(serving) < limit:
                try:
                    conn, _unused = server.accept()
                except socket.timeout:
                    pass
            else:
                time.sleep(0.05)
            if conn is not None:
                child = os.fork()
                if child == 0:
                    server.close()
                    os._exit(serve_local_connection(conn, spec, user))
                serving.add(child)
                conn.close()
            try:
                while True:
                    ended, _unused = os.waitpid(-1, os.WNOHANG)
                    if not ended:
                        break
                    serving.discard(ended)
            except ChildProcessError:
                serving.clear()
    finally:
        os._exit(status)


def serve_local_connection(conn, spec, user):
    """One connection to the launch socket: check the peer, read the request
    line, then serve it with the connection as stdin and stdout."""
    pid, uid, _unused = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid not in (0, user.pw_uid):
        return 1
    # A client that connects and says nothing holds no place for long.
    conn.settimeout(REQUEST_WITHIN)
    line = b""
    try:
        while not line.endswith(b"\n") and len(line) < 1 << 20:
            byte = conn.recv(1)  # byte by byte: what follows is the lifeline
            if not byte:
                return 1
            line += byte
    except socket.timeout:
        return 1
    conn.settimeout(None)
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    conn.close()
    request = line.decode(errors="replace").strip()
    refused = refusal(spec, user, pid, uid, request)
    if refused:
        send_frame(1, FRAME_ERROR, refused.encode())
        send_frame(1, FRAME_EXIT, b"255")
        return 0
    return serve_launch(request)


def refusal(spec, user, pid, uid, original):
    """Why this socket does not serve a request, or None: it names another
    job or run, or comes from a process (of the job user) that is not one
    of this job's."""
    try:
        request = parse_launch_request(original)
    except RuntimeFailure:
        return None  # serve_launch answers it as sshd's launcher would
    if request["job"] != spec.job or request.get("run", spec.run) != spec.run:
        return "the launch socket of job %s (run %s) serves that run only, not job %s%s" % (
            spec.job, spec.run or "(no id)", request["job"],
            " (run %s)" % request["run"] if "run" in request else "")
    if uid != 0 and not process_in_namespaces(pid, recorded_namespaces(spec.job), user):
        return "the launch socket of job %s serves the processes of that job only (process %d is not one)" % (
            spec.job, pid)
    return None


def connect(job, request):
    """`connect JOB REQUEST` (job user, local mode): ssh's part of a wrapper
    call: send REQUEST to the job's launch socket, then copy our stdin to it
    and its replies to our stdout until the launcher closes it."""
    path = registry.job_path(job, registry.LOCAL_SOCKET)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        raise RuntimeFailure("cannot reach the local launcher of job %s at %s: %s"
                             % (job, path, exc.strerror)) from None
    conn.sendall(request.encode() + b"\n")
    watched = [0, conn.fileno()]
    while conn.fileno() in watched:
        for fd in select.select(watched, [], [])[0]:
            if fd == 0:
                data = os.read(0, 1 << 16)
                if data:
                    conn.sendall(data)
                else:
                    conn.shutdown(socket.SHUT_WR)  # the lifeline ends
                    watched.remove(0)
            else:
                data = conn.recv(1 << 16)
                if not data:
                    watched.remove(fd)
                else:
                    write_all(1, data)
    return 0
