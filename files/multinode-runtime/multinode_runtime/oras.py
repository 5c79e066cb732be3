"""oras:// images (Apptainer SIF files stored in an OCI registry) as Podman
images: pulled with skopeo, which reads /etc/containers/registries.conf
(mirrors, insecure registries) and credentials as Podman does, their digests
checked, their root file system partition imported into Podman's image store
under the manifest's digest. That store is the node's cache: a SIF already
imported is neither pulled nor converted again."""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import NamedTuple, Optional

from . import registry, sif
from .errors import RuntimeFailure
from .image_registry import pull_failure_text, pull_reason

SKOPEO = "/usr/bin/skopeo"
UNSQUASHFS = "/usr/bin/unsquashfs"
PODMAN = "/usr/bin/podman"
TAR = "/usr/bin/tar"
TOOLS = ((SKOPEO, "skopeo"), (UNSQUASHFS, "squashfs-tools"), (PODMAN, "podman"))
PULL_WITHIN = 1800  # seconds a pull and conversion may take, all steps
QUERY_WITHIN = 120  # seconds for a manifest or an image lookup

IMAGE_NAME = "localhost/fuzz-multinode-sif"
SIF_CONFIG = "application/vnd.sylabs.sif.config.v1+json"
SIF_LAYER = "application/vnd.sylabs.sif.layer.v1.sif"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
# Held while an image is looked for and imported: two jobs starting on a
# node with the same new image convert it once.
IMAGES_LOCK = "sif-images.lock"

# The distribution reference grammar (github.com/distribution/reference).
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(r"(?P<host>%s)/(?P<repo>%s(?:/%s)*)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[^@]*))?\Z"
                        % (_HOST, _COMPONENT, _COMPONENT), re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")


class Reference(NamedTuple):
    """An oras:// image reference: registry host, repository, and a tag or a
    digest (a digest wins over a tag given beside it)."""

    registry: str
    repository: str
    tag: str
    digest: Optional[str]

    def docker(self) -> str:
        """The same image as a docker:// reference, the one skopeo reads."""
        return "docker://%s/%s%s" % (self.registry, self.repository,
                                     "@" + self.digest if self.digest else ":" + self.tag)


def parse_reference(uri: str) -> Reference:
    """The parts of oras://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]."""
    if not uri.startswith("oras://"):
        raise RuntimeFailure("image %s: not an oras:// reference" % uri)
    m = _REFERENCE.match(uri[len("oras://"):])
    if not m or not _looks_like_host(m.group("host")):
        raise RuntimeFailure("image %s: not a valid oras:// reference (oras://REGISTRY/REPOSITORY[:TAG]"
                             "[@sha256:DIGEST], the repository in lower case)" % uri)
    digest = m.group("digest")
    if digest is not None and not _DIGEST.match(digest):
        raise RuntimeFailure("image %s: digest %r is not sha256: and 64 lower-case hex digits" % (uri, digest))
    return Reference(m.group("host"), m.group("repo"), m.group("tag") or "latest", digest)


def _looks_like_host(host: str) -> bool:
    # As docker's normalisation tells a registry from a first path
    # component; oras:// references always name their registry.
    return "." in host or ":" in host or host == "localhost"


def sif_layer(uri: str, manifest: bytes) -> "tuple[str, int]":
    """The digest and size of the SIF in the OCI manifest of image uri."""
    try:
        m = json.loads(manifest)
        config = m["config"]["mediaType"]
        layers = m["layers"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeFailure("image %s: not a SIF image (its manifest is not an OCI image manifest)" % uri) from None
    if config != SIF_CONFIG:
        raise RuntimeFailure("image %s: not a SIF image (its config is %s, not %s; an OCI image is run as docker://)"
                             % (uri, config, SIF_CONFIG))
    sifs = [layer for layer in layers if isinstance(layer, dict) and layer.get("mediaType") == SIF_LAYER]
    if len(sifs) != 1 or not _DIGEST.match(str(sifs[0].get("digest"))) or not isinstance(sifs[0].get("size"), int):
        raise RuntimeFailure("image %s: not a SIF image (its manifest has %d layers of type %s, not one)"
                             % (uri, len(sifs), SIF_LAYER))
    return sifs[0]["digest"], sifs[0]["size"]


def pull_failure(uri: str, message: str, with_credentials: bool = False) -> RuntimeFailure:
    """The failure of a skopeo pull of image uri, which printed message
    (with_credentials: the pull gave the job's credentials)."""
    text = message.strip().splitlines()[-1] if message.strip() else "no message"
    m = re.search(r'msg="(.*)"\s*$', text)
    detail = m.group(1).replace('\\"', '"') if m else text
    reason = pull_reason(detail, with_credentials)
    return RuntimeFailure("image %s: %s" % (uri, pull_failure_text(reason, "skopeo", detail)))


def podman_image(uri: str, workdir: str, authfile: Optional[str] = None, ask_registry: bool = False) -> str:
    """The name of the local Podman image holding the root file system of
    the SIF at oras:// uri, pulled and imported unless already there.

    A digest reference already imported needs no registry unless
    ask_registry says to ask it all the same (one manifest request: the
    credentials are checked); a tag is looked up in the registry each time,
    as Apptainer does. workdir is where the SIF and its unpacked root are
    kept while converting (several times the image's size). authfile is a
    containers-auth.json(5) file of credentials for the registry."""
    ref = parse_reference(uri)
    for tool, package in TOOLS:
        if not os.access(tool, os.X_OK):
            raise RuntimeFailure("image %s: this node has no %s (Debian package %s) to run oras:// images"
                                 % (uri, tool, package))
    if ref.digest and not ask_registry and _image_exists(uri, image_name(ref.digest)):
        return image_name(ref.digest)
    auth = ["--authfile", authfile] if authfile else []
    manifest = _skopeo(uri, ["inspect", "--raw"] + auth + [ref.docker()], QUERY_WITHIN, authfile)
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    if ref.digest and digest != ref.digest:
        raise RuntimeFailure("image %s: digest mismatch: the manifest the registry sent has digest %s" % (uri, digest))
    name = image_name(digest)
    layer_digest, layer_size = sif_layer(uri, manifest)
    os.makedirs(registry.STATE_DIR, 0o755, exist_ok=True)
    with open(os.path.join(registry.STATE_DIR, IMAGES_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _image_exists(uri, name):
            return name
        deadline = time.monotonic() + PULL_WITHIN
        try:
            _pull_and_import(uri, ref._replace(digest=digest), layer_digest, layer_size, name, workdir, authfile,
                             deadline)
        except OSError as e:  # the work directory: missing, full, not writable
            raise RuntimeFailure("image %s: cannot convert it in %s: %s" % (uri, workdir, e.strerror or e)) from None
    return name


def _pull_and_import(uri: str, pinned: Reference, layer_digest: str, layer_size: int, name: str, workdir: str,
                     authfile: Optional[str], deadline: float) -> None:
    with tempfile.TemporaryDirectory(prefix="sif-", dir=workdir) as tmp:
        pulled = os.path.join(tmp, "pulled")
        auth = ["--src-authfile", authfile] if authfile else []
        _skopeo(uri, ["copy", "--quiet"] + auth + [pinned.docker(), "dir:" + pulled], _left(uri, deadline), authfile)
        image = os.path.join(pulled, layer_digest[len("sha256:"):])
        _check_blob(uri, image, layer_digest, layer_size)
        squashfs = os.path.join(tmp, "rootfs.squashfs")
        try:
            sif.extract_root_partition(image, squashfs)
        except sif.SifError as e:
            raise RuntimeFailure("image %s: %s" % (uri, e)) from None
        shutil.rmtree(pulled)  # the SIF is not needed again: free its space
        _import(uri, squashfs, os.path.join(tmp, "root"), name, deadline)


def _left(uri: str, deadline: float) -> float:
    """Seconds left until deadline; none left is a failure."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise RuntimeFailure("image %s: not pulled and converted within %d s" % (uri, PULL_WITHIN))
    return left


def _run(uri, what, argv, within, **kwargs):
    """subprocess.run, its timeout a failure naming the image and what ran."""
    try:
        return subprocess.run(argv, timeout=within, check=kwargs.pop("check", False), **kwargs)
    except subprocess.TimeoutExpired:
        raise RuntimeFailure("image %s: %s did not finish within %d s" % (uri, what, within)) from None


def image_name(digest: str) -> str:
    """The Podman image a SIF of this manifest digest is imported as."""
    return "%s:%s" % (IMAGE_NAME, digest[len("sha256:"):])


def _image_exists(uri: str, name: str) -> bool:
    return _run(uri, "podman image exists", [PODMAN, "image", "exists", name], QUERY_WITHIN, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0


def _skopeo(uri: str, args: "list[str]", within: float, authfile: Optional[str]) -> bytes:
    # Podman reads registries.conf from $CONTAINERS_REGISTRIES_CONF when set;
    # skopeo 1.9 ignores that variable and takes the path as an option.
    conf = os.environ.get("CONTAINERS_REGISTRIES_CONF")
    argv = [SKOPEO] + (["--registries-conf", conf] if conf else []) + args
    done = _run(uri, "skopeo " + args[0], argv, within, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise pull_failure(uri, done.stderr.decode("utf-8", "replace"), authfile is not None)
    return done.stdout


def _check_blob(uri: str, path: str, digest: str, size: int) -> None:
    """skopeo checks blobs as it copies them; this checks what it left."""
    h = hashlib.sha256()
    length = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            length += len(chunk)
    if length != size or "sha256:" + h.hexdigest() != digest:
        raise RuntimeFailure("image %s: the SIF pulled (%d bytes, sha256:%s) does not match its manifest "
                             "(%d bytes, %s)" % (uri, length, h.hexdigest(), size, digest))


def _import(uri: str, squashfs: str, root: str, name: str, deadline: float) -> None:
    """Unpack squashfs into root and import root as the Podman image name."""
    # No extended attributes: the tar stream below would not carry them.
    unpack = [UNSQUASHFS, "-no-progress", "-quiet", "-no-xattrs", "-d", root, squashfs]
    done = _run(uri, "unsquashfs", unpack, _left(uri, deadline),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise RuntimeFailure("image %s: cannot unpack its root file system partition (unsquashfs: %s)"
                             % (uri, _last_line(done.stderr)))
    os.unlink(squashfs)
    with tempfile.TemporaryFile() as tar_err:
        tar = subprocess.Popen([TAR, "--numeric-owner", "-C", root, "-c", "."], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=tar_err)
        assert tar.stdout is not None
        try:
            label = "LABEL org.fuzz-multinode.source=" + uri
            imported = _run(uri, "podman import", [PODMAN, "import", "--quiet", "--change", label, "-", name],
                            _left(uri, deadline), stdin=tar.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            tar.stdout.close()  # a tar still writing gets SIGPIPE
            tar.wait()
        if imported.returncode != 0:
            raise RuntimeFailure("image %s: podman import failed: %s" % (uri, _last_line(imported.stderr)))
        if tar.returncode != 0:
            tar_err.seek(0)
            raise RuntimeFailure("image %s: cannot pack its root file system (tar: %s)"
                                 % (uri, _last_line(tar_err.read())))


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"
