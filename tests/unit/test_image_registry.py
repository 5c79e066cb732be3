"""A job's image.secret on its nodes (multinode_runtime/image_registry.py):
the registry credentials checked, written as a containers-auth.json(5) file
for the image's registry only while its image is pulled (root's, 0600,
removed after), never shown in a message; the images pulled with
credentials remembered; and the reasons read from podman's and skopeo's
messages about a failed pull. The pulls themselves, from a real registry
that asks for credentials: tests/local/test_local_image_secret.py."""

import base64
import json
import os
import stat
import sys
import textwrap

import pytest
from multinode_runtime import cli, containers, image_registry, oras, registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.spec import JobSpec

PASSWORD = "pa55:word-never-shown"
CREDENTIALS = {"username": "fuzz", "password": PASSWORD}
URI = "docker://registry.example.org:5000/site/private:1"


@pytest.mark.parametrize("uri, host", [
    ("docker://registry.example.org:5000/site/private:1", "registry.example.org:5000"),
    ("docker://mirror.gcr.io/library/alpine:3.16", "mirror.gcr.io"),
    ("docker://localhost/a/b@sha256:" + "a" * 64, "localhost"),
    ("docker://alpine", "docker.io"),                 # containers/image's default registry
    ("docker://library/alpine:3.16", "docker.io"),
    ("docker://fuzzball/solver:1", "docker.io"),
    ("oras://127.0.0.1:5000/site/solver.sif@sha256:" + "b" * 64, "127.0.0.1:5000"),
    ("oras://docker.io/anderbubble/openmpi-hello-world.sif:latest", "docker.io"),
])
def test_the_credentials_are_for_the_registry_the_uri_names(uri, host):
    assert image_registry.registry_host(uri) == host


@pytest.mark.parametrize("value", [
    "fuzz:" + PASSWORD,
    {"username": "fuzz"},
    {"username": "fuzz", "password": PASSWORD, "email": "x"},
    {"username": "", "password": PASSWORD},
    {"username": "fu:zz", "password": PASSWORD},
    {"username": "fuzz", "password": 1234},
    ["fuzz", PASSWORD],
])
def test_a_value_that_is_no_registry_credentials_is_refused_naming_the_secret_only(value):
    with pytest.raises(RuntimeFailure) as info:
        image_registry.credentials("user/registry", value)
    assert str(info.value) == (
        "secret://user/registry: its value in fuzz_multinode_secrets is not registry credentials "
        "(a mapping of username and password, both non-empty strings, the user name without ':')")


def _decoded(entry):
    return base64.b64decode(entry["auth"]).decode()


def test_the_auth_document_keeps_the_sites_entries_but_its_own_for_the_registry():
    site = {"auths": {"mirror.example.org": {"auth": "c2l0ZTptaXJyb3I="},
                      "registry.example.org:5000": {"auth": "b2xkOm9sZA=="},
                      "registry.example.org:5000/site/private": {"auth": "b2xkOm9sZA=="}},
            "credHelpers": {"registry.example.org:5000": "ecr-login", "other.example.org": "gcr"}}
    document = image_registry.auth_document("registry.example.org:5000", "fuzz", PASSWORD, site)
    assert set(document["auths"]) == {"mirror.example.org", "registry.example.org:5000"}
    assert _decoded(document["auths"]["registry.example.org:5000"]) == "fuzz:" + PASSWORD
    assert document["auths"]["mirror.example.org"] == site["auths"]["mirror.example.org"]
    assert document["credHelpers"] == {"other.example.org": "gcr"}
    assert image_registry.auth_document("docker.io", "u", "p", None) == {
        "auths": {"docker.io": {"auth": base64.b64encode(b"u:p").decode()}}}


def job_spec(secret="user/registry", uri=URI, execution="container"):
    return JobSpec.from_dict({"job": "j", "run": "r1", "execution": execution,
                              "image": {"uri": uri, "secret": secret},
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"}]})


@pytest.fixture
def node(runtime_state, monkeypatch):
    """This node's state in a temporary directory, job j's directory made,
    and no default auth file of Podman's."""
    (runtime_state / "run" / "jobs" / "j").mkdir(parents=True)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(runtime_state / "no-site-auth.json"))
    monkeypatch.setattr(image_registry, "CREDENTIALED_FILE", str(runtime_state / "lib" / "credentialed"))
    return runtime_state


def test_the_auth_file_is_roots_only_and_there_only_during_the_pull(node):
    path = registry.job_path("j", image_registry.AUTH_FILE)
    with image_registry.pull_credentials(job_spec(), "n1", {"user/registry": CREDENTIALS}) as authfile:
        assert authfile == path
        info = os.stat(authfile)
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
        with open(authfile) as handle:
            document = json.load(handle)
        assert list(document["auths"]) == ["registry.example.org:5000"]
        assert _decoded(document["auths"]["registry.example.org:5000"]) == "fuzz:" + PASSWORD
    assert not os.path.exists(path)
    with pytest.raises(RuntimeError):
        with image_registry.pull_credentials(job_spec(), "n1", {"user/registry": CREDENTIALS}):
            raise RuntimeError("the pull failed")
    assert not os.path.exists(path)
    assert sorted(os.listdir(registry.job_dir("j"))) == []


def test_the_sites_auth_file_is_merged_in(node, monkeypatch):
    site = node / "site-auth.json"
    site.write_text(json.dumps({"auths": {"mirror.example.org": {"auth": "c2l0ZTptaXJyb3I="}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(site))
    with image_registry.pull_credentials(job_spec(), "n1", {"user/registry": CREDENTIALS}) as authfile:
        with open(authfile) as handle:
            auths = json.load(handle)["auths"]
    assert sorted(auths) == ["mirror.example.org", "registry.example.org:5000"]
    monkeypatch.delenv("REGISTRY_AUTH_FILE")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert image_registry.site_auth_file() == "/run/user/7/containers/auth.json"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert image_registry.site_auth_file() == "/run/containers/%d/auth.json" % os.getuid()


def test_a_job_without_image_secret_has_no_auth_file(node):
    with image_registry.pull_credentials(job_spec(secret=None), "n1", {"user/registry": CREDENTIALS}) as authfile:
        assert authfile is None


@pytest.mark.parametrize("secrets, says", [
    (None, "the value of its image.secret, secret://user/registry, was not given with the job's "
           "registration; the play gives each node the values from fuzz_multinode_secrets"),
    ({"user/other": CREDENTIALS}, "the value of its image.secret, secret://user/registry, was not given"),
    ({"user/registry": "fuzz:" + PASSWORD}, "secret://user/registry: its value in fuzz_multinode_secrets "
                                            "is not registry credentials"),
])
def test_missing_or_malformed_credentials_fail_the_pull_naming_node_image_and_secret(node, secrets, says):
    with pytest.raises(RuntimeFailure) as info:
        with image_registry.pull_credentials(job_spec(), "n1", secrets):
            pytest.fail("no pull without its credentials")
    message = str(info.value)
    assert message.startswith("node n1 cannot pull image %s: " % URI)
    assert says in message
    assert PASSWORD not in message
    assert not os.path.exists(registry.job_path("j", image_registry.AUTH_FILE))


def test_the_images_pulled_with_credentials_are_remembered_roots_only(node):
    first, second = "a" * 64, "b" * 64
    assert not image_registry.pulled_with_credentials(first)
    image_registry.remember_credentialed(first)
    image_registry.remember_credentialed(first)
    image_registry.remember_credentialed(second)
    assert image_registry.pulled_with_credentials(first) and image_registry.pulled_with_credentials(second)
    record = node / "lib" / "credentialed"
    assert record.read_text() == first + "\n" + second + "\n"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    with pytest.raises(RuntimeFailure):
        image_registry.remember_credentialed("not-an-id\n" + first)


# -- what podman and skopeo say ------------------------------------------------

PODMAN_UNAUTHORIZED = ("Error: initializing source docker://127.0.0.1:5391/site/private:1: reading manifest 1 in "
                       "127.0.0.1:5391/site/private: unauthorized: authentication required")
PODMAN_HUB_DENIED = ("Error: initializing source docker://fuzzball/private:1: reading manifest 1 in "
                     "docker.io/fuzzball/private: denied: requested access to the resource is denied")
PODMAN_HUB_PASSWORD = ("Error: initializing source docker://fuzzball/private:1: unable to retrieve auth token: "
                       "invalid username/password: unauthorized: incorrect username or password")
PODMAN_MIRROR = ("Error: initializing source docker://private.example/site/private:1: (Mirrors also failed: "
                 "[127.0.0.1:5391/site/private:1: reading manifest 1 in 127.0.0.1:5391/site/private: unauthorized: "
                 "authentication required]): private.example/site/private:1: pinging container registry "
                 "private.example: Get \"https://private.example/v2/\": dial tcp: lookup private.example on "
                 "10.255.255.53:53: no such host")
PODMAN_UNKNOWN = ("Error: initializing source docker://127.0.0.1:5391/site/nosuch:1: reading manifest 1 in "
                  "127.0.0.1:5391/site/nosuch: manifest unknown: manifest unknown")
PODMAN_UNREACHABLE = ("Error: initializing source docker://127.0.0.1:1/a/b:1: pinging container registry "
                      "127.0.0.1:1: Get \"https://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: connect: connection "
                      "refused")
PODMAN_LOCAL = ("Error: writing blob: adding layer with blob \"sha256:5fab\": open /var/lib/containers/storage/"
                "vfs/dir/x: permission denied")
SKOPEO_UNAUTHORIZED = ('time="2026-12-03T04:01:37Z" level=fatal msg="initializing source docker://127.0.0.1:5391/'
                       'site/private:1: reading manifest 1 in 127.0.0.1:5391/site/private: unauthorized: '
                       'authentication required"\n')

REFUSED = "the registry refused the credentials"
NONE_GIVEN = "the registry refused access without credentials (the job has no image.secret)"


@pytest.mark.parametrize("message, with_credentials, reason", [
    (PODMAN_UNAUTHORIZED, True, REFUSED),
    (PODMAN_UNAUTHORIZED, False, NONE_GIVEN),
    (PODMAN_HUB_DENIED, True, REFUSED),
    (PODMAN_HUB_PASSWORD, True, REFUSED),
    (PODMAN_MIRROR, True, REFUSED),  # the mirror refused; the registry itself is not reachable
    (PODMAN_UNKNOWN, True, "no such image in the registry"),
    (PODMAN_UNREACHABLE, False, "the registry is unreachable"),
    (PODMAN_LOCAL, True, "the pull failed"),  # a local "permission denied" is no refusal of the registry
])
def test_podmans_reasons(message, with_credentials, reason):
    detail = message[len("Error: "):]
    assert image_registry.pull_reason(detail, with_credentials) == reason
    said = containers._pull_failure(125, message, "/run/auth.json" if with_credentials else None)
    assert said.startswith("%s (podman: %s)" % (reason, detail))
    # Only an unreachable registry has a known fix, and the message says it.
    if reason == "the registry is unreachable":
        assert said.endswith("; give the node a registry it reaches, a mirror in /etc/containers/registries.conf.d/ "
                             '(the guide "Jobs in their images"), or run the job on the bare host: '
                             "-e fuzz_multinode_execution=host")
    else:
        assert said == "%s (podman: %s)" % (reason, detail)


def test_podmans_own_timeout_and_silence_are_said_as_they_are():
    assert containers._pull_failure(124, "podman pull did not finish within 1800 s", "/a") == (
        "podman pull did not finish within 1800 s")
    assert containers._pull_failure(125, "", None) == "podman pull exited with status 125"


@pytest.mark.parametrize("with_credentials, reason", [(True, REFUSED), (False, NONE_GIVEN)])
def test_skopeos_refusal(with_credentials, reason):
    failure = oras.pull_failure("oras://127.0.0.1:5391/site/private.sif:1", SKOPEO_UNAUTHORIZED, with_credentials)
    assert str(failure) == ("image oras://127.0.0.1:5391/site/private.sif:1: %s (skopeo: initializing source "
                            "docker://127.0.0.1:5391/site/private:1: reading manifest 1 in 127.0.0.1:5391/site/"
                            "private: unauthorized: authentication required)" % reason)


# -- prepare: the credentials reach the pull, and only the pull ------------------------

FAKE_PODMAN = textwrap.dedent("""\
    #!/bin/sh
    # Podman for prepare's calls: no image is cached; a pull records its
    # arguments and the auth file it was given (contents and mode), and
    # the image is there after it; a run fails.
    case "$1" in
    image) [ -e "$FAKE_RECORD/pull-args" ] && printf '%064d\\n' 7 ;;
    pull)
        printf '%s\\n' "$*" > "$FAKE_RECORD/pull-args"
        while [ $# -gt 0 ]; do
            if [ "$1" = --authfile ]; then cp "$2" "$FAKE_RECORD/authfile"; stat -c %a "$2" > "$FAKE_RECORD/mode"; fi
            shift
        done
        ls "$FAKE_JOB_DIR" > "$FAKE_RECORD/job-dir"
        exit 0 ;;
    *) echo "Error: no run here" >&2; exit 125 ;;
    esac
""")


def test_prepare_keeps_the_env_secrets_before_the_pull_and_gives_the_credentials_to_it_only(
        node, monkeypatch, capsys, tmp_path):
    record = tmp_path / "record"
    record.mkdir()
    fake = tmp_path / "podman"
    fake.write_text(FAKE_PODMAN)
    fake.chmod(0o755)
    monkeypatch.setattr(containers, "PODMAN", str(fake))
    monkeypatch.setenv("FAKE_RECORD", str(record))
    monkeypatch.setenv("FAKE_JOB_DIR", str(node / "run" / "jobs" / "j"))
    os.rmdir(node / "run" / "jobs" / "j")
    user = __import__("pwd").getpwuid(os.getuid()).pw_name
    spec = {"job": "j", "run": "r1", "user": user, "argv": ["true"], "execution": "container",
            "secret_env": {"TOKEN": "user/token"}, "image": {"uri": URI, "secret": "user/registry"},
            "ranks": [{"rank": 0, "name": "j-0", "node": "n1", "address": "10.0.0.1",
                       "env": {"TOKEN": "secret://user/token"}}]}
    stdin = {"spec": spec, "secrets": {"user/token": "t0ken", "user/registry": CREDENTIALS}}
    monkeypatch.setattr(sys, "stdin", _Stdin(stdin))
    code = cli.main(["multinode-runtime", "prepare", "--node", "n1", "--secrets"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "cannot start the container of job j" in err  # after the pull: this podman runs nothing

    # The pull had the credentials, in a root-only file in the job's
    # directory, beside the env secrets kept before it, and only the file's
    # path in its arguments.
    assert (record / "pull-args").read_text().split() == [
        "pull", "--quiet", "--authfile", registry.job_path("j", image_registry.AUTH_FILE),
        URI]
    document = json.loads((record / "authfile").read_text())
    assert _decoded(document["auths"]["registry.example.org:5000"]) == "fuzz:" + PASSWORD
    assert (record / "mode").read_text().strip() == "600"
    assert {"secrets.json", "auth.json"} <= set((record / "job-dir").read_text().split())
    # After it: the credentials are gone; the env value is kept, alone.
    assert not os.path.exists(registry.job_path("j", image_registry.AUTH_FILE))
    with open(registry.job_path("j", registry.SECRETS_FILE)) as handle:
        assert json.load(handle) == {"user/token": "t0ken"}
    assert PASSWORD not in out + err


class _Stdin:
    def __init__(self, data):
        self.text = json.dumps(data)

    def read(self, *args):
        text, self.text = self.text, ""
        return text
