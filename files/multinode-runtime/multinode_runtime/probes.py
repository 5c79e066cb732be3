"""A service's network readiness probes: one try of an `http-get`,
`tcp-socket` or `grpc` probe (the Fuzzfile's `readiness-probe`, normalized
by the Fuzzfile model), made as the kubelet makes it, and one line that says
what was tried and what happened. The supervisor calls `probe_network` every
period and counts the tries against the probe's thresholds; `exec` probes
are not network probes (they run in the service's sandbox).

A service not ready yet refuses connections, resets them, stays silent or
answers garbage: every network, TLS or protocol error is a failed try with
its detail, never an exception.

- http-get: GET with the probe's headers (Host: the probe's address unless
  a header sets it), success for a status from 200 to 399. HTTPS is not
  verified, as the kubelet does not. Redirects are not followed: a 3xx is a
  success (the kubelet follows only redirects to the same host, and calls a
  redirect elsewhere a success too). At most BODY_LIMIT bytes of the body are
  read, and ignored. http.client, not urllib: no proxy setting applies.
- tcp-socket: success when a TCP connection opens.
- grpc: the gRPC health check (grpc_health.py), success for SERVING.

The timeout bounds each step of a try (connecting, the answer, its body;
the whole try for grpc and tcp-socket), not the sum of an http-get's steps.
"""

import http.client
import socket
import ssl
import time

from . import grpc_health

BODY_LIMIT = 10 * 1024  # bytes of an http-get answer read (the kubelet reads 10 KiB)
USER_AGENT = "fuzz-multinode-probe"  # the kubelet says kube-probe/VERSION
DETAIL_LIMIT = 300  # characters of a detail: a server's garbage can be long


def probe_network(handler, action, default_host, timeout):
    """One try of a network probe: (ok, detail). HANDLER is "http-get",
    "tcp-socket" or "grpc", ACTION its normalized dict (a numeric port),
    DEFAULT_HOST the address used when ACTION has no host, TIMEOUT seconds.
    DETAIL is one line: the probe's target, then what happened."""
    attempt = PROBES.get(handler)
    if attempt is None:
        return False, "%s: not a network probe" % handler
    host = action.get("host") or default_host
    port = action.get("port")
    address = _address(host, port)
    if handler == "http-get":
        target = "%s://%s%s" % (action.get("scheme", "HTTP").lower(), address, _http_path(action))
    elif handler == "grpc" and action.get("service"):
        target = '%s (service "%s")' % (address, action["service"])
    else:
        target = address
    what = "%s %s" % (handler, target)
    if not isinstance(port, int) or isinstance(port, bool):
        return False, _one_line("%s: the port is not a number" % what)
    if not host:
        return False, _one_line("%s: no host to probe" % what)
    try:
        ok, outcome = attempt(host, port, address, action, timeout)
    except Exception as exc:  # every failure is the try's detail, even a bug here (the supervisor goes on)
        ok, outcome = False, _failure(exc, timeout)
    return ok, _one_line("%s: %s" % (what, outcome))


def _one_line(text):
    """TEXT printable on one line (a path, a service name or a server's
    answer may hold anything), cut at DETAIL_LIMIT."""
    text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return text if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT - 3] + "..."


def _address(host, port):
    """HOST:PORT, an IPv6 address in brackets (as in a URL)."""
    return "[%s]:%s" % (host, port) if host and ":" in host else "%s:%s" % (host, port)


def _http_get(host, port, address, action, timeout):
    deadline = time.monotonic() + timeout
    if action.get("scheme") == "HTTPS":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = action.get("http-headers") or ()
    given = {header["name"].lower() for header in headers}
    try:
        # The probe's headers as given (a name may repeat); http.client adds
        # Host (with the port, an IPv6 address bracketed) unless given.
        connection.putrequest("GET", _http_path(action), skip_host="host" in given, skip_accept_encoding=True)
        for header in headers:
            connection.putheader(header["name"], header["value"])
        for name, value in (("User-Agent", USER_AGENT), ("Accept", "*/*"), ("Connection", "close")):
            if name.lower() not in given:
                connection.putheader(name, value)
        connection.endheaders()  # connects, then sends
        sock = connection.sock  # the response keeps it: getresponse drops the connection's (Connection: close)
        sock.settimeout(_time_left(deadline))
        response = connection.getresponse()
        sock.settimeout(_time_left(deadline))
        try:
            response.read(BODY_LIMIT)
        except http.client.IncompleteRead:
            return False, "status %d, then the connection closed mid-answer" % response.status
        return 200 <= response.status < 400, "status %d" % response.status
    finally:
        connection.close()


def _http_path(action):
    path = action.get("path") or "/"
    return path if path.startswith("/") else "/" + path  # as the kubelet's URL has it


def _tcp_socket(host, port, address, action, timeout):
    with socket.create_connection((host, port), timeout=timeout):
        return True, "connected"


def _grpc(host, port, address, action, timeout):
    return grpc_health.check(host, port, address, action.get("service") or "", timeout)


PROBES = {"http-get": _http_get, "tcp-socket": _tcp_socket, "grpc": _grpc}


def _time_left(deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


def _failure(exc, timeout):
    """What a user reads for a try's error."""
    # Python 3.8's socket.timeout is not TimeoutError (a connect's ETIMEDOUT).
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no answer within %g s" % timeout
    if isinstance(exc, grpc_health.ProtocolError):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.RemoteDisconnected):  # also a ConnectionResetError
        return "the server closed the connection without answering"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(exc, socket.gaierror):
        return "cannot resolve the host (%s)" % exc.strerror
    if isinstance(exc, ssl.SSLError):
        return "TLS failed (%s)" % (exc.reason or exc.strerror or exc)
    if isinstance(exc, (ValueError, http.client.InvalidURL)):  # http.client refusing a header or the path
        return "cannot send the request (%s)" % exc
    if isinstance(exc, http.client.HTTPException):
        return "not an HTTP answer (%s: %s)" % (type(exc).__name__, exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return "probe error (%s: %s)" % (type(exc).__name__, exc)
