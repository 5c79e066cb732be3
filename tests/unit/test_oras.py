"""The pure parts of multinode_runtime.oras: oras:// references, telling a
SIF image's manifest from others, and the reasons read from skopeo's
messages (the messages below are skopeo 1.9's, captured from real pulls
against Debian's registry). The pulls themselves: tests/local/test_local_oras.py."""

import json
import re

import pytest
from multinode_runtime import oras
from multinode_runtime.errors import RuntimeFailure

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_the_spec_reference():
    uri = "oras://docker.io/anderbubble/openmpi-hello-world.sif@" + DIGEST
    ref = oras.parse_reference(uri)
    assert ref == oras.Reference("docker.io", "anderbubble/openmpi-hello-world.sif", "latest", DIGEST)
    assert ref.docker() == "docker://docker.io/anderbubble/openmpi-hello-world.sif@" + DIGEST


@pytest.mark.parametrize("uri, registry, repository, tag, digest", [
    ("oras://localhost:5000/a/b:v1", "localhost:5000", "a/b", "v1", None),
    ("oras://registry.example.org/lolcow.sif", "registry.example.org", "lolcow.sif", "latest", None),
    ("oras://10.0.0.1:5000/x/y/z__w-v.sif:1.0_rc-2", "10.0.0.1:5000", "x/y/z__w-v.sif", "1.0_rc-2", None),
    ("oras://ghcr.io/o/r:v2@" + DIGEST, "ghcr.io", "o/r", "v2", DIGEST),
])
def test_references(uri, registry, repository, tag, digest):
    assert oras.parse_reference(uri) == oras.Reference(registry, repository, tag, digest)


def test_a_digest_wins_over_a_tag():
    ref = oras.parse_reference("oras://ghcr.io/o/r:v2@" + DIGEST)
    assert ref.docker() == "docker://ghcr.io/o/r@" + DIGEST


@pytest.mark.parametrize("uri, message", [
    ("docker://docker.io/library/alpine:3.16", "not an oras:// reference"),
    ("oras://anderbubble/openmpi-hello-world.sif", "not a valid oras:// reference"),  # no registry
    ("oras://docker.io/Anderbubble/x.sif", "not a valid oras:// reference"),
    ("oras://docker.io/", "not a valid oras:// reference"),
    ("oras://docker.io/a/b c", "not a valid oras:// reference"),
    ("oras://docker.io/a/b:", "not a valid oras:// reference"),
    ("oras://docker.io/a/b:v\u00e9", "not a valid oras:// reference"),  # tags are ASCII
    ("oras://docker.io/a/b@sha256:abc", "digest 'sha256:abc' is not sha256: and 64 lower-case hex digits"),
    ("oras://docker.io/a/b@md5:" + "0" * 32, "is not sha256:"),
])
def test_bad_references_say_what_is_wrong(uri, message):
    with pytest.raises(RuntimeFailure, match="image %s: .*%s" % (_re(uri), _re(message))):
        oras.parse_reference(uri)


def _re(text):
    return re.escape(text)


def _manifest(config=oras.SIF_CONFIG, layers=((oras.SIF_LAYER, DIGEST, 1234),)):
    return json.dumps({
        "schemaVersion": 2, "mediaType": oras.OCI_MANIFEST,
        "config": {"mediaType": config, "size": 2, "digest": "sha256:" + "1" * 64},
        "layers": [{"mediaType": t, "digest": d, "size": s} for t, d, s in layers],
    }).encode()


def test_a_sif_manifest():
    assert oras.sif_layer("oras://h.io/a", _manifest()) == (DIGEST, 1234)


@pytest.mark.parametrize("manifest, message", [
    (_manifest(config="application/vnd.oci.image.config.v1+json",
               layers=(("application/vnd.oci.image.layer.v1.tar+gzip", DIGEST, 1),)),
     "its config is application/vnd.oci.image.config.v1+json"),
    (_manifest(layers=()), "has 0 layers of type application/vnd.sylabs.sif.layer.v1.sif"),
    (_manifest(layers=((oras.SIF_LAYER, DIGEST, 1), (oras.SIF_LAYER, DIGEST, 2))), "has 2 layers"),
    (_manifest(layers=((oras.SIF_LAYER, "sha512:00", 1),)), "has 1 layers"),
    (json.dumps({"schemaVersion": 2, "manifests": []}).encode(), "is not an OCI image manifest"),
    (b"<html>", "is not an OCI image manifest"),
])
def test_other_manifests_are_not_sif_images(manifest, message):
    with pytest.raises(RuntimeFailure, match="image oras://h.io/a: not a SIF image .*" + _re(message)):
        oras.sif_layer("oras://h.io/a", manifest)


UNKNOWN = (
    'time="2026-12-02T10:15:52Z" level=fatal msg="initializing source docker://anderbubble/openmpi-hello-world.sif:'
    'nope: (Mirrors also failed: [127.0.0.1:5077/anderbubble/openmpi-hello-world.sif:nope: reading manifest nope in '
    '127.0.0.1:5077/anderbubble/openmpi-hello-world.sif: manifest unknown: manifest unknown]): docker.io/anderbubble/'
    'openmpi-hello-world.sif:nope: pinging container registry registry-1.docker.io: Get \\"https://registry-1.docker.io'
    '/v2/\\": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host"\n')
UNREACHABLE = (
    'time="2026-12-02T10:18:17Z" level=fatal msg="Error parsing image name \\"docker://docker.io/anderbubble/'
    'openmpi-hello-world.sif:latest\\": pinging container registry registry-1.docker.io: Get \\"https://registry-1.'
    'docker.io/v2/\\": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host"\n')
MISMATCH = (
    'time="2026-12-02T10:19:00Z" level=fatal msg="writing blob: happened during read: Digest did not match, expected '
    'sha256:ba5fbc1d8550dab80648e2307382c55a85af251bc75d53dd4b9f0f9d7a9ea5d8, got '
    'sha256:2e8d9a436597da2fef20b86254d760a1d4e97610fa98e30f4418c43607717c69"\n')


@pytest.mark.parametrize("stderr, reason", [
    (UNKNOWN, "no such image in the registry"),
    (UNREACHABLE, "the registry is unreachable"),
    (MISMATCH, "the registry's content does not match its digest"),
    ("", "the pull failed"),
])
def test_pull_failures_name_the_image_and_the_reason(stderr, reason):
    failure = oras.pull_failure("oras://docker.io/a/b.sif", stderr)
    assert str(failure).startswith("image oras://docker.io/a/b.sif: %s (skopeo: " % reason)
    assert "time=" not in str(failure) and '\\"' not in str(failure)
    assert str(failure).endswith("-e fuzz_multinode_execution=host") == (reason == "the registry is unreachable")
