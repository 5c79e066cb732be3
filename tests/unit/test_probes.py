"""A service's network readiness probes (multinode_runtime/probes.py and
grpc_health.py), each try made for real against servers of the test's own
on this machine: http.server (HTTP, and HTTPS with a self-signed
certificate made by openssl), plain sockets, grpcio's health service, and an
HTTP/2 peer that plays frames grpcio does not send on demand (PING,
CONTINUATION, padding, RST_STREAM, GOAWAY). What a user relies on: the
verdict, and a one-line detail naming what was tried and what happened;
a try never outlasts its timeout by much, whatever the server does."""

import contextlib
import http.server
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from multinode_runtime.probes import probe_network

pytestmark = pytest.mark.timeout(30)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
UNKNOWN = health_pb2.HealthCheckResponse.UNKNOWN


@contextlib.contextmanager
def listening(backlog):
    """A TCP socket of this machine listening on a free port, accepting
    nothing by itself: (the socket, its port); closed afterwards."""
    server = socket.socket()
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(backlog)
        yield server, server.getsockname()[1]
    finally:
        server.close()


def timed(*args):
    """probe_network's answer and how long it took."""
    start = time.monotonic()
    answer = probe_network(*args)
    return answer, time.monotonic() - start


# --- HTTP and HTTPS ---------------------------------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    """/healthz: 200; /unavailable: 503; /moved: 302 to /unavailable;
    /slow: answers once the test ends; /endless: 200 with a body that does
    not end (no length, more than the probe reads, then nothing); others
    404. Records each request's path and headers (their order kept)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.items()))
        if self.path == "/healthz":
            self._answer(200)
        elif self.path == "/unavailable":
            self._answer(503)
        elif self.path == "/moved":
            self._answer(302, ("Location", "/unavailable"))
        elif self.path == "/slow":
            self.server.released.wait(10)
            self._answer(200)
        elif self.path == "/endless":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * (64 * 1024))
            self.wfile.flush()
            self.server.released.wait(10)
        else:
            self._answer(404)

    def _answer(self, status, *headers):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    tls = None  # an SSLContext: HTTPS, each connection's handshake in its own thread

    def finish_request(self, request, client_address):
        if self.tls is not None:
            request = self.tls.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass  # a probe that gave up, a client that spoke no TLS


class IPv6Server(Server):
    address_family = socket.AF_INET6


def serve(server_class=Server, host="127.0.0.1", tls=None):
    server = server_class((host, 0), Handler)
    server.tls, server.seen, server.released = tls, [], threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop(server):
    server.released.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def http_server():
    server = serve()
    yield server
    stop(server)


@pytest.fixture
def web(http_server):
    http_server.seen.clear()
    return http_server


@pytest.fixture(scope="module")
def https_server(tmp_path_factory):
    """An HTTPS server whose certificate (self-signed, for another name)
    openssl makes: a client that verified it would refuse it."""
    assert shutil.which("openssl"), "openssl is needed (scripts/setup installs it)"
    where = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(where / "key.pem"), "-out", str(where / "cert.pem"), "-days", "1",
         "-subj", "/CN=elsewhere.invalid"],
        check=True, capture_output=True, timeout=30,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(where / "cert.pem"), str(where / "key.pem"))
    server = serve(tls=context)
    yield server
    stop(server)


@pytest.fixture
def closed_port():
    """A port bound but not listening: connections to it are refused (and
    nothing else takes the port while the test runs)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def silent_port():
    """A port that accepts nothing more: its one-place accept queue is full,
    so a new connection's SYN goes unanswered."""
    with listening(0) as (_unused, port):
        filler = socket.create_connection(("127.0.0.1", port), timeout=5)
        yield port
        filler.close()


def http_get(port, path=None, **more):
    action = {"port": port, "scheme": "HTTP"}
    action.update(more)
    if path is not None:
        action["path"] = path
    return action


def test_http_get_succeeds_on_200(web):
    ok, detail = probe_network("http-get", http_get(web.server_port, "/healthz"), "127.0.0.1", 1.0)
    assert (ok, detail) == (True, "http-get http://127.0.0.1:%d/healthz: status 200" % web.server_port)
    assert [path for path, _unused in web.seen] == ["/healthz"]


def test_http_get_fails_on_503_naming_the_status(web):
    ok, detail = probe_network("http-get", http_get(web.server_port, "/unavailable"), "127.0.0.1", 1.0)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/unavailable: status 503" % web.server_port)


def test_http_get_fails_on_404(web):
    ok, detail = probe_network("http-get", http_get(web.server_port, "/nothing"), "127.0.0.1", 1.0)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/nothing: status 404" % web.server_port)


def test_http_get_takes_a_redirect_as_success_without_following_it(web):
    """302 < 400; following it would have found /unavailable's 503."""
    ok, detail = probe_network("http-get", http_get(web.server_port, "/moved"), "127.0.0.1", 1.0)
    assert (ok, detail) == (True, "http-get http://127.0.0.1:%d/moved: status 302" % web.server_port)
    assert [path for path, _unused in web.seen] == ["/moved"]


def test_http_get_gives_up_on_a_slow_server_at_its_timeout(web):
    (ok, detail), took = timed("http-get", http_get(web.server_port, "/slow"), "127.0.0.1", 0.5)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/slow: no answer within 0.5 s" % web.server_port)
    assert 0.4 < took < 3


def test_http_get_reads_only_the_start_of_an_endless_body(web):
    (ok, detail), took = timed("http-get", http_get(web.server_port, "/endless"), "127.0.0.1", 5.0)
    assert (ok, detail) == (True, "http-get http://127.0.0.1:%d/endless: status 200" % web.server_port)
    assert took < 3


def test_http_get_sends_the_probe_headers_and_a_default_host(web):
    headers = [{"name": "X-Probe-Token", "value": "t1"}, {"name": "X-Probe-Token", "value": "t2"},
               {"name": "Accept", "value": "application/json"}]
    ok, _unused = probe_network("http-get", http_get(web.server_port, "/healthz", **{"http-headers": headers}),
                                "127.0.0.1", 1.0)
    assert ok
    [(_unused, sent)] = web.seen
    assert [value for name, value in sent if name == "X-Probe-Token"] == ["t1", "t2"]
    assert [value for name, value in sent if name.lower() == "accept"] == ["application/json"]
    assert [value for name, value in sent if name.lower() == "host"] == ["127.0.0.1:%d" % web.server_port]
    assert [name for name, _unused in sent if name.lower() == "user-agent"]


def test_http_get_sends_a_host_header_given_instead_of_its_own(web):
    headers = [{"name": "Host", "value": "app.example"}]
    ok, _unused = probe_network("http-get", http_get(web.server_port, "/healthz", **{"http-headers": headers}),
                                "127.0.0.1", 1.0)
    assert ok
    [(_unused, sent)] = web.seen
    assert [value for name, value in sent if name.lower() == "host"] == ["app.example"]


def test_http_get_path_defaults_to_the_root_and_gets_its_slash(web):
    ok, detail = probe_network("http-get", http_get(web.server_port), "127.0.0.1", 1.0)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/: status 404" % web.server_port)
    ok, detail = probe_network("http-get", http_get(web.server_port, "healthz"), "127.0.0.1", 1.0)
    assert (ok, detail) == (True, "http-get http://127.0.0.1:%d/healthz: status 200" % web.server_port)
    assert [path for path, _unused in web.seen] == ["/", "/healthz"]


def test_http_get_uses_its_own_host_before_the_default(web):
    """The default host is a documentation address (RFC 5737) that nothing
    answers: the probe's own host is the one tried."""
    ok, detail = probe_network("http-get", http_get(web.server_port, "/healthz", host="127.0.0.1"),
                               "192.0.2.1", 1.0)
    assert (ok, detail) == (True, "http-get http://127.0.0.1:%d/healthz: status 200" % web.server_port)


def test_http_get_ignores_proxy_settings(web, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    ok, _unused = probe_network("http-get", http_get(web.server_port, "/healthz"), "127.0.0.1", 1.0)
    assert ok
    assert [path for path, _unused in web.seen] == ["/healthz"]


def test_http_get_on_a_closed_port_is_refused(closed_port):
    ok, detail = probe_network("http-get", http_get(closed_port, "/healthz"), "127.0.0.1", 1.0)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/healthz: connection refused" % closed_port)


def test_http_get_connect_that_hangs_ends_at_the_timeout(silent_port):
    (ok, detail), took = timed("http-get", http_get(silent_port, "/healthz"), "127.0.0.1", 0.5)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/healthz: no answer within 0.5 s" % silent_port)
    assert took < 3


def test_http_get_brackets_an_ipv6_address():
    server = serve(IPv6Server, "::1")
    try:
        ok, detail = probe_network("http-get", http_get(server.server_port, "/healthz"), "::1", 1.0)
        assert (ok, detail) == (True, "http-get http://[::1]:%d/healthz: status 200" % server.server_port)
        [(_unused, sent)] = server.seen
        assert [value for name, value in sent if name.lower() == "host"] == ["[::1]:%d" % server.server_port]
    finally:
        stop(server)


def test_http_get_refuses_a_header_that_cannot_be_sent(web):
    headers = [{"name": "X-Bad", "value": "one\r\nInjected: yes"}]
    ok, detail = probe_network("http-get", http_get(web.server_port, "/healthz", **{"http-headers": headers}),
                               "127.0.0.1", 1.0)
    assert not ok
    assert detail.startswith("http-get http://127.0.0.1:%d/healthz: cannot send the request (" % web.server_port)
    assert web.seen == []


def test_https_get_does_not_verify_the_certificate(https_server):
    action = http_get(https_server.server_port, "/healthz", scheme="HTTPS")
    ok, detail = probe_network("http-get", action, "127.0.0.1", 2.0)
    assert (ok, detail) == (True, "http-get https://127.0.0.1:%d/healthz: status 200" % https_server.server_port)


def test_https_get_fails_on_503(https_server):
    action = http_get(https_server.server_port, "/unavailable", scheme="HTTPS")
    ok, detail = probe_network("http-get", action, "127.0.0.1", 2.0)
    assert (ok, detail) == (False, "http-get https://127.0.0.1:%d/unavailable: status 503"
                            % https_server.server_port)


def test_https_get_on_a_plain_http_server_is_a_tls_failure(web):
    action = http_get(web.server_port, "/healthz", scheme="HTTPS")
    (ok, detail), took = timed("http-get", action, "127.0.0.1", 5.0)
    assert not ok
    assert detail.startswith("http-get https://127.0.0.1:%d/healthz: TLS failed (" % web.server_port)
    assert "\n" not in detail and took < 3


def test_http_get_on_an_https_server_fails_cleanly(https_server):
    (ok, detail), took = timed("http-get", http_get(https_server.server_port, "/healthz"), "127.0.0.1", 5.0)
    assert (ok, detail) == (False, "http-get http://127.0.0.1:%d/healthz: connection reset by the server"
                            % https_server.server_port)
    assert took < 3


# --- tcp-socket -------------------------------------------------------------


def test_tcp_socket_succeeds_when_a_connection_opens():
    with listening(4) as (_unused, port):
        ok, detail = probe_network("tcp-socket", {"port": port}, "127.0.0.1", 1.0)
        assert (ok, detail) == (True, "tcp-socket 127.0.0.1:%d: connected" % port)


def test_tcp_socket_on_a_closed_port_is_refused(closed_port):
    ok, detail = probe_network("tcp-socket", {"port": closed_port, "host": "127.0.0.1"}, "192.0.2.1", 1.0)
    assert (ok, detail) == (False, "tcp-socket 127.0.0.1:%d: connection refused" % closed_port)


def test_tcp_socket_ends_at_the_timeout_when_nothing_answers(silent_port):
    (ok, detail), took = timed("tcp-socket", {"port": silent_port}, "127.0.0.1", 0.5)
    assert (ok, detail) == (False, "tcp-socket 127.0.0.1:%d: no answer within 0.5 s" % silent_port)
    assert took < 3


def test_a_probe_that_cannot_be_made_says_why():
    assert probe_network("exec", {"command": ["true"]}, "127.0.0.1", 1.0) == (False, "exec: not a network probe")
    assert probe_network("tcp-socket", {"port": "http"}, "127.0.0.1", 1.0) == (
        False, "tcp-socket 127.0.0.1:http: the port is not a number")


def test_a_detail_is_one_short_line(web):
    """Whatever the probe's strings or the server's answer hold."""
    ok, detail = probe_network("grpc", {"port": web.server_port, "service": "a\nb"}, "127.0.0.1", 2.0)
    assert not ok
    assert detail.startswith('grpc 127.0.0.1:%d (service "a\\nb"): ' % web.server_port)
    garbage = socket.socket()
    garbage.bind(("127.0.0.1", 0))
    garbage.listen(1)
    port = garbage.getsockname()[1]

    def answer():
        conn, _unused = garbage.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"\x01\x02 not HTTP " * 1000 + b"\r\n")
            try:
                conn.recv(4096)  # until the client hangs up
            except OSError:
                pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        ok, detail = probe_network("http-get", {"port": port, "scheme": "HTTP"}, "127.0.0.1", 2.0)
    finally:
        thread.join(5)
        garbage.close()
    assert not ok
    assert detail.startswith("http-get http://127.0.0.1:%d/: not an HTTP answer (BadStatusLine: " % port)
    assert detail.isprintable() and len(detail) <= 300


# --- grpc against grpcio's health service -----------------------------------


@pytest.fixture(scope="module")
def grpc_health_server():
    """grpcio's standard health service; tests set the statuses. Listens on
    127.0.0.1 and ::1."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.port = server.add_insecure_port("127.0.0.1:0")
    server.port6 = server.add_insecure_port("[::1]:%d" % server.port)
    server.set = servicer.set
    server.start()
    yield server
    server.stop(0)


def test_grpc_serving_server_succeeds(grpc_health_server):
    grpc_health_server.set("", SERVING)
    ok, detail = probe_network("grpc", {"port": grpc_health_server.port}, "127.0.0.1", 2.0)
    assert (ok, detail) == (True, "grpc 127.0.0.1:%d: SERVING" % grpc_health_server.port)


def test_grpc_asks_for_the_named_service(grpc_health_server):
    grpc_health_server.set("", NOT_SERVING)
    grpc_health_server.set("api", SERVING)
    ok, detail = probe_network("grpc", {"port": grpc_health_server.port, "service": "api"}, "127.0.0.1", 2.0)
    assert (ok, detail) == (True, 'grpc 127.0.0.1:%d (service "api"): SERVING' % grpc_health_server.port)


def test_grpc_not_serving_fails_and_follows_a_change(grpc_health_server):
    grpc_health_server.set("db", NOT_SERVING)
    action = {"port": grpc_health_server.port, "service": "db"}
    ok, detail = probe_network("grpc", action, "127.0.0.1", 2.0)
    assert (ok, detail) == (False, 'grpc 127.0.0.1:%d (service "db"): NOT_SERVING' % grpc_health_server.port)
    grpc_health_server.set("db", SERVING)
    assert probe_network("grpc", action, "127.0.0.1", 2.0)[0]


def test_grpc_unknown_status_fails(grpc_health_server):
    grpc_health_server.set("warming", UNKNOWN)
    ok, detail = probe_network("grpc", {"port": grpc_health_server.port, "service": "warming"}, "127.0.0.1", 2.0)
    assert (ok, detail) == (False, 'grpc 127.0.0.1:%d (service "warming"): UNKNOWN' % grpc_health_server.port)


def test_grpc_unknown_service_fails_with_its_grpc_status(grpc_health_server):
    """grpcio answers NOT_FOUND in the trailers, with an empty message."""
    ok, detail = probe_network("grpc", {"port": grpc_health_server.port, "service": "nope"}, "127.0.0.1", 2.0)
    assert (ok, detail) == (False, 'grpc 127.0.0.1:%d (service "nope"): grpc-status 5 NOT_FOUND'
                            % grpc_health_server.port)


def test_grpc_brackets_an_ipv6_address(grpc_health_server):
    grpc_health_server.set("", SERVING)
    ok, detail = probe_network("grpc", {"port": grpc_health_server.port6}, "::1", 2.0)
    assert (ok, detail) == (True, "grpc [::1]:%d: SERVING" % grpc_health_server.port6)


def test_grpc_on_a_closed_port_is_refused(closed_port):
    ok, detail = probe_network("grpc", {"port": closed_port}, "127.0.0.1", 1.0)
    assert (ok, detail) == (False, "grpc 127.0.0.1:%d: connection refused" % closed_port)


def test_grpc_on_an_http1_server_fails_at_once(web):
    """http.server answers the HTTP/2 preface with an error page alone (no
    status line, as to HTTP/0.9)."""
    (ok, detail), took = timed("grpc", {"port": web.server_port}, "127.0.0.1", 5.0)
    assert (ok, detail) == (False, "grpc 127.0.0.1:%d: not an HTTP/2 server (its answer does not start with "
                            "SETTINGS)" % web.server_port)
    assert took < 3


def test_grpc_on_an_http1_server_with_a_status_line_fails_at_once():
    """A server that answers the preface with an HTTP/1.1 status line, as
    nginx does (400)."""
    with listening(1) as (server, port):
        def answer():
            conn, _unused = server.accept()
            with conn:
                conn.settimeout(5)
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                try:
                    conn.recv(4096)  # until the client has read it and hung up
                except OSError:
                    pass

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        try:
            (ok, detail), took = timed("grpc", {"port": port}, "127.0.0.1", 5.0)
            assert (ok, detail) == (False, "grpc 127.0.0.1:%d: not an HTTP/2 server (it answered in HTTP/1)" % port)
            assert took < 3
        finally:
            thread.join(5)


def test_grpc_on_an_https_server_fails_at_once(https_server):
    (ok, detail), took = timed("grpc", {"port": https_server.server_port}, "127.0.0.1", 5.0)
    assert (ok, detail) == (False, "grpc 127.0.0.1:%d: connection reset by the server" % https_server.server_port)
    assert took < 3


def test_grpc_on_a_server_that_says_nothing_ends_at_the_timeout():
    with listening(1) as (_unused, port):
        (ok, detail), took = timed("grpc", {"port": port}, "127.0.0.1", 0.5)
        assert (ok, detail) == (False, "grpc 127.0.0.1:%d: no answer within 0.5 s" % port)
        assert 0.4 < took < 3


# --- grpc against a scripted HTTP/2 peer --------------------------------------
# Frames as RFC 9113 lays them out, header blocks as HPACK literals (RFC 7541
# 6.2.2, no Huffman coding), written here independently of grpc_health.py.


def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + struct.pack(">BBI", kind, flags, stream) + payload


def literal(name, value):
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
STATUS_200 = b"\x88"  # indexed: the static table's :status 200
SERVING_MESSAGE = b"\x00\x00\x00\x00\x02\x08\x01"  # uncompressed, 2 bytes: HealthCheckResponse{status: 1}
TRAILERS_OK = literal(b"grpc-status", b"0")


class Peer:
    """Accepts one connection, reads the client's request (to its DATA frame
    that ends stream 1), then plays SCRIPT: bytes to send, or "ping", which
    sends a PING and waits for its acknowledgement. Records the frames it
    read."""

    def __init__(self, script):
        self.script, self.frames = script, []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _unused = self.listener.accept()
        conn.settimeout(5)
        with conn:
            stream = conn.makefile("rb")
            assert stream.read(24) == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            while self._read(stream) != (DATA, 1, 1):
                pass
            conn.sendall(frame(SETTINGS, 0, 0, b""))
            for step in self.script:
                if step == "ping":
                    conn.sendall(frame(PING, 0, 0, b"12345678"))
                    while self._read(stream)[0] != PING:
                        pass
                else:
                    conn.sendall(step)
            # Close our side only once the client has read everything, and
            # read its side to the end: a close with unread bytes resets.
            time.sleep(0.2)
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(4096):
                pass

    def _read(self, stream):
        header = stream.read(9)
        kind, flags, number = header[3], header[4], struct.unpack(">I", header[5:])[0]
        self.frames.append((kind, flags, number, stream.read(int.from_bytes(header[:3], "big"))))
        return kind, flags & 1, number

    def close(self):
        self.thread.join(5)
        self.listener.close()


def scripted(*script):
    peer = Peer(script)
    try:
        answer = probe_network("grpc", {"port": peer.port}, "127.0.0.1", 3.0)
    finally:
        peer.close()
    return peer, answer


def test_grpc_answers_ping_and_settings_and_reads_continued_padded_frames():
    head = STATUS_200 + literal(b"content-type", b"application/grpc")
    peer, answer = scripted(
        "ping",
        frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000)),
        frame(HEADERS, 0, 1, head[:5]),  # the block goes on in a CONTINUATION
        frame(CONTINUATION, 0x4, 1, head[5:]),
        frame(DATA, 0x8, 1, b"\x03" + SERVING_MESSAGE + b"\x00" * 3),  # 3 bytes of padding
        frame(HEADERS, 0x1 | 0x4, 1, TRAILERS_OK),
    )
    assert answer == (True, "grpc 127.0.0.1:%d: SERVING" % peer.port)
    assert (PING, 1, 0, b"12345678") in peer.frames  # the PING acknowledged with its payload
    assert (SETTINGS, 1, 0, b"") in peer.frames  # the server's SETTINGS acknowledged
    # Ours turn off the HPACK dynamic table (size 0) and server push: the
    # server's header blocks then hold nothing the client cannot decode.
    assert (SETTINGS, 0, 0, struct.pack(">HIHI", 1, 0, 2, 0)) in peer.frames


def test_grpc_stream_reset_by_the_server_fails():
    peer, answer = scripted(frame(RST_STREAM, 0, 1, struct.pack(">I", 7)))
    assert answer == (False, "grpc 127.0.0.1:%d: the server reset the request (RST_STREAM REFUSED_STREAM)"
                      % peer.port)


def test_grpc_goaway_before_the_request_fails():
    peer, answer = scripted(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 11)))
    assert answer == (False, "grpc 127.0.0.1:%d: the server closed the connection (GOAWAY ENHANCE_YOUR_CALM)"
                      % peer.port)


def test_grpc_graceful_goaway_lets_the_request_finish():
    peer, answer = scripted(
        frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)),
        frame(HEADERS, 0x4, 1, STATUS_200),
        frame(DATA, 0, 1, SERVING_MESSAGE),
        frame(HEADERS, 0x1 | 0x4, 1, TRAILERS_OK),
    )
    assert answer == (True, "grpc 127.0.0.1:%d: SERVING" % peer.port)


def test_grpc_stream_ended_without_a_health_message_fails():
    peer, answer = scripted(frame(HEADERS, 0x1 | 0x4, 1, STATUS_200 + TRAILERS_OK))
    assert answer == (False, "grpc 127.0.0.1:%d: no health response" % peer.port)


def test_grpc_http2_server_that_is_not_grpc_fails_with_its_status():
    peer, answer = scripted(frame(HEADERS, 0x1 | 0x4, 1, b"\x8d"))  # the static table's :status 404
    assert answer == (False, "grpc 127.0.0.1:%d: HTTP status 404, not a gRPC answer" % peer.port)


def test_grpc_connection_closed_mid_answer_fails():
    peer, answer = scripted(frame(HEADERS, 0x4, 1, STATUS_200))
    assert answer == (False, "grpc 127.0.0.1:%d: the server closed the connection before answering" % peer.port)
