"""oras:// images pulled from a real registry on this machine: Debian's
docker-registry (the Distribution registry), filled with SIFs the tests
write (mksquashfs and molecule/shared/sif_writer.py) and push with the ORAS
Python SDK, reached as the spec's docker.io through a registries.conf
mirror, then pulled by multinode_runtime.oras.podman_image (skopeo) and
imported into this machine's Podman image store. The image's files are
looked at through `podman image mount`, which needs no OCI runtime."""

import base64
import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

import local_jobs as lj
from local_registry import htpasswd, registry

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from multinode_runtime import oras  # noqa: E402
from multinode_runtime.errors import RuntimeFailure  # noqa: E402

import sif_writer  # noqa: E402

REPOSITORY = "anderbubble/openmpi-hello-world.sif"  # the spec's, under docker.io
TOOLS = ("docker-registry", "skopeo", "podman", "mksquashfs", "unsquashfs")


@pytest.fixture(scope="module", autouse=True)
def tools():
    missing = [tool for tool in TOOLS if not any(os.access(os.path.join(d, tool), os.X_OK)
                                                 for d in os.environ.get("PATH", "").split(":") + ["/usr/bin"])]
    if missing:
        pytest.fail("needs %s (scripts/setup installs them)" % " ".join(missing), pytrace=False)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A registry standing in for docker.io, as an air-gapped site's mirror."""
    directory = tmp_path_factory.mktemp("mirror")
    with registry(directory) as host:
        yield host, directory / "data"


@pytest.fixture
def registries_conf(tmp_path, mirror, monkeypatch):
    host, _unused = mirror
    conf = tmp_path / "registries.conf"
    conf.write_text('[[registry]]\nprefix = "docker.io"\nlocation = "docker.io"\n'
                    '[[registry.mirror]]\nlocation = "%s"\ninsecure = true\n' % host)
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    return conf


@pytest.fixture
def images():
    """Names of the Podman images a test made, removed after it."""
    made = []
    yield made
    for name in made:
        subprocess.run(["podman", "rmi", "--force", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


def make_sif(tmp_path, marker):
    root = tmp_path / ("rootfs-" + marker)
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "fmn-sif-release").write_text("made by test_local_oras %s\n" % marker)
    (root / "bin").mkdir()
    path = tmp_path / (marker + ".sif")
    sif_writer.sif_from_rootfs(str(root), str(path))
    return path


def image_file(name, path):
    mount = subprocess.run(["podman", "image", "mount", name], check=True, capture_output=True, text=True)
    try:
        with open(os.path.join(mount.stdout.strip(), path.lstrip("/"))) as f:
            return f.read()
    finally:
        subprocess.run(["podman", "image", "unmount", name], check=True, stdout=subprocess.DEVNULL)


def image_id(name):
    return subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", name], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_pulled_through_the_mirror_converted_and_cached(tmp_path, mirror, registries_conf, images):
    host, _unused = mirror
    marker = uuid.uuid4().hex[:8]
    digest = sif_writer.push_sif(str(make_sif(tmp_path, marker)), "%s/%s:%s" % (host, REPOSITORY, marker))
    uri = "oras://docker.io/%s@%s" % (REPOSITORY, digest)

    name = oras.podman_image(uri, str(tmp_path))
    images.append(name)
    assert name == "localhost/fuzz-multinode-sif:" + digest[len("sha256:"):]
    assert image_file(name, "/etc/fmn-sif-release") == "made by test_local_oras %s\n" % marker
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sif-")]  # the work files are gone
    first = image_id(name)

    # The same digest again: the image store answers, the registry is not asked.
    registries_conf.write_text('[[registry]]\nprefix = "docker.io"\nlocation = "127.0.0.1:1"\ninsecure = true\n')
    assert oras.podman_image(uri, str(tmp_path)) == name
    assert image_id(name) == first


def test_a_tag_is_looked_up_and_its_digest_used(tmp_path, mirror, registries_conf, images):
    host, _unused = mirror
    marker = uuid.uuid4().hex[:8]
    digest = sif_writer.push_sif(str(make_sif(tmp_path, marker)), "%s/%s:%s" % (host, REPOSITORY, marker))
    name = oras.podman_image("oras://docker.io/%s:%s" % (REPOSITORY, marker), str(tmp_path))
    images.append(name)
    assert name == "localhost/fuzz-multinode-sif:" + digest[len("sha256:"):]
    first = image_id(name)
    assert oras.podman_image("oras://docker.io/%s@%s" % (REPOSITORY, digest), str(tmp_path)) == name
    assert image_id(name) == first


def test_an_unknown_image(tmp_path, registries_conf):
    uri = "oras://docker.io/%s:no-such-tag" % REPOSITORY
    with pytest.raises(RuntimeFailure, match="image %s: no such image in the registry" % uri):
        oras.podman_image(uri, str(tmp_path))
    missing = "sha256:" + "0" * 64
    with pytest.raises(RuntimeFailure, match="no such image in the registry"):
        oras.podman_image("oras://docker.io/%s@%s" % (REPOSITORY, missing), str(tmp_path))


def test_an_unreachable_registry(tmp_path, monkeypatch):
    conf = tmp_path / "registries.conf"
    conf.write_text('[[registry]]\nlocation = "127.0.0.1:1"\ninsecure = true\n')
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    with pytest.raises(RuntimeFailure, match=r"image oras://127.0.0.1:1/a/b.sif:v1: the registry is unreachable"
                                             r" \(skopeo: .*connection refused"):
        oras.podman_image("oras://127.0.0.1:1/a/b.sif:v1", str(tmp_path))


def test_credentials(tmp_path, monkeypatch, images):
    directory = tmp_path / "private"
    directory.mkdir()
    with registry(directory, htpasswd(tmp_path / "htpasswd", "fuzz", "s3cret")) as host:
        conf = tmp_path / "registries.conf"
        conf.write_text('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host)
        monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
        digest = sif_writer.push_sif(str(make_sif(tmp_path, "private")), host + "/site/private.sif:v1",
                                     login=("fuzz", "s3cret"))
        uri = "oras://%s/site/private.sif@%s" % (host, digest)
        for password in ("wrong", None):
            with pytest.raises(RuntimeFailure, match="image %s: the registry refused the credentials" % uri):
                oras.podman_image(uri, str(tmp_path), authfile=_authfile(tmp_path, host, password))
        name = oras.podman_image(uri, str(tmp_path), authfile=_authfile(tmp_path, host, "s3cret"))
        images.append(name)
        assert image_file(name, "/etc/fmn-sif-release") == "made by test_local_oras private\n"


def _authfile(tmp_path, host, password):
    path = tmp_path / ("auth-%s.json" % password)
    auths = {host: {"auth": base64.b64encode(b"fuzz:" + password.encode()).decode()}} if password else {}
    path.write_text(json.dumps({"auths": auths}))
    return str(path)


def _blob(storage, digest):
    hexdigest = digest[len("sha256:"):]
    return storage / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexdigest[:2] / hexdigest / "data"


def test_digest_mismatches(tmp_path, mirror, registries_conf):
    """The registry's storage altered under it: the manifest, then the SIF."""
    host, storage = mirror
    marker = uuid.uuid4().hex[:8]
    digest = sif_writer.push_sif(str(make_sif(tmp_path, marker)), "%s/%s:%s" % (host, REPOSITORY, marker))
    uri = "oras://docker.io/%s@%s" % (REPOSITORY, digest)
    manifest_blob = _blob(storage, digest)
    manifest = manifest_blob.read_bytes()
    layer = json.loads(manifest)["layers"][0]["digest"]

    changed = json.loads(manifest)
    changed["annotations"] = {"altered": "yes"}
    manifest_blob.write_text(json.dumps(changed))
    try:
        with pytest.raises(RuntimeFailure, match="image %s: digest mismatch: the manifest the registry sent has"
                                                 " digest sha256:" % uri):
            oras.podman_image(uri, str(tmp_path))
    finally:
        manifest_blob.write_bytes(manifest)

    with open(_blob(storage, layer), "r+b") as f:
        f.seek(40000)
        f.write(b"altered")
    with pytest.raises(RuntimeFailure, match="image %s: the registry's content does not match its digest "
                                             r"\(skopeo: .*Digest did not match, expected %s" % (uri, layer)):
        oras.podman_image(uri, str(tmp_path))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sif-")]


def test_not_a_sif(tmp_path, mirror, registries_conf):
    host, _unused = mirror
    oci = tmp_path / "layer.tar"
    oci.write_bytes(b"\0" * 1024)
    digest = sif_writer.push_sif(str(oci), "%s/library/alpine:oci" % host,
                                 config_type="application/vnd.oci.image.config.v1+json",
                                 layer_type="application/vnd.oci.image.layer.v1.tar")
    with pytest.raises(RuntimeFailure, match="image oras://docker.io/library/alpine@%s: not a SIF image "
                                             r"\(its config is application/vnd.oci.image.config.v1\+json" % digest):
        oras.podman_image("oras://docker.io/library/alpine@" + digest, str(tmp_path))

    junk = tmp_path / "junk.sif"
    junk.write_bytes(b"#!/bin/sh\necho I am no SIF\n")
    digest = sif_writer.push_sif(str(junk), "%s/%s:junk" % (host, REPOSITORY))
    with pytest.raises(RuntimeFailure, match="image oras://docker.io/%s:junk: not a SIF file" % REPOSITORY):
        oras.podman_image("oras://docker.io/%s:junk" % REPOSITORY, str(tmp_path))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("sif-")]


def test_a_missing_work_directory(tmp_path, mirror, registries_conf):
    host, _unused = mirror
    digest = sif_writer.push_sif(str(make_sif(tmp_path, "workdir")), "%s/%s:workdir" % (host, REPOSITORY))
    uri = "oras://docker.io/%s@%s" % (REPOSITORY, digest)
    with pytest.raises(RuntimeFailure, match="image %s: cannot convert it in %s: No such file or directory"
                                             % (uri, tmp_path / "missing")):
        oras.podman_image(uri, str(tmp_path / "missing"))


def test_two_jobs_starting_at_once_convert_once(tmp_path, mirror, registries_conf, images):
    host, _unused = mirror
    digest = sif_writer.push_sif(str(make_sif(tmp_path, "twice")), "%s/%s:twice" % (host, REPOSITORY))
    uri = "oras://docker.io/%s@%s" % (REPOSITORY, digest)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        names = list(pool.map(lambda _: oras.podman_image(uri, str(tmp_path)), range(2)))
    images.extend(names)
    assert names[0] == names[1]
    made = subprocess.run(["podman", "images", "--all", "--quiet", "--no-trunc", "--filter",
                           "label=org.fuzz-multinode.source=" + uri], check=True, capture_output=True, text=True)
    assert made.stdout.split() == ["sha256:" + image_id(names[0])]


def test_a_registry_that_never_answers(tmp_path, monkeypatch):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        host = "127.0.0.1:%d" % silent.getsockname()[1]
        conf = tmp_path / "registries.conf"
        conf.write_text('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host)
        monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
        monkeypatch.setattr(oras, "QUERY_WITHIN", 2)
        uri = "oras://%s/a/b.sif:v1" % host
        started = time.monotonic()
        with pytest.raises(RuntimeFailure, match="image %s: skopeo inspect did not finish within 2 s" % uri):
            oras.podman_image(uri, str(tmp_path))
        assert time.monotonic() - started < 10
