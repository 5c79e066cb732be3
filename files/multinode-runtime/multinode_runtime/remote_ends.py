"""The ends of a transfer item off the node (transfers.py does the item):
an HTTP(S) source, read as a stream, and an S3 object, read as a stream or
uploaded in parts.

HTTP is the standard library's urllib (https certificates checked against
the node's CA store; Basic credentials never carried to where a redirect
leads), S3 is boto3 (Debian's python3-boto3), with the credentials of the
item's secret only, else anonymous (the job user's side of transfers.py
clears AWS_* and ~/.aws before). A connection silent for IDLE_SECONDS
fails the attempt. Every failure is a TransferError that says why for the
user: the host or endpoint and the reason, never a secret's value.
"""

import base64
import re
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from .errors import TransferError

IDLE_SECONDS = 60  # a connection that sends nothing this long fails the attempt
DEFAULT_REGION = "us-east-1"
S3_KEYS = ("access_key_id", "secret_access_key", "session_token", "region", "endpoint_url")
# S3 uploads: parts of this size, this many at a time (bounded memory).
S3_PART = 16 << 20
S3_CONCURRENCY = 4


# -- HTTP ---------------------------------------------------------------------------------

def http_reader(uri, credentials):
    request = urllib.request.Request(uri, headers={"User-Agent": "fuzz.multinode"})
    if credentials:
        pair = "%s:%s" % (credentials.get("username", ""), credentials.get("password", ""))
        # Not carried to where a redirect leads (urllib copies only the
        # redirected headers).
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    host = urllib.parse.urlsplit(uri).netloc.rsplit("@", 1)[-1]
    try:
        response = urllib.request.urlopen(request, timeout=IDLE_SECONDS)  # noqa: S310 - http(s) only
    except urllib.error.HTTPError as exc:
        exc.close()
        raise TransferError("HTTP %d %s" % (exc.code, exc.reason)) from None
    except urllib.error.URLError as exc:
        raise TransferError(_network_reason(exc.reason, host)) from None
    except (OSError, ValueError) as exc:
        raise TransferError(_network_reason(exc, host)) from None
    length = response.headers.get("Content-Length")
    return _Guarded(response, host), int(length) if length and length.isdigit() else None


class _Guarded:
    """A response whose read() raises TransferError for network failures."""

    def __init__(self, response, host):
        self.response, self.host = response, host

    def read(self, count):
        try:
            return self.response.read(count)
        except Exception as exc:  # noqa: BLE001 - http.client's IncompleteRead and the socket's errors
            raise TransferError(_network_reason(exc, self.host)) from None

    def close(self):
        self.response.close()


def _network_reason(reason, host):
    if isinstance(reason, socket.gaierror):
        return "cannot resolve the host %s: %s" % (host, reason.strerror)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "%s sent nothing for %d s" % (host, IDLE_SECONDS)
    if isinstance(reason, ConnectionRefusedError):
        return "cannot connect to %s: connection refused" % host
    if isinstance(reason, ssl.SSLError):
        return "TLS with %s failed: %s" % (host, getattr(reason, "verify_message", None) or reason.reason or reason)
    if isinstance(reason, OSError) and reason.strerror:
        return "cannot reach %s: %s" % (host, reason.strerror)
    name = type(reason).__name__
    if name == "IncompleteRead":
        return "%s closed the connection before the end of the file" % host
    return "cannot reach %s: %s" % (host, reason)


# -- S3 -----------------------------------------------------------------------------------

def s3_client(request):
    """A boto3 S3 client with the item's credentials (or anonymous), its
    endpoint (the secret's endpoint_url, else the play's
    s3_endpoint_url), short retries and the idle timeout."""
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:
        raise TransferError("boto3 is not installed on %s (Debian's python3-boto3; the node role installs it "
                            "for a workflow with s3:// transfers)" % socket.gethostname()) from None
    credentials = request.get("credentials") or {}
    unknown = sorted(set(credentials) - set(S3_KEYS))
    if unknown or (credentials and not (credentials.get("access_key_id") and credentials.get("secret_access_key"))):
        raise TransferError("the item's secret is not S3 credentials (access_key_id, secret_access_key)")
    endpoint = credentials.get("endpoint_url") or request.get("s3_endpoint_url") or None
    options = dict(connect_timeout=IDLE_SECONDS, read_timeout=IDLE_SECONDS,
                   retries={"max_attempts": 3, "mode": "standard"})
    if endpoint:
        options["s3"] = {"addressing_style": "path"}  # an S3-compatible server: no bucket host names
    if not credentials:
        options["signature_version"] = UNSIGNED
    session = boto3.session.Session(
        aws_access_key_id=credentials.get("access_key_id"),
        aws_secret_access_key=credentials.get("secret_access_key"),
        aws_session_token=credentials.get("session_token") or None,
        region_name=credentials.get("region") or DEFAULT_REGION)
    try:
        return session.client("s3", endpoint_url=endpoint, config=Config(**options))
    except ValueError as exc:
        raise TransferError("the S3 endpoint %r: %s" % (endpoint, exc)) from None


def s3_reason(exc, endpoint):
    from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code, message = error.get("Code"), error.get("Message") or ""
        if not code or code == str(status):  # an answer without a body (HEAD, a proxy's)
            return "S3 HTTP %s %s" % (status, message)
        return "S3 %s%s%s" % (code, ": " + message if message else "", " (HTTP %s)" % status if status else "")
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
        return "the S3 endpoint %s sent nothing for %d s" % (endpoint, IDLE_SECONDS)
    if isinstance(exc, EndpointConnectionError):
        said = str(exc.kwargs.get("error") or exc)
        errno = re.search(r"\[Errno -?\d+\] (.*)$", said)  # urllib3 starts with a connection's repr
        return "cannot reach the S3 endpoint %s: %s" % (endpoint, errno.group(1) if errno else said)
    return "S3: %s" % exc


def _s3_call(client, call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except TransferError:
        raise
    except Exception as exc:  # noqa: BLE001 - botocore's and s3transfer's errors, told as their reason
        cause = exc
        # s3transfer wraps the ClientError of a failed upload.
        while not hasattr(cause, "response") and cause.__context__ is not None:
            cause = cause.__context__
        raise TransferError(s3_reason(cause if hasattr(cause, "response") else exc,
                                      client.meta.endpoint_url)) from None


def s3_reader(client, bucket, key):
    answer = _s3_call(client, client.get_object, Bucket=bucket, Key=key)
    body = answer["Body"]

    class Body:
        def read(self, count):
            return _s3_call(client, body.read, count)

        def close(self):
            body.close()

    return Body(), answer.get("ContentLength")


def s3_upload(client, bucket, key, source, progress):
    from boto3.s3.transfer import TransferConfig
    config = TransferConfig(multipart_threshold=S3_PART, multipart_chunksize=S3_PART,
                            max_concurrency=S3_CONCURRENCY)
    _s3_call(client, client.upload_fileobj, source, bucket, key, Callback=progress.add, Config=config)
