"""The node runtime's transfers (multinode_runtime/transfers.py, and
remote_ends.py for HTTP and S3), run for real against HTTP servers of the
test's own on this machine: the bytes arrive whole, through a temporary
name; a failure names the item, its ends and the reason, leaves nothing
behind and keeps what the destination held; timeouts and attempts;
credentials go only where they belong. (S3 against moto's server, and
everything as the job user, in tests/local.)"""

import base64
import hashlib
import http.server
import os
import pwd
import threading
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from multinode_runtime import remote_ends, transfers
from multinode_runtime.errors import RuntimeFailure

BIG = 20 * (1 << 20) + 12345  # more than a few chunks


def big_bytes():
    block = hashlib.sha256(b"fmn").digest() * 4096
    return (block * (BIG // len(block) + 1))[:BIG]


class Handler(http.server.BaseHTTPRequestHandler):
    """/big: BIG bytes; /short: says 1000 bytes, sends 10; /slow: sends a
    little then nothing; /auth: wants user:secret; /redirect: to the other
    server; /missing: 404. Records each request's headers."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.seen.append((self.path, dict(self.headers)))
        if self.path == "/big":
            data = self.server.big
            self._head(200, len(data))
            for at in range(0, len(data), 1 << 16):
                self.wfile.write(data[at:at + (1 << 16)])
        elif self.path == "/short":
            self._head(200, 1000)
            self.wfile.write(b"0123456789")
        elif self.path == "/slow":
            self._head(200, 1000)
            self.wfile.write(b"a" * 10)
            self.wfile.flush()
            time.sleep(8)
        elif self.path == "/auth":
            if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"user:secret").decode():
                self._head(401, 0)
                return
            self._head(200, 6)
            self.wfile.write(b"inside")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://localhost:%d/elsewhere" % self.server.other_port)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/elsewhere":
            self._head(200, 5)
            self.wfile.write(b"there")
        else:
            self._head(404, 0)

    def _head(self, status, length):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()


@pytest.fixture(scope="module")
def servers():
    made = []
    for _unused in range(2):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.big, server.seen = big_bytes(), []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
    made[0].other_port, made[1].other_port = made[1].server_port, made[0].server_port
    yield made
    for server in made:
        server.shutdown()
        server.server_close()


@pytest.fixture
def url(servers):
    servers[0].seen.clear()
    servers[1].seen.clear()
    return lambda path: "http://127.0.0.1:%d%s" % (servers[0].server_port, path)


def me():
    return pwd.getpwuid(os.getuid()).pw_name


def request(root, source, destination, direction="ingress", **more):
    item = {"field": "volumes.data.%s[0]" % direction, "source": source, "destination": destination}
    item.update({key: more.pop(key) for key in ("timeout_seconds", "attempts") if key in more})
    return dict({"run": "r1", "volume_root": str(root), "user": me(), "volume": "data",
                 "store": "ephemeral", "direction": direction, "item": item}, **more)


def volume(root):
    return root / "ephemeral" / "r1" / "data"


def listing(directory):
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def failure(call, *args):
    with pytest.raises(RuntimeFailure) as info:
        call(*args)
    return str(info.value)


def test_a_large_file_streams_into_the_volume_whole_with_progress(tmp_path, url, monkeypatch):
    monkeypatch.setattr(transfers, "PROGRESS_SECONDS", 0)  # every chunk: the lines are counted
    monkeypatch.setattr(transfers, "CHUNK", 1 << 20)
    said = []
    answer = transfers.transfer(request(tmp_path, url("/big"), "file://case/in/big.bin"), said.append)
    data = (volume(tmp_path) / "case" / "in" / "big.bin").read_bytes()
    assert data == big_bytes()
    assert (answer["bytes"], answer["attempts"], answer["changed"]) == (BIG, 1, True)
    assert listing(volume(tmp_path)) == ["case", "case/in", "case/in/big.bin"]
    # Read and written a chunk at a time: a line per chunk, the last says the whole.
    assert len(said) >= BIG >> 20
    assert said[-1].startswith("volumes.data.ingress[0]: 20.0 MiB of 20.0 MiB (99%)") or \
        said[-1].startswith("volumes.data.ingress[0]: 20.0 MiB of 20.0 MiB (100%)")
    assert oct(os.stat(volume(tmp_path)).st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("path, reason", [
    ("/missing", "HTTP 404 Not Found"),
    ("/short", "the source ended after 10 of its 1000 bytes"),
])
def test_a_failed_source_leaves_nothing_and_keeps_what_was_there(tmp_path, url, path, reason):
    """The destination's old file stays as it was; no temporary file is left."""
    transfers.transfer(request(tmp_path, "file://x", "file://in.dat", contents="the old file\n"))
    message = failure(transfers.transfer, request(tmp_path, url(path), "file://in.dat"))
    assert message == "volumes.data.ingress[0]: %s -> file://in.dat: %s" % (url(path), reason)
    assert listing(volume(tmp_path)) == ["in.dat"]
    assert (volume(tmp_path) / "in.dat").read_text() == "the old file\n"


def test_an_unreachable_source_is_named_with_the_reason(tmp_path):
    message = failure(transfers.transfer, request(tmp_path, "http://127.0.0.1:9/x", "file://x"))
    assert message == "volumes.data.ingress[0]: http://127.0.0.1:9/x -> file://x: cannot connect to 127.0.0.1:9: " \
        "connection refused"
    message = failure(transfers.transfer, request(tmp_path, "https://no-such-host.invalid/x", "file://x"))
    assert message.startswith("volumes.data.ingress[0]: https://no-such-host.invalid/x -> file://x: cannot resolve "
                              "the host no-such-host.invalid")
    assert listing(volume(tmp_path)) == []


def test_the_timeout_ends_an_attempt_that_waits_and_the_attempts_are_counted(tmp_path, url, monkeypatch):
    monkeypatch.setattr(transfers, "RETRY_PAUSE", 0)
    said = []
    started = time.monotonic()
    message = failure(transfers.transfer, request(tmp_path, url("/slow"), "file://slow.dat", timeout_seconds=1,
                                                  attempts=2), said.append)
    assert time.monotonic() - started < 6  # two attempts of 1 s, not the server's 8 s each
    assert message == "volumes.data.ingress[0]: %s -> file://slow.dat: timed out after 1s (its " \
        "policy.timeout.execute) (2 attempts)" % url("/slow")
    assert said == ["volumes.data.ingress[0]: attempt 1 of 2 failed: timed out after 1s (its "
                    "policy.timeout.execute); trying again"]
    assert listing(volume(tmp_path)) == []


def test_basic_credentials_go_to_the_source_and_nowhere_else(tmp_path, url, servers):
    credentials = {"username": "user", "password": "secret"}
    transfers.transfer(request(tmp_path, url("/auth"), "file://a", credentials=credentials))
    assert (volume(tmp_path) / "a").read_bytes() == b"inside"
    message = failure(transfers.transfer, request(tmp_path, url("/auth"), "file://b"))
    assert message.endswith("HTTP 401 Unauthorized")
    message = failure(transfers.transfer, request(tmp_path, url("/auth"), "file://b",
                                                  credentials={"username": "user", "password": "wrong-pw"}))
    assert message.endswith("HTTP 401 Unauthorized") and "wrong-pw" not in message
    # A redirect to another host does not take the credentials along.
    transfers.transfer(request(tmp_path, url("/redirect"), "file://c", credentials=credentials))
    assert (volume(tmp_path) / "c").read_bytes() == b"there"
    (path, headers), = servers[1].seen
    assert path == "/elsewhere" and "Authorization" not in headers


def test_a_files_entry_and_what_the_destination_cannot_be(tmp_path):
    transfers.transfer(request(tmp_path, "file://conf", "file://etc/app.conf", contents="a = 1\n"))
    assert (volume(tmp_path) / "etc" / "app.conf").read_text() == "a = 1\n"
    message = failure(transfers.transfer, request(tmp_path, "file://conf", "file://etc", contents="x"))
    assert message == "volumes.data.ingress[0]: file://conf -> file://etc: etc is a directory in the volume"
    message = failure(transfers.transfer, request(tmp_path, "file://conf", "file://etc/app.conf/x", contents="x"))
    assert message.startswith("volumes.data.ingress[0]: file://conf -> file://etc/app.conf/x: cannot make the "
                              "directory etc/app.conf in the volume")
    assert listing(volume(tmp_path)) == ["etc", "etc/app.conf"]


@pytest.mark.parametrize("destination", ["file://../x", "file:///../x", "file:////etc/x", "file://a/../../x",
                                         "file://", "file:///", "file://d/", "file:///d/"])
def test_a_path_out_of_the_volume_is_refused_by_the_node_too(tmp_path, destination):
    message = failure(transfers.transfer, request(tmp_path, "file://conf", destination, contents="x"))
    assert message == "%r is not a path inside the volume (from its root, without '..', naming a file)" % destination
    assert not (tmp_path / "ephemeral").exists()


def test_a_path_from_the_volumes_root_lands_in_the_volume(tmp_path):
    """file:///PATH, as the vendor writes it: PATH from the volume's root."""
    transfers.transfer(request(tmp_path, "file://conf", "file:///reference.fa", contents="ACGT\n"))
    transfers.transfer(request(tmp_path, "file://conf", "file:///etc/passwd", contents="not the host's\n"))
    assert (volume(tmp_path) / "reference.fa").read_text() == "ACGT\n"
    assert (volume(tmp_path) / "etc" / "passwd").read_text() == "not the host's\n"
    assert listing(volume(tmp_path)) == ["etc", "etc/passwd", "reference.fa"]


def test_egress_of_what_the_volume_lacks_names_it(tmp_path):
    message = failure(transfers.transfer, request(tmp_path, "file://out.csv", "s3://bucket/out.csv", "egress"))
    assert message == ("volumes.data.egress[0]: file://out.csv -> s3://bucket/out.csv: volume data has no "
                       "directory on %s (no job of the run made it)" % os.uname().nodename)
    volume(tmp_path).mkdir(parents=True)
    message = failure(transfers.transfer, request(tmp_path, "file://out.csv", "s3://bucket/out.csv", "egress",
                                                  s3_endpoint_url="http://127.0.0.1:9"))
    assert message == ("volumes.data.egress[0]: file://out.csv -> s3://bucket/out.csv: out.csv: no such file in "
                       "the volume")


def test_the_other_hosts_leave_a_shared_volume_root_to_the_first(tmp_path, url):
    answer = transfers.transfer(request(tmp_path, url("/big"), "file://big", first=False, sharing="shared"))
    assert answer == {"changed": False, "skipped": "the volume root is shared storage: the first host copies it"}
    assert not (tmp_path / "ephemeral").exists()
    answer = transfers.transfer(request(tmp_path, "file://conf", "file://c", contents="c", first=False,
                                        sharing="node-local"))
    assert answer["changed"] is True


def test_pieces_of_a_volumes_file_for_the_controller(tmp_path):
    transfers.transfer(request(tmp_path, "file://conf", "file://out/result.txt", contents="0123456789"))
    ask = dict(run="r1", volume_root=str(tmp_path), user=me(), volume="data", store="ephemeral",
               path="out/result.txt")
    first = transfers.read_piece(dict(ask, offset=0, length=4))
    rest = transfers.read_piece(dict(ask, offset=4, length=100))
    assert base64.b64decode(first["data"]) + base64.b64decode(rest["data"]) == b"0123456789"
    assert first["size"] == rest["size"] == 10 and first["identity"] == rest["identity"]
    assert failure(transfers.read_piece, dict(ask, path="../../etc/passwd")) == (
        "'file://../../etc/passwd' is not a path inside the volume (from its root, without '..', naming a file)")
    assert failure(transfers.read_piece, dict(ask, path="out")) == "out is a directory in the volume; egress " \
        "copies files"
    assert failure(transfers.read_piece, dict(ask, length=transfers.PIECE_MAX + 1)).startswith("volume-read: offset")


def test_what_s3_says_is_told_as_its_code_message_and_status():
    def client_error(code, message, status):
        error = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return ClientError(error, "GetObject")
    endpoint = "http://s3.example:9000"
    assert remote_ends.s3_reason(client_error("NoSuchKey", "The specified key does not exist.", 404), endpoint) == \
        "S3 NoSuchKey: The specified key does not exist. (HTTP 404)"
    assert remote_ends.s3_reason(client_error("403", "Forbidden", 403), endpoint) == "S3 HTTP 403 Forbidden"
    unreachable = EndpointConnectionError(endpoint_url=endpoint, error="<conn object>: Failed to establish a new "
                                          "connection: [Errno 111] Connection refused")
    assert remote_ends.s3_reason(unreachable, endpoint) == \
        "cannot reach the S3 endpoint http://s3.example:9000: Connection refused"


def test_a_uri_in_a_message_has_no_user_or_password():
    assert transfers.shown("https://user:pw@example.org/a?b") == "https://example.org/a?b"
    assert transfers.shown("https://example.org/a@b") == "https://example.org/a@b"
    assert transfers.shown("s3://bucket/key") == "s3://bucket/key"
    assert transfers.size_text(5) == "5 bytes" and transfers.size_text(3 << 20) == "3.0 MiB"
