"""image.secret against a real registry that asks for credentials (Debian's
docker-registry with an htpasswd file) on this machine: the node runtime's
pull of a docker:// image (containers.pull, podman pull) and of an oras://
SIF (oras.podman_image, skopeo) with the job's credentials written by
image_registry.pull_credentials, as prepare makes them; then run-job.yml
in local mode, the credentials delivered by the job role. (`podman run`
does not work on this machine: a job in its image runs in the Molecule
scenario containers.)"""

import base64
import json
import os
import re
import subprocess
import sys
import uuid

import pytest
import yaml

import local_jobs as lj
from local_registry import htpasswd, registry

sys.path.insert(0, str(lj.REPO / "molecule" / "shared"))
from multinode_runtime import containers, image_registry  # noqa: E402
from multinode_runtime import registry as node_registry  # noqa: E402
from multinode_runtime.errors import RuntimeFailure  # noqa: E402
from multinode_runtime.spec import JobSpec  # noqa: E402

import fuzz_playbook  # noqa: E402
import sif_writer  # noqa: E402

TOOLS = ("docker-registry", "skopeo", "podman", "mksquashfs", "unsquashfs")
USER, PASSWORD = "fuzz", "s3cret-never-shown"
JOB = "image-secret"
MARKER = uuid.uuid4().hex[:8]
REFUSED = "the registry refused the credentials"
NONE_GIVEN = r"the registry refused access without credentials \(the job has no image.secret\)"


@pytest.fixture(scope="module", autouse=True)
def tools():
    missing = [tool for tool in TOOLS if not any(os.access(os.path.join(d, tool), os.X_OK)
                                                 for d in os.environ.get("PATH", "").split(":") + ["/usr/bin"])]
    if missing:
        pytest.fail("needs %s (scripts/setup installs them)" % " ".join(missing), pytrace=False)


def podman(*args, **kwargs):
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True,
                          check=kwargs.pop("check", False), **kwargs)


def _push_image(tmp, host, repository, authfile=None):
    """A small image (one file naming this test run) pushed to host."""
    root = tmp / "rootfs"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "fmn-secret-release").write_text("made by test_local_image_secret %s\n" % MARKER)
    source = "localhost/fmn-secret-source:" + MARKER
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    podman("import", "--quiet", "-", source, stdin=tar.stdout, check=True)
    tar.wait()
    try:
        podman("push", "--quiet", "--tls-verify=false", *(["--authfile", str(authfile)] if authfile else []),
               source, "docker://%s/%s:%s" % (host, repository, MARKER), check=True)
    finally:
        podman("rmi", "--force", source)
    return "docker://%s/%s:%s" % (host, repository, MARKER)


def _authfile(path, host, password):
    path.write_text(json.dumps({"auths": {host: {"auth": base64.b64encode(
        ("%s:%s" % (USER, password)).encode()).decode()}}}))
    return path


def _no_credentials(directory):
    """A site auth file with no credentials (Podman fails on a missing one)."""
    path = directory / "site-auth.json"
    path.write_text('{"auths": {}}')
    return path


@pytest.fixture(scope="module")
def private(tmp_path_factory):
    """A registry that asks for credentials, holding a docker:// image and a
    SIF: (its HOST:PORT, its log, the docker:// URI, the oras:// URI)."""
    directory = tmp_path_factory.mktemp("private")
    with registry(directory, htpasswd(directory / "htpasswd", USER, PASSWORD)) as host:
        uri = _push_image(directory, host, "site/private", _authfile(directory / "auth.json", host, PASSWORD))
        sif = directory / "private.sif"
        sif_writer.sif_from_rootfs(str(directory / "rootfs"), str(sif))
        digest = sif_writer.push_sif(str(sif), "%s/site/private.sif:%s" % (host, MARKER), login=(USER, PASSWORD))
        yield host, directory / "registry.log", uri, "oras://%s/site/private.sif@%s" % (host, digest)


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """A registry that asks for nothing, holding a docker:// image:
    (its log, the image's URI)."""
    directory = tmp_path_factory.mktemp("public")
    with registry(directory) as host:
        yield directory / "registry.log", _push_image(directory, host, "site/public")


@pytest.fixture
def node(tmp_path, monkeypatch, private, public):
    """This machine as a node with job JOB registered: the runtime's state in
    tmp_path, the registries reached without TLS, no site auth file."""
    monkeypatch.setattr(node_registry, "STATE_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(node_registry, "JOBS_DIR", str(tmp_path / "run" / "jobs"))
    monkeypatch.setattr(image_registry, "CREDENTIALED_FILE", str(tmp_path / "lib" / "credentialed-images"))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(_no_credentials(tmp_path)))
    (tmp_path / "run" / "jobs" / JOB).mkdir(parents=True)
    public_host = public[1].split("/")[2]
    conf = tmp_path / "registries.conf"
    conf.write_text("".join('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host
                            for host in (private[0], public_host)))
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    return tmp_path


@pytest.fixture
def images():
    """Names of the Podman images a test pulled, removed after it."""
    made = []
    yield made
    for name in made:
        podman("rmi", "--force", name)


def pull(uri, password):
    """containers.pull of uri as prepare makes it for a job whose
    image.secret's value has this password (None: a job naming no
    image.secret)."""
    spec = JobSpec.from_dict({"job": JOB, "run": "r1", "execution": "container",
                              "image": {"uri": uri, "secret": "user/registry" if password else None},
                              "ranks": [{"rank": 0, "name": JOB + "-0", "node": "node1"}]})
    secrets = {"user/registry": {"username": USER, "password": password}} if password else None
    with image_registry.pull_credentials(spec, "node1", secrets) as authfile:
        return containers.pull(uri, "node1", authfile)


def requests(log, repository=None, status=None):
    """How many requests the registry logged (for a repository's manifests,
    with a status)."""
    path = r"/v2/%s/manifests/\S+" % re.escape(repository) if repository else r"/v2/\S*"
    pattern = re.compile(r'"(?:GET|HEAD) %s HTTP/1.1" %s' % (path, status or r"\d+"))
    return len(pattern.findall(log.read_text()))


def image_file(name, path):
    mount = podman("image", "mount", name, check=True)
    try:
        with open(os.path.join(mount.stdout.strip(), path.lstrip("/"))) as f:
            return f.read()
    finally:
        podman("image", "unmount", name, check=True)


def failure(uri, reason, tool):
    return pytest.raises(RuntimeFailure, match=r"^node node1 cannot pull image %s: %s \(%s: .*(unauthorized|"
                                               r"authentication required)" % (re.escape(uri), reason, tool))


def test_a_docker_image_behind_credentials(node, private, images):
    _unused, log, uri, _unused = private
    name = uri[len("docker://"):]
    for password, reason in ((None, NONE_GIVEN), ("wrong", REFUSED)):
        with failure(uri, reason, "podman") as info:
            pull(uri, password)
        assert "wrong" not in str(info.value)
        assert podman("image", "exists", name).returncode == 1

    assert pull(uri, PASSWORD) == name
    images.append(name)
    assert image_file(name, "/etc/fmn-secret-release") == "made by test_local_image_secret %s\n" % MARKER
    assert not os.path.exists(node_registry.job_path(JOB, image_registry.AUTH_FILE))

    # Cached now, and still every pull with the job's credentials asks the
    # registry: the right ones get it again, wrong ones are refused.
    authorized = requests(log, "site/private", 200)
    assert pull(uri, PASSWORD) == name
    assert requests(log, "site/private", 200) > authorized
    with failure(uri, REFUSED, "podman"):
        pull(uri, "wrong")
    # A job naming no image.secret does not get it from the cache either.
    with failure(uri, NONE_GIVEN, "podman"):
        pull(uri, None)
    assert podman("image", "exists", name).returncode == 0  # a refusal removes nothing


def test_an_oras_image_behind_credentials(node, private, images):
    _unused, log, _unused, uri = private
    for password, reason in ((None, NONE_GIVEN), ("wrong", REFUSED)):
        with failure(uri, reason, "skopeo"):
            pull(uri, password)

    name = pull(uri, PASSWORD)
    images.append(name)
    assert image_file(name, "/etc/fmn-secret-release") == "made by test_local_image_secret %s\n" % MARKER

    # A digest already imported: asked again all the same, with the job's credentials.
    authorized = requests(log, "site/private.sif", 200)
    assert pull(uri, PASSWORD) == name
    assert requests(log, "site/private.sif", 200) > authorized
    with failure(uri, REFUSED, "skopeo"):
        pull(uri, "wrong")
    with failure(uri, NONE_GIVEN, "skopeo"):
        pull(uri, None)


def test_a_job_with_a_secret_is_asked_even_for_an_image_the_site_pulled(node, private, images, monkeypatch,
                                                                        tmp_path):
    """An image the node's own credentials pulled (Podman's auth file) is
    the site's to share: a job naming no image.secret gets it from the
    cache. A job naming one is still asked for its credentials."""
    host, log, uri, _unused = private
    name = uri[len("docker://"):]
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(_authfile(tmp_path / "site-auth.json", host, PASSWORD)))
    assert pull(uri, None) == name
    images.append(name)
    asked = requests(log)
    assert pull(uri, None) == name
    assert requests(log) == asked
    with failure(uri, REFUSED, "podman"):
        pull(uri, "wrong")


def test_an_image_without_a_secret_is_taken_from_the_cache_without_asking(node, public, images):
    log, uri = public
    name = pull(uri, None)
    images.append(name)
    asked = requests(log)
    assert pull(uri, None) == name
    assert requests(log) == asked


def test_a_mirror_gets_the_sites_credentials_never_the_jobs(node, private, images, monkeypatch, tmp_path):
    """The image's URI names a registry the site mirrors at another host
    (registries.conf): the job's credentials are for the registry the URI
    names and never go to the mirror; the site's own auth file (Podman's,
    merged into the job's) has the mirror's."""
    host, _unused, uri, _unused = private
    mirrored = "docker://registry.fmn.invalid/%s" % uri.split("/", 3)[3]
    conf = tmp_path / "registries.conf"
    conf.write_text('[[registry]]\nprefix = "registry.fmn.invalid"\nlocation = "registry.fmn.invalid"\n'
                    '[[registry.mirror]]\nlocation = "%s"\ninsecure = true\n' % host)
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    with failure(mirrored, REFUSED, "podman"):
        pull(mirrored, PASSWORD)  # right for the mirror, but given for registry.fmn.invalid

    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(_authfile(tmp_path / "mirror-auth.json", host, PASSWORD)))
    assert pull(mirrored, "for-registry-fmn-invalid") == mirrored[len("docker://"):]
    images.append(mirrored[len("docker://"):])


def test_run_job_delivers_the_credentials_to_the_pull_and_shows_them_nowhere(private, tmp_path):
    """The whole path in local mode: run-job.yml's checks, the job role's
    no_log delivery, prepare's pull. The credentials are wrong here, so the
    job fails at its pull, before any rank starts, saying why; with the
    right ones the pull succeeds and the job then needs `podman run`, which
    this machine cannot do (the containers scenario runs that)."""
    host, _unused, uri, _unused = private
    fuzzfile = tmp_path / "image-secret.yml"
    fuzzfile.write_text(yaml.safe_dump({"version": "v4", "jobs": {JOB: {
        "image": {"uri": uri, "secret": "secret://user/registry"}, "command": ["/bin/true"]}}}))
    secrets = tmp_path / "secrets.yml"
    secrets.write_text(yaml.safe_dump({"fuzz_multinode_secrets": {
        "user/registry": {"username": USER, "password": "wr0ng-" + PASSWORD}}}))
    conf = tmp_path / "registries.conf"
    conf.write_text('[[registry]]\nlocation = "%s"\ninsecure = true\n' % host)
    argv, env = lj.playbook(fuzzfile, tmp_path / "logs", {"fuzz_multinode_execution": "container"})
    argv += ["-e", "@%s" % secrets, "-vvv"]
    env.update(CONTAINERS_REGISTRIES_CONF=str(conf), REGISTRY_AUTH_FILE=str(_no_credentials(tmp_path)))
    rc, output, _unused = fuzz_playbook.run_with_timeout(argv, env, lj.REPO, lj.PLAYBOOK_TIMEOUT, grace=60)
    (tmp_path / "image-secret.out").write_text(output)
    assert rc != 0
    assert re.search(r"node localhost cannot pull image %s: %s \(podman: .*unauthorized: authentication required\)"
                     % (re.escape(uri), REFUSED), output), output[-6000:]
    assert PASSWORD not in output
    assert not os.path.exists(node_registry.job_dir(JOB))  # cleaned up, auth file and all
