"""Local mode, the vendor's shapes of issue 28 run unchanged (their
Fuzzfiles, tests/fuzzfiles/vendor-shapes/, with this machine's paths and a
free port put in): a desktop-like service whose endpoint has a scope and a
viewer reading its page through FB_ENDPOINT_URL_VNC; a v1 workflow whose
data lives in volume://user/persistent across two runs, its input copied
to file:///reference.fa (the volume's root); a secret:// env value
expanded in a command's arguments, which the rank gets while no output,
log or spec shows it, and which fuzz_multinode_secret_arguments: refuse
refuses."""

import hashlib
import os
import pwd
import re
import secrets
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

import local_jobs as lj

SHAPES = lj.FUZZFILES / "vendor-shapes"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_line(text):
    return " ".join(text.split())


@pytest.fixture(scope="module")
def base():
    """A directory of the test's for the volume root and mount locations
    (the job user must reach them: not pytest's private ones)."""
    directory = Path(tempfile.mkdtemp(prefix="fmn-local-shapes-", dir="/var/tmp"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


# -- an endpoint with a scope ----------------------------------------------------

@pytest.fixture(scope="module")
def desktop(workdir, base):
    port = free_port()
    text = (SHAPES / "desktop-scope-v1.yml").read_text()
    for old, new in (("/session", str(base / "session")), ("/shared", str(base / "shared")),
                     ("6080", str(port)), ("0.0.0.0", "127.0.0.1")):
        assert old in text, old
        text = text.replace(old, new)
    fuzzfile = workdir / "desktop-scope.yml"
    fuzzfile.write_text(text)
    run = lj.run_job(fuzzfile, workdir / "desktop-logs", {"fuzz_multinode_volume_root": str(base / "desktop-root")})
    run.port, run.root = port, base / "desktop-root"
    return run


def test_the_viewer_reads_the_desktop_through_its_endpoint_with_a_scope(desktop):
    assert desktop.rc == 0, desktop
    run_id = re.search(r"desktop of (\S+)", desktop.log("viewer")).group(1)
    assert run_id in desktop.output
    # the desktop's log shows the endpoint's URL with its scope, not enforced
    ready = [line for line in desktop.lines("desktop") if "service desktop is ready" in line]
    assert len(ready) == 1, desktop.log("desktop")
    assert ready[0].endswith("; endpoint vnc at http://127.0.0.1:%d/ (scope user: not enforced, anyone who can "
                             "reach the node can reach it)" % desktop.port), ready
    assert ("services.desktop.network.endpoints[0].scope: not enforced (there is no ingress)"
            in one_line(desktop.output)), desktop


def test_the_accounts_persistent_volume_keeps_the_view_and_the_named_ephemeral_one_goes(desktop):
    root = desktop.root
    view = root / "account" / "persistent" / "last-view"
    assert view.read_text().startswith("desktop of "), desktop
    assert (root / "account").stat().st_uid == 0 and (root / "account").stat().st_mode & 0o777 == 0o755
    assert os.listdir(root / "ephemeral") == [], desktop  # the session volume (scratch) was the run's


# -- volume://user/persistent across two runs, file:///PATH ------------------------

@pytest.fixture(scope="module")
def home_runs(workdir, base):
    text = (SHAPES / "persistent-home-v1.yml").read_text()
    for old, new in (("/home/user", str(base / "home")), ("/data", str(base / "data"))):
        assert old in text, old
        text = text.replace(old, new)
    fuzzfile = workdir / "persistent-home.yml"
    fuzzfile.write_text(text)
    root = base / "home-root"
    runs = [lj.run_job(fuzzfile, workdir / ("home-logs-%d" % n), {"fuzz_multinode_volume_root": str(root)})
            for n in (1, 2)]
    return runs, root


def test_the_second_run_reads_what_the_first_wrote_in_the_users_persistent_volume(home_runs):
    (first, second), root = home_runs
    assert (first.rc, second.rc) == (0, 0), (first, second)
    ids = [re.search(r"runs: (.*)$", run.log("record-run"), re.M).group(1).split() for run in (first, second)]
    assert len(ids[0]) == 1 and ids[1][:1] == ids[0] and len(ids[1]) == 2 and ids[1][1] != ids[0][0], ids
    runs = root / "user" / "persistent" / "runs"
    assert runs.read_text().split() == ids[1]
    info, parent = (root / "user" / "persistent").stat(), (root / "user").stat()
    assert (info.st_uid, info.st_mode & 0o777) == (pwd.getpwnam(lj.JOB_USER).pw_uid, 0o700)
    assert (parent.st_uid, parent.st_mode & 0o777) == (0, 0o755)


def test_an_ingress_to_file_slash_slash_slash_lands_at_the_volumes_root(home_runs):
    (first, second), root = home_runs
    for run in (first, second):
        assert ">seq1 reference" in run.log("record-run").splitlines(), run
        assert "[ingress] volumes.data.ingress[0]: file://reference.fa -> file:///reference.fa on" in run.output
    assert os.listdir(root / "ephemeral") == []  # the run's data volume went with it


# -- a secret in a command's arguments --------------------------------------------

@pytest.fixture(scope="module")
def secret_runs(workdir):
    value = "fmn-" + secrets.token_hex(12)
    secrets_file = workdir / "shape-secrets.yml"
    secrets_file.write_text('fuzz_multinode_secrets: {"user/api-token": "%s"}\n' % value)
    fuzzfile = workdir / "secret-args.yml"
    fuzzfile.write_text((SHAPES / "secret-args-v4.yml").read_text())
    allowed = lj.run_job(fuzzfile, workdir / "secret-logs", args=["-e", "@%s" % secrets_file, "-vvv"])
    refused = lj.run_job(fuzzfile, workdir / "secret-refused-logs", {"fuzz_multinode_secret_arguments": "refuse"},
                         args=["-e", "@%s" % secrets_file])
    return value, allowed, refused


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_rank_gets_the_secret_in_its_arguments_in_command_and_script_mode(secret_runs):
    value, allowed, _unused = secret_runs
    assert allowed.rc == 0, allowed
    assert "command %s" % digest("Bearer " + value) in allowed.lines("call-api"), allowed.log("call-api")
    assert "script %s" % digest("--token=" + value) in allowed.lines("call-api-script")


def test_a_secret_in_arguments_is_warned_of_and_shown_nowhere(secret_runs):
    value, allowed, _unused = secret_runs
    output = one_line(allowed.output)
    for field in ("call-api.args[0]", "call-api-script.args[0]"):
        assert ("jobs.%s: expands the secret:// env value API_TOKEN: users logged in on the job's nodes can "
                "read it in the rank's command line (ps); other jobs cannot" % field) in output
    assert value not in allowed.output  # at -vvv (the spec holds parts only: tests/unit/test_job_inputs.py)
    for path in allowed.logs.rglob("*"):
        if path.is_file():
            assert value.encode() not in path.read_bytes(), path


def test_a_site_that_refuses_secret_arguments_gets_the_refusal_naming_the_field(secret_runs):
    value, _unused, refused = secret_runs
    assert refused.rc != 0
    assert ("jobs.call-api.args[0]: expands a secret:// env value, and every user of a node can read a "
            "process's command line (ps); read the secret from the job's environment instead "
            "(fuzz_multinode_secret_arguments: refuse)") in one_line(refused.output), refused
    assert "TASK [fuzz.multinode.node" not in refused.output  # no host touched
    assert value not in refused.output
