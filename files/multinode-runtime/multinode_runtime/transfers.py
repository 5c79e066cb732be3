"""Data movement on a node: one ingress or egress item of a volume
(`transfer`), and a piece of a volume's file for the controller, which
copies a file:// egress destination home (`read_piece`).

Root makes the volume's directory as a job's registration does
(volumes.make_volume_dir); everything else runs as the job user
(processes.run_as): the volume is the job user's, who may have put links
in it, so root never opens a path in it. The job user's rights are all a
transfer has on the node: it can write or read nothing the job could not.

An item streams in chunks (bounded memory, whatever the size). Into a
volume, it is written under a temporary name in the destination's
directory and renamed over the destination once complete: a failed or
interrupted item leaves nothing (the temporary file is removed), and an
existing file is replaced only by a whole new one. Into S3 an object
appears only when complete (a multipart upload that fails is aborted).

The ends off the node, HTTP(S) and S3, are remote_ends.py: with the
credentials of the item's secret only, never the node's or the caller's
(AWS_* variables and ~/.aws are not read); without a secret, requests are
anonymous (public buckets). Each attempt has the item's timeout; a
connection silent for remote_ends.IDLE_SECONDS fails too. Progress is
reported every PROGRESS_SECONDS; a failure names the item, its ends and
the reason.
"""

import base64
import io
import os
import posixpath
import random
import signal
import socket
import stat
import threading
import time

from . import volumes
from .errors import RuntimeFailure, TransferError
from .processes import run_as
from .remote_ends import http_reader, s3_client, s3_reader, s3_upload

CHUNK = 1 << 20  # bytes read and written at a time
PIECE_MAX = 8 << 20  # the most read_piece returns at once (base64 in JSON)
PROGRESS_SECONDS = 5
RETRY_PAUSE = 2  # seconds between attempts
FILE_PREFIX, S3_PREFIX = "file://", "s3://"
HTTP_PREFIXES = ("https://", "http://")


class _Deadline(BaseException):
    """The item's timeout fired (a BaseException: no library's `except
    Exception` swallows it)."""


# -- requests, checked ---------------------------------------------------------

def volume_path(uri):
    """The relative path of `file://PATH` inside a volume, a leading / being
    the volume's root (checked again: the controller checked it, but a node
    trusts no request)."""
    if not uri.startswith(FILE_PREFIX):
        raise RuntimeFailure("%r is not a file:// path in the volume" % uri)
    path = uri[len(FILE_PREFIX):]
    if path.startswith("/"):
        path = path[1:]  # file:///PATH: from the volume's root
    if not path or path.startswith("/") or ".." in path.split("/") or path.endswith("/") \
            or "\0" in path or posixpath.normpath(path) == ".":
        raise RuntimeFailure("%r is not a path inside the volume (from its root, without '..', naming a file)"
                             % uri)
    return posixpath.normpath(path)


def s3_location(uri):
    bucket, _unused, key = uri[len(S3_PREFIX):].partition("/")
    if not bucket or not key:
        raise RuntimeFailure("%r is not s3://BUCKET/KEY" % uri)
    return bucket, key


def shown(uri):
    """A URI for messages: without a user name or password in it."""
    scheme, separator, rest = uri.partition("://")
    host, slash, path = rest.partition("/")
    if not separator or "@" not in host:
        return uri
    return "%s://%s%s%s" % (scheme, host.rsplit("@", 1)[1], slash, path)


def _check_request(request):
    if not isinstance(request, dict):
        raise RuntimeFailure("transfer: stdin must be the request as a JSON mapping")
    for key in ("run", "volume_root", "user", "volume", "store", "direction", "item"):
        if not request.get(key):
            raise RuntimeFailure("transfer: the request has no %s" % key)
    item = request["item"]
    direction = request["direction"]
    if direction not in ("ingress", "egress") or not isinstance(item, dict):
        raise RuntimeFailure("transfer: malformed request (direction %r)" % direction)
    for key in ("field", "source", "destination"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise RuntimeFailure("transfer: the item has no %s" % key)
    inside = item["destination"] if direction == "ingress" else item["source"]
    volume_path(inside)
    if direction == "egress" and not item["destination"].startswith(S3_PREFIX):
        raise RuntimeFailure("transfer: egress to %r: the controller copies file:// destinations itself"
                             % item["destination"])
    credentials = request.get("credentials")
    if credentials is not None and not isinstance(credentials, dict):
        raise RuntimeFailure("transfer: the item's credentials must be a mapping")


# -- the root side -----------------------------------------------------------------

def _job_user(name):
    import pwd
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise RuntimeFailure("job user %r does not exist on %s" % (name, socket.gethostname())) from None


def transfer(request, say=print):
    """Carry out one item (`request`, the JSON the controller sends: run,
    volume_root, sharing, first, user, volume, store, direction, item,
    credentials, contents, s3_endpoint_url). `say(line)` prints each
    progress line as it comes. Returns the answer: {"changed", "bytes",
    "seconds", "attempts"}, or {"skipped": why} on a host whose shared
    storage the first host fills. RuntimeFailure names the item and why."""
    _check_request(request)
    if not request.get("first", True) and volumes.is_shared(request["volume_root"], request.get("sharing", "auto")):
        return {"changed": False, "skipped": "the volume root is shared storage: the first host copies it"}
    user = _job_user(request["user"])
    directory = volumes.store_dir(request["volume_root"], request["run"], request["volume"], request["store"])
    if request["direction"] == "ingress":
        volumes.make_volume_dir(directory, user, request["volume"])
    elif not os.path.isdir(directory):
        raise RuntimeFailure(_failure(request, "volume %s has no directory on %s (no job of the run made it)"
                                      % (request["volume"], socket.gethostname())))
    else:
        volumes.check_volume_dir(directory, user, request["volume"])
    records, failed = run_as(user, _work, directory, request)
    answer = None
    for record in records:
        if "progress" in record:
            say(record["progress"])
        elif "copied" in record:
            answer = record["copied"]
        elif "error" in record:
            raise RuntimeFailure(record["error"])
    if failed or answer is None:
        raise RuntimeFailure(_failure(request, failed or "the copy ended without a result"))
    return dict(answer, changed=True)


def _failure(request, reason, attempts=1):
    item = request["item"]
    return "%s: %s -> %s: %s%s" % (item["field"], shown(item["source"]), shown(item["destination"]), reason,
                                   " (%d attempts)" % attempts if attempts > 1 else "")


# -- the job user's side -------------------------------------------------------------

def _work(emit, directory, request):
    """As the job user: every attempt of the item, in the volume's
    directory; emits progress, then {"copied": ...} or {"error": ...}."""
    for name in [key for key in os.environ if key.startswith("AWS_")]:
        del os.environ[name]
    # boto3 reads no one's configuration files and asks no metadata service.
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                      AWS_EC2_METADATA_DISABLED="true")
    os.chdir(directory)
    item = request["item"]
    attempts = max(1, int(item.get("attempts") or 1))
    timeout = item.get("timeout_seconds")
    started = time.monotonic()
    for attempt in range(1, attempts + 1):
        progress = Progress(lambda line: emit({"progress": "%s: %s" % (item["field"], line)}))
        try:
            with _deadline(timeout):
                copied = _copy(request, progress)
        except _Deadline:
            reason = "timed out after %s (its policy.timeout.execute)" % _duration(timeout)
        except TransferError as exc:
            reason = str(exc)
        else:
            emit({"copied": {"bytes": copied, "seconds": round(time.monotonic() - started, 3),
                             "attempts": attempt}})
            return
        if attempt < attempts:
            emit({"progress": "%s: attempt %d of %d failed: %s; trying again" % (
                item["field"], attempt, attempts, reason)})
            time.sleep(RETRY_PAUSE)
    emit({"error": _failure(request, reason, attempts)})


class _deadline:
    """SIGALRM after `seconds` (None: never) raises _Deadline wherever the
    copy is, even in a read that waits."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds:
            signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc):
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)

    @staticmethod
    def _fire(signum, frame):
        raise _Deadline()


def _duration(seconds):
    return "%gs" % seconds if seconds < 60 else "%dm%02ds" % divmod(int(seconds), 60)


def _copy(request, progress):
    """One attempt; the bytes copied."""
    item, direction = request["item"], request["direction"]
    if direction == "egress":
        bucket, key = s3_location(item["destination"])
        with _open_in_volume(volume_path(item["source"])) as source:
            size = os.fstat(source.fileno()).st_size
            progress.start(size)
            s3_upload(s3_client(request), bucket, key, source, progress)
        return progress.done
    destination = volume_path(item["destination"])
    source_uri = item["source"]
    if source_uri.startswith(FILE_PREFIX):
        data = (request.get("contents") or "").encode("utf-8")
        reader, size = io.BytesIO(data), len(data)
    elif source_uri.startswith(S3_PREFIX):
        reader, size = s3_reader(s3_client(request), *s3_location(source_uri))
    elif source_uri.startswith(HTTP_PREFIXES):
        reader, size = http_reader(source_uri, request.get("credentials"))
    else:
        raise TransferError("%s is not a source this node copies from" % shown(source_uri))
    try:
        progress.start(size)
        write_file(destination, reader, progress, size)
    finally:
        reader.close()
    return progress.done


class Progress:
    """Counts the bytes of an attempt and says how far it is, at most every
    PROGRESS_SECONDS (and once at the end), through `say(line)`."""

    def __init__(self, say):
        self.say, self.size, self.done = say, None, 0
        self.lock = threading.Lock()  # an S3 upload counts from its threads

    def start(self, size):
        self.size, self.began = size, time.monotonic()
        self.last = self.began

    def add(self, count):
        with self.lock:
            self.done += count
            now = time.monotonic()
            if now - self.last >= PROGRESS_SECONDS:
                self.last = now
                self.say(self.line(now))

    def line(self, now=None):
        elapsed = max((now or time.monotonic()) - self.began, 1e-6)
        of = ""
        if self.size:
            of = " of %s (%d%%)" % (size_text(self.size), 100 * self.done // self.size)
        return "%s%s, %s/s" % (size_text(self.done), of, size_text(self.done / elapsed))


def size_text(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return ("%d %s" if unit == "bytes" else "%.1f %s") % (count, unit)
        count /= 1024.0
    return ""


# -- into and out of the volume ---------------------------------------------------------

def write_file(path, reader, progress, size=None):
    """Write what `reader` gives (read(n) until b"") at `path` (relative to
    the volume's directory, the current one), under a temporary name in its
    directory, renamed over `path` when complete (all of `size` bytes, when
    the source said how many); the temporary file is removed when anything
    fails. Parent directories are made."""
    parent, name = posixpath.split(path)
    if parent:
        try:
            os.makedirs(parent, 0o755, exist_ok=True)
        except OSError as exc:
            raise TransferError("cannot make the directory %s in the volume: %s" % (parent, exc.strerror)) from None
    temporary = posixpath.join(parent, ".%s.fuzz-part-%d-%06x" % (name[:100], os.getpid(), random.getrandbits(24)))
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise TransferError("cannot write in the volume's %s: %s" % (parent or "top directory", exc.strerror)) from None
    try:
        try:
            while True:
                chunk = reader.read(CHUNK)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
                progress.add(len(chunk))
            if size is not None and progress.done != size:
                raise TransferError("the source ended after %d of its %d bytes" % (progress.done, size))
            os.fsync(fd)
        finally:
            os.close(fd)
        if os.path.isdir(path) and not os.path.islink(path):
            raise TransferError("%s is a directory in the volume" % path)
        os.rename(temporary, path)
    except OSError as exc:
        _unlink(temporary)
        raise TransferError("writing %s in the volume: %s" % (path, exc.strerror or exc)) from None
    except BaseException:
        _unlink(temporary)
        raise


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _open_in_volume(path):
    """A regular file of the volume, opened to read; TransferError
    otherwise."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise TransferError("%s: no such file in the volume" % path) from None
    except IsADirectoryError:
        raise TransferError("%s is a directory in the volume; egress copies files" % path) from None
    except OSError as exc:
        raise TransferError("%s: cannot read it: %s" % (path, exc.strerror)) from None
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise TransferError("%s is not a regular file" % path)
    return handle


def read_piece(request):
    """As the job user: bytes `offset` to `offset + length` of the file
    `path` in a volume, with the file's size and identity (a file replaced
    or changed between pieces is noticed by the controller)."""
    if not isinstance(request, dict):
        raise RuntimeFailure("volume-read: stdin must be the request as a JSON mapping")
    for key in ("run", "volume_root", "user", "volume", "store", "path"):
        if not isinstance(request.get(key), str) or not request[key]:
            raise RuntimeFailure("volume-read: the request has no %s" % key)
    offset, length = request.get("offset", 0), request.get("length", PIECE_MAX)
    if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or not 0 < length <= PIECE_MAX:
        raise RuntimeFailure("volume-read: offset and length must be integers (length 1 to %d)" % PIECE_MAX)
    path = volume_path(FILE_PREFIX + request["path"])
    user = _job_user(request["user"])
    directory = volumes.store_dir(request["volume_root"], request["run"], request["volume"], request["store"])
    if not os.path.isdir(directory):
        raise RuntimeFailure("volume %s has no directory on %s (no job of the run made it)"
                             % (request["volume"], socket.gethostname()))
    volumes.check_volume_dir(directory, user, request["volume"])

    def piece(emit):
        os.chdir(directory)
        try:
            with _open_in_volume(path) as handle:
                info = os.fstat(handle.fileno())
                data = os.pread(handle.fileno(), length, offset)
        except TransferError as exc:
            emit({"error": str(exc)})
            return
        emit({"size": info.st_size, "identity": "%d:%d:%d" % (info.st_dev, info.st_ino, info.st_mtime_ns),
              "data": base64.b64encode(data).decode()})

    records, failed = run_as(user, piece)
    for record in records:
        if "error" in record:
            raise RuntimeFailure(record["error"])
        return record
    raise RuntimeFailure(failed or "volume-read: no answer")
