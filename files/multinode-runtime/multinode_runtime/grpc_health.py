"""A `grpc` readiness probe's one try: the gRPC health checking protocol
(grpc.health.v1.Health/Check) over cleartext HTTP/2, with the standard
library alone (the node's python3 has no grpcio).

The smallest client the protocols allow, for one request on one connection
(RFC 9113 HTTP/2, RFC 7541 HPACK, gRPC over HTTP/2, protobuf's wire format):

- we send the connection preface, our SETTINGS, the request's HEADERS (HPACK
  literals, never Huffman-coded, nothing indexed) and one DATA frame ending
  the stream with the HealthCheckRequest, all at once (a client need not
  wait for the server's SETTINGS);
- our SETTINGS turn off server push and the server's HPACK dynamic table
  (its size 0), so the header blocks we read hold only static-table
  references and literals, which a few lines decode;
- we read frames until our stream ends, answering the server's SETTINGS and
  PINGs as the protocol requires, and take the HealthCheckResponse from the
  DATA, and :status, grpc-status and grpc-message where the server sent them
  as literals without Huffman coding (we carry no Huffman table: when a
  coded grpc-status comes without a message, "no health response" is all
  there is to say; grpcio sends literals).

Everything bounded: the whole try by the probe's timeout, every frame by
the default maximum frame size, the answer's DATA and header blocks by
ANSWER_LIMIT. The peer's misbehaviour raises ProtocolError, whose text is
the probe's detail.
"""

import socket
import struct
import time
from urllib.parse import unquote

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# Frame types and flags (RFC 9113 6).
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x9
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY = 0x4, 0x8, 0x20
# SETTINGS_HEADER_TABLE_SIZE 0 and SETTINGS_ENABLE_PUSH 0 (see above).
CLIENT_SETTINGS = struct.pack(">HIHI", 0x1, 0, 0x2, 0)
MAX_FRAME = 16384  # SETTINGS_MAX_FRAME_SIZE's default: we announce no other
ANSWER_LIMIT = 65536  # bytes of DATA, or of one header block: a health response is a few
STREAM = 1  # our one request's stream
HEALTH_CHECK = "/grpc.health.v1.Health/Check"

SERVING = 1
HEALTH_STATUSES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
GRPC_CODES = (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
)
H2_ERRORS = (
    "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
    "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
)
# The HPACK static table's :status entries (RFC 7541 appendix A): the only
# static entries whose name or value we need.
STATIC_STATUS = {8: "200", 9: "204", 10: "206", 11: "304", 12: "400", 13: "404", 14: "500"}


class ProtocolError(Exception):
    """The peer is no HTTP/2 gRPC server or broke the protocol; the text
    says how, for the probe's detail."""


def check(host, port, authority, service, timeout):
    """Ask HOST:PORT whether SERVICE ("" for the server as a whole) is
    serving: (ok, outcome), ok only for SERVING. Network errors raise
    (OSError, socket.timeout), the peer's misbehaviour ProtocolError."""
    request = _grpc_message(_health_request(service))
    if len(request) > MAX_FRAME:
        return False, "the service name is too long for one request (%d bytes)" % len(service.encode())
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(
            PREFACE
            + _frame(SETTINGS, 0, 0, CLIENT_SETTINGS)
            + _frame(HEADERS, END_HEADERS, STREAM, _request_headers(authority))
            + _frame(DATA, END_STREAM, STREAM, request)
        )
        data, fields = _read_answer(sock, deadline)
    return _outcome(data, fields)


# --- what we send --------------------------------------------------------


def _frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + struct.pack(">BBI", kind, flags, stream) + payload


def _request_headers(authority):
    """The request's header block: pseudo-headers first, each a literal
    without indexing with a new name, not Huffman-coded (RFC 7541 6.2.2)."""
    fields = (
        (":method", "POST"), (":scheme", "http"), (":path", HEALTH_CHECK), (":authority", authority),
        ("content-type", "application/grpc"), ("te", "trailers"),
    )
    return b"".join(b"\x00" + _hpack_text(name) + _hpack_text(value) for name, value in fields)


def _hpack_text(text):
    data = text.encode()
    return _hpack_int_bytes(len(data), 7) + data  # the H bit 0: not Huffman-coded


def _hpack_int_bytes(value, prefix_bits):
    """An HPACK integer whose first byte's other bits are 0 (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = [limit], value - limit
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + [value])


def _health_request(service):
    """HealthCheckRequest{string service = 1}; proto3 leaves out the empty
    string."""
    data = service.encode()
    return b"\x0a" + _varint_bytes(len(data)) + data if data else b""


def _varint_bytes(value):
    out = []
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + [value])


def _grpc_message(message):
    """gRPC's length-prefixed message: not compressed, 4-byte length."""
    return b"\x00" + struct.pack(">I", len(message)) + message


# --- what we read --------------------------------------------------------


def _read_answer(sock, deadline):
    """Frames until our stream ends: (its DATA, the fields of its header
    blocks that could be decoded, headers and trailers together)."""
    data, block, fields = b"", b"", {}
    first, ending = True, False
    while True:
        kind, flags, stream, payload = _read_frame(sock, deadline, first)
        first = False
        if kind == SETTINGS and not flags & ACK:
            sock.sendall(_frame(SETTINGS, ACK, 0, b""))
        elif kind == PING and not flags & ACK:
            sock.sendall(_frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            if len(payload) < 8:
                raise ProtocolError("a malformed GOAWAY frame")
            last_stream, code = struct.unpack(">II", payload[:8])
            # A graceful shutdown (NO_ERROR) that includes our stream lets
            # it finish; anything else ends it.
            if code or last_stream & 0x7FFFFFFF < STREAM:
                raise ProtocolError("the server closed the connection (GOAWAY %s)" % _h2_error(code))
        elif stream != STREAM:
            pass  # WINDOW_UPDATE, PRIORITY, other streams: nothing to do for one small request
        elif kind == RST_STREAM:
            code = struct.unpack(">I", payload[:4])[0] if len(payload) >= 4 else None
            raise ProtocolError("the server reset the request (RST_STREAM %s)" % _h2_error(code))
        elif kind == DATA:
            data += _unpadded(payload, flags)
            if len(data) > ANSWER_LIMIT:
                raise ProtocolError("an answer of more than %d bytes: not a health response" % ANSWER_LIMIT)
            if flags & END_STREAM:
                return data, fields
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                ending = bool(flags & END_STREAM)  # the stream ends with this header block
                payload = _unpadded(payload, flags)
                if flags & PRIORITY:
                    payload = payload[5:]  # stream dependency, weight
            block += payload
            if len(block) > ANSWER_LIMIT:
                raise ProtocolError("a header block of more than %d bytes" % ANSWER_LIMIT)
            if flags & END_HEADERS:
                fields.update(_header_fields(block))
                block = b""
                if ending:
                    return data, fields


def _read_frame(sock, deadline, first=False):
    """(type, flags, stream, payload) of the next frame. The server's first
    must be its SETTINGS: anything else is no HTTP/2 server."""
    header = _read_exactly(sock, 9, deadline)
    length = int.from_bytes(header[:3], "big")
    kind, flags, stream = struct.unpack(">BBI", header[3:])
    if first and header.startswith(b"HTTP/"):
        raise ProtocolError("not an HTTP/2 server (it answered in HTTP/1)")
    if first and (kind != SETTINGS or flags & ACK or length > MAX_FRAME):
        raise ProtocolError("not an HTTP/2 server (its answer does not start with SETTINGS)")
    if length > MAX_FRAME:
        raise ProtocolError("the server broke the protocol (a frame of %d bytes)" % length)
    return kind, flags, stream & 0x7FFFFFFF, _read_exactly(sock, length, deadline)


def _read_exactly(sock, size, deadline):
    chunks = []
    while size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        sock.settimeout(left)
        chunk = sock.recv(size)
        if not chunk:
            raise ProtocolError("the server closed the connection before answering")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _unpadded(payload, flags):
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolError("a malformed padded frame")
    return payload[1:len(payload) - payload[0]]


def _h2_error(code):
    if code is None:
        return "without an error code"
    return H2_ERRORS[code] if code < len(H2_ERRORS) else "error %d" % code


def _header_fields(block):
    """{name: value} of a header block's fields we can read: literals not
    Huffman-coded, and :status from the static table. We keep no dynamic
    table (we set its size to 0), so an index past the static table's 61
    entries, like a Huffman-coded string, is skipped, not an error."""
    fields, pos = {}, 0
    while pos < len(block):
        byte = block[pos]
        if byte & 0x80:  # indexed field
            index, pos = _hpack_int(block, pos, 7)
            if index in STATIC_STATUS:
                fields[":status"] = STATIC_STATUS[index]
        elif byte & 0xE0 == 0x20:  # dynamic table size update
            _unused, pos = _hpack_int(block, pos, 5)
        else:  # a literal: with incremental indexing (01), without (0000) or never indexed (0001)
            index, pos = _hpack_int(block, pos, 6 if byte & 0x40 else 4)
            if index:
                name = ":status" if index in STATIC_STATUS else None
            else:
                name, pos = _hpack_string(block, pos)
            value, pos = _hpack_string(block, pos)
            if name is not None and value is not None:
                fields[name] = value
    return fields


def _hpack_int(block, pos, prefix_bits):
    """(value, position after it) of the HPACK integer at pos (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    value, pos = block[pos] & limit, pos + 1
    if value < limit:
        return value, pos
    shift = 0
    while pos < len(block) and shift <= 28:
        byte, pos = block[pos], pos + 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
    raise ProtocolError("a malformed header block")


def _hpack_string(block, pos):
    """(text or None when Huffman-coded, position after it)."""
    if pos >= len(block):
        raise ProtocolError("a malformed header block")
    huffman = block[pos] & 0x80
    length, pos = _hpack_int(block, pos, 7)
    if pos + length > len(block):
        raise ProtocolError("a malformed header block")
    text = None if huffman else block[pos:pos + length].decode("latin-1")
    return text, pos + length


def _outcome(data, fields):
    """(ok, outcome) of a finished answer. A call's grpc-status decides
    before its message (a failed call's message means nothing: grpcio sends
    an empty one with NOT_FOUND for a service it does not know)."""
    status = fields.get(":status")
    if status is not None and status != "200":
        return False, "HTTP status %s, not a gRPC answer" % status
    code = fields.get("grpc-status")
    if code is not None and code != "0":
        name = GRPC_CODES[int(code)] if code.isdigit() and int(code) < len(GRPC_CODES) else "code " + code
        message = unquote(fields.get("grpc-message", ""))  # percent-encoded (gRPC over HTTP/2)
        return False, "grpc-status %s %s%s" % (code, name, ": " + message if message else "")
    if not data:
        return False, "no health response"
    length = struct.unpack(">I", data[1:5])[0] if len(data) >= 5 else None
    if length is None or len(data) < 5 + length:
        raise ProtocolError("a cut gRPC message")
    if data[0]:
        raise ProtocolError("a compressed gRPC message (none was asked for)")
    health = _health_status(data[5:5 + length])
    return health == SERVING, HEALTH_STATUSES.get(health, "health status %d" % health)


def _health_status(message):
    """HealthCheckResponse's status (field 1, an enum: a varint); unknown
    fields skipped, 0 (UNKNOWN) when left out as proto3 does."""
    status, pos = 0, 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        field, wire_type = key >> 3, key & 0x7
        if wire_type == 0:
            value, pos = _varint(message, pos)
            if field == 1:
                status = value
        elif wire_type == 2:
            size, pos = _varint(message, pos)
            pos += size
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ProtocolError("not a HealthCheckResponse")
    if pos > len(message):
        raise ProtocolError("not a HealthCheckResponse")
    return status


def _varint(message, pos):
    value, shift = 0, 0
    while pos < len(message) and shift < 64:
        byte, pos = message[pos], pos + 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
    raise ProtocolError("not a HealthCheckResponse")
