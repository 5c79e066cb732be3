"""The registry a job's image comes from: the credentials the job's
image.secret gives for it, which images were pulled with credentials, and
why a pull from it failed.

Credentials: the value of the job's image.secret, a mapping of username
and password, arrives with the registration (`prepare --secrets`, on
stdin) and is kept only while the image is pulled: as a
containers-auth.json(5) file in the job's directory, root's (0600), keyed
by the registry host the image's URI names, given to `podman pull
--authfile` or skopeo, and removed right after (cleanup removes the job's
directory in any case). It is never in a command line, a log, the spec or
an answer, and no message shows it.

With --authfile, Podman and skopeo do not read the default auth file
($REGISTRY_AUTH_FILE, else root's /run/containers/0/auth.json, where
`podman login` writes): its entries are copied into the job's file, so a
site's own credentials (for a mirror at another host) still apply. The
job's credentials replace any the site has for the image's registry, and
go to that registry only: containers/image does not send them to a mirror
at another host.

An image pulled with credentials is remembered (its image ID, in root's
CREDENTIALED_FILE, which outlives reboots as Podman's store does): a job
that names no image.secret gets it only after the registry agreed to give
it to a pull without the job's credentials, never from the cache alone.
"""

import base64
import contextlib
import fcntl
import json
import os
import re

from . import registry
from .errors import RuntimeFailure

AUTH_FILE = "auth.json"  # in the job's directory, while its image is pulled
CREDENTIALS_KEYS = ("username", "password")
CREDENTIALED_FILE = "/var/lib/fuzz-multinode/credentialed-images"
_IMAGE_ID = re.compile(r"[0-9a-f]{64}\Z")


def registry_host(uri):
    """The registry a docker:// or oras:// image reference names: its first
    path component when that looks like a host (a dot, a port or
    localhost), else docker.io, as containers/image reads it."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    first, sep, _unused = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def credentials(name, value):
    """(username, password) of the value of secret://name, checked as the
    controller checks it (registry_credentials in the run policy); the
    message names the secret, never the value."""
    if (not isinstance(value, dict) or set(value) != set(CREDENTIALS_KEYS)
            or not all(isinstance(value[key], str) and value[key] for key in CREDENTIALS_KEYS)
            or ":" in value["username"] or "\0" in value["username"] + value["password"]):
        raise RuntimeFailure("secret://%s: its value in fuzz_multinode_secrets is not registry "
                             "credentials (a mapping of username and password, both non-empty "
                             "strings, the user name without ':')" % name)
    return value["username"], value["password"]


def auth_document(host, username, password, site=None):
    """The containers-auth.json(5) document giving username and password for
    registry host: the site's document (the default auth file, decoded) with
    the job's entry replacing the site's ones for that registry."""
    document = dict(site) if isinstance(site, dict) else {}
    auths = document.get("auths") if isinstance(document.get("auths"), dict) else {}
    document["auths"] = {key: entry for key, entry in auths.items()
                         if key != host and not key.startswith(host + "/")}
    document["auths"][host] = {"auth": base64.b64encode(
        ("%s:%s" % (username, password)).encode()).decode()}
    helpers = document.get("credHelpers")
    if isinstance(helpers, dict) and host in helpers:
        document["credHelpers"] = {key: helper for key, helper in helpers.items() if key != host}
    return document


def site_auth_file():
    """The auth file Podman and skopeo read when given none (as
    containers/image finds it for this user)."""
    if os.environ.get("REGISTRY_AUTH_FILE"):
        return os.environ["REGISTRY_AUTH_FILE"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "containers", "auth.json")
    return "/run/containers/%d/auth.json" % os.getuid()


def _site_document():
    try:
        with open(site_auth_file()) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None  # none, or not one Podman could read either


@contextlib.contextmanager
def pull_credentials(spec, node, secrets):
    """The path of the job's auth file while the `with` lasts, or None when
    the job names no image.secret. `secrets` are the values the
    registration brought ({name: value}, or None: none)."""
    name = (spec.image or {}).get("secret")
    if not name:
        yield None
        return
    uri = spec.image.get("uri", "")
    if not isinstance(secrets, dict) or name not in secrets:
        raise RuntimeFailure(
            "node %s cannot pull image %s: the value of its image.secret, secret://%s, was not "
            "given with the job's registration; the play gives each node the values from "
            "fuzz_multinode_secrets" % (node, uri, name))
    try:
        username, password = credentials(name, secrets[name])
    except RuntimeFailure as exc:
        raise RuntimeFailure("node %s cannot pull image %s: %s" % (node, uri, exc)) from None
    path = registry.job_path(spec.job, AUTH_FILE)
    document = auth_document(registry_host(uri), username, password, _site_document())
    registry.write_file(path, json.dumps(document), 0o600)
    try:
        yield path
    finally:
        forget_credentials(spec.job)


def forget_credentials(job):
    """Remove the job's auth file here, if it is still there."""
    try:
        os.unlink(registry.job_path(job, AUTH_FILE))
    except FileNotFoundError:
        pass


# -- images pulled with credentials -----------------------------------------------

@contextlib.contextmanager
def _credentialed(mode):
    os.makedirs(os.path.dirname(CREDENTIALED_FILE), 0o755, exist_ok=True)
    fd = os.open(CREDENTIALED_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "r+") as handle:
        fcntl.flock(handle, mode)
        yield handle


def pulled_with_credentials(image_id):
    """Whether the image of this ID was pulled with a job's credentials."""
    if not os.path.exists(CREDENTIALED_FILE):
        return False
    with _credentialed(fcntl.LOCK_SH) as handle:
        return image_id in handle.read().split()


def any_credentialed():
    """Whether any image here was pulled with a job's credentials."""
    try:
        return os.path.getsize(CREDENTIALED_FILE) > 0
    except FileNotFoundError:
        return False


def remember_credentialed(image_id):
    """Record that the image of this ID came with a job's credentials."""
    if not _IMAGE_ID.match(image_id):
        raise RuntimeFailure("not an image ID: %r" % (image_id,))
    with _credentialed(fcntl.LOCK_EX) as handle:
        if image_id not in handle.read().split():
            handle.write(image_id + "\n")


# -- why a pull failed -----------------------------------------------------------

def pull_reason(detail, with_credentials):
    """The reason in a registry client's (podman's, skopeo's) message about
    a failed pull; `with_credentials`: the job gave credentials for it."""
    low = detail.lower()
    # The registry's error codes, as containers/image prints them
    # ("unauthorized: …", "denied: …"), and its own words for them.
    if ("unauthorized" in low or "authentication required" in low or "denied:" in low
            or "access to the resource is denied" in low or "invalid username/password" in low):
        if with_credentials:
            return "the registry refused the credentials"
        return "the registry refused access without credentials (the job has no image.secret)"
    if "manifest unknown" in low or "name unknown" in low or "not found" in low:
        return "no such image in the registry"
    if "digest" in low and ("match" in low or "mismatch" in low):
        return "the registry's content does not match its digest"
    if "dial tcp" in low or "no such host" in low or "connection refused" in low or "timeout" in low:
        return UNREACHABLE
    return "the pull failed"


UNREACHABLE = "the registry is unreachable"
# Where a user most often stumbles: a node with no way to the image's
# registry (no internet, a site mirror not configured).
WHAT_TO_DO = {
    UNREACHABLE: ("give the node a registry it reaches, a mirror in /etc/containers/registries.conf.d/ "
                  "(the guide \"Jobs in their images\"), or run the job on the bare host: "
                  "-e fuzz_multinode_execution=host"),
}


def pull_failure_text(reason, tool, detail):
    """A failed pull's words: `reason` (pull_reason), what the client
    `tool` said (`detail`), and what to do where that is known."""
    text = "%s (%s: %s)" % (reason, tool, detail)
    return "%s; %s" % (text, WHAT_TO_DO[reason]) if reason in WHAT_TO_DO else text
