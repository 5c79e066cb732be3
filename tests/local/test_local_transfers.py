"""Local mode, data movement: a volume's ingress and egress against real
servers on this machine - an HTTP server of the test's own (a 50 MiB file,
one cut short) and moto's standalone S3 server (an IAM user's key; every
request after the setup is checked against it).

A workflow shaped like the vendor's OpenFOAM one: ingress from HTTP, S3
and a top-level files entry into an ephemeral volume; a job working in
`cwd` on the mount writes results, a 2-rank job reads them; egress to S3
and to a file on the controller; the bytes that arrive are checked, and
the 50 MiB file is seen growing under its temporary name while it streams.
Then what fails: ingress from an unreachable host, with wrong credentials,
of a missing key, cut short over an older file (every job NOT_RUN, the
message naming item, URI and reason, nothing half-written and nothing
left); egress after a failed job, with wrong keys, to a missing bucket, of
a file the job never wrote (each named, the others still copied); a path
that escapes its volume, refused before anything runs. No secret value
appears in any output or log."""

import glob
import hashlib
import http.server
import os
import pwd
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

import local_jobs as lj
from s3_server import S3Server, free_port  # (molecule/shared, on the path local_jobs sets)

MIB = 1 << 20
BIG = 50 * MIB
CUT_LENGTH, CUT_SENT = 8 * MIB, 3 * MIB


class Handler(http.server.BaseHTTPRequestHandler):
    """/big.bin: BIG bytes, the second half only once the test has seen the
    first on the node's disk (or after 30 s); /cut.bin: says CUT_LENGTH
    bytes, sends CUT_SENT and closes; anything else: 404."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        server = self.server
        if self.path == "/big.bin":
            self._head(200, BIG)
            half = BIG // 2
            self._send(server.big[:half])
            server.half_sent.set()
            server.seen_on_disk.wait(30)
            self._send(server.big[half:])
        elif self.path == "/cut.bin":
            self._head(200, CUT_LENGTH)
            self._send(server.big[:CUT_SENT])
        else:
            self._head(404, 0)

    def _head(self, status, length):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send(self, data):
        for at in range(0, len(data), MIB):
            self.wfile.write(data[at:at + MIB])
        self.wfile.flush()


@pytest.fixture(scope="module")
def servers(workdir):
    """The HTTP server, moto's S3 server with a user, its key and two
    buckets (fmn-in holding case/mesh.dat), the secrets file a user would
    pass (-e @FILE) and a volume root of the test's own."""
    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http_server.daemon_threads = True
    http_server.big = os.urandom(BIG)
    http_server.half_sent, http_server.seen_on_disk = threading.Event(), threading.Event()
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    base = Path(tempfile.mkdtemp(prefix="fmn-local-transfers-", dir="/var/tmp"))
    base.chmod(0o755)
    moto = None
    try:
        moto = S3Server("127.0.0.1", workdir / "moto.log")
        s3 = moto.s3
        s3.create_bucket(Bucket="fmn-in")
        s3.create_bucket(Bucket="fmn-out")
        mesh = os.urandom(3 * MIB + 17)
        s3.put_object(Bucket="fmn-in", Key="case/mesh.dat", Body=mesh)
        secrets_file = workdir / "transfer-secrets.yml"
        secrets_file.write_text(yaml.safe_dump({"fuzz_multinode_secrets": moto.secrets(),
                                                "fuzz_multinode_s3_endpoint_url": moto.endpoint}))
        yield {"http": "http://127.0.0.1:%d" % http_server.server_port, "server": http_server, "s3": s3,
               "mesh": mesh, "secrets_file": secrets_file, "secret_value": moto.key["secret_access_key"],
               "root": base / "volumes", "base": base}
    finally:
        http_server.shutdown()
        http_server.server_close()
        if moto:
            moto.stop()
        shutil.rmtree(base, ignore_errors=True)


def run(servers, workdir, name, text, **extra_vars):
    """run-job.yml on a Fuzzfile (HTTP, DATA: the server's URL and a mount
    location of the test's), with the secrets file and the test's volume
    root; the run, with what it left in the volume root."""
    data = servers["base"] / "mounts" / name
    fuzzfile = workdir / ("transfers-%s.yml" % name)
    fuzzfile.write_text(text.replace("HTTP", servers["http"]).replace("DATA", str(data)))
    result = lj.run_job(fuzzfile, workdir / ("transfers-%s-logs" % name),
                        dict({"fuzz_multinode_volume_root": str(servers["root"])}, **extra_vars),
                        args=["-e", "@%s" % servers["secrets_file"]])
    result.ephemeral_after = sorted(os.listdir(servers["root"] / "ephemeral")) \
        if (servers["root"] / "ephemeral").exists() else []
    return result


# -- a workflow that moves its data in and out -----------------------------------------

WORKFLOW = """\
version: v1
files:
  case.conf: |
    solver = simpleFoam
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {uri: "HTTP/big.bin"}
        destination: {uri: "file://inputs/big.bin"}
      - source: {uri: "s3://fmn-in/case/mesh.dat", secret: "secret://user/s3"}
        destination: {uri: "file://inputs/mesh.dat"}
        policy:
          timeout: {execute: 5m}
      - source: {uri: "file://case.conf"}
        destination: {uri: "file://case.conf"}
    egress:
      - source: {uri: "file://results/summary.txt"}
        destination: {uri: "s3://fmn-out/good/summary.txt", secret: "secret://user/s3"}
      - source: {uri: "file://results/big.copy"}
        destination: {uri: "s3://fmn-out/good/big.copy", secret: "secret://user/s3"}
      - source: {uri: "file://results/summary.txt"}
        destination: {uri: "file://openfoam/summary.txt"}
jobs:
  solve:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    cwd: DATA
    mounts:
      data: {location: DATA}
    script: |
      #!/bin/sh
      set -e
      mkdir -p results
      sha256sum inputs/big.bin inputs/mesh.dat >results/summary.txt
      cat case.conf >>results/summary.txt
      cp inputs/big.bin results/big.copy
      cat results/summary.txt
  check:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    depends-on:
      - name: solve
    cwd: DATA
    mounts:
      data: {location: DATA}
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME: $(tail -n 1 results/summary.txt)"'
    multinode:
      nodes: 2
      implementation: generic
"""


# Seconds the server holds the second half of the 50 MiB file back once the
# first is on the node's disk: long enough for the node's progress line and
# the controller's "still copying" lines.
HOLD = 6


@pytest.fixture(scope="module")
def moved(servers, workdir):
    """The workflow's run; meanwhile, the first half of the 50 MiB file
    looked for on the node's disk under its temporary name."""
    seen = {}

    def watch():
        servers["server"].half_sent.wait(120)
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and not seen:
            for part in glob.glob(str(servers["root"] / "ephemeral" / "*" / "data" / "inputs" / ".big.bin.*")):
                try:
                    size = os.path.getsize(part)
                except OSError:
                    continue
                if size >= BIG // 2:
                    seen.update(name=os.path.basename(part), size=size, final=os.path.exists(
                        os.path.join(os.path.dirname(part), "big.bin")))
            time.sleep(0.05)
        time.sleep(HOLD)
        servers["server"].seen_on_disk.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = run(servers, workdir, "moved", WORKFLOW, fuzz_multinode_progress_every=2)
    watcher.join(60)
    result.seen_streaming = seen
    return result


def digest(data):
    return hashlib.sha256(data).hexdigest()


def test_the_workflow_moves_its_data_in_and_out_and_leaves_the_machine_clean(moved):
    assert moved.rc == 0, moved
    assert moved.state == lj.cleaned(moved.state, moved.jobs), moved
    assert moved.ephemeral_after == [], moved


def test_the_jobs_read_the_ingress_in_cwd_on_the_mount_byte_for_byte(moved, servers):
    big, mesh = digest(servers["server"].big), digest(servers["mesh"])
    assert moved.lines("solve") == ["%s  inputs/big.bin" % big, "%s  inputs/mesh.dat" % mesh,
                                    "solver = simpleFoam"], moved
    assert sorted(moved.lines("check")) == ["check-%d: solver = simpleFoam" % rank for rank in (0, 1)], moved


def test_a_large_file_streams_to_disk_under_a_temporary_name(moved):
    """Half of it is on the node's disk before the server sends the rest,
    under a hidden temporary name, with no big.bin yet."""
    seen = moved.seen_streaming
    assert seen.get("size", 0) >= BIG // 2 and seen["name"].startswith(".big.bin.fuzz-part-"), (seen, moved)
    assert seen["final"] is False


def test_the_egress_arrives_in_s3_and_on_the_controller(moved, servers):
    s3 = servers["s3"]
    summary = s3.get_object(Bucket="fmn-out", Key="good/summary.txt")["Body"].read()
    assert summary.decode().splitlines() == moved.lines("solve")
    copy = s3.get_object(Bucket="fmn-out", Key="good/big.copy")["Body"].read()
    assert len(copy) == BIG and digest(copy) == digest(servers["server"].big)
    assert (moved.logs / "egress" / "openfoam" / "summary.txt").read_bytes() == summary
    assert os.listdir(moved.logs / "egress" / "openfoam") == ["summary.txt"]


def test_the_transfers_show_their_progress_in_the_workflow_output(moved):
    for line in ("[ingress] volumes.data.ingress[0]: %s/big.bin -> file://inputs/big.bin on localhost",
                 "[ingress] volumes.data.ingress[0]: done, 50.0 MiB in ",
                 "[ingress] volumes.data.ingress[1]: done, 3.0 MiB in ",
                 "[ingress] volumes.data.ingress[2]: done, 20 bytes in ",
                 "[egress] volumes.data.egress[1]: done, 50.0 MiB in ",
                 "[egress] volumes.data.egress[2]: done, "):
        assert line.split("%s", maxsplit=1)[0] in moved.output, moved
    # The server held the second half back for a while: the node said how far
    # it was, and the controller meanwhile that it was still copying.
    assert re.search(r"^\[ingress\] volumes\.data\.ingress\[0\]: \d+\.\d MiB of 50\.0 MiB \(\d+%\), "
                     r"[\d.]+ [KM]iB/s$", moved.output, re.M), moved
    assert "[ingress] volumes.data.ingress[0]: still copying, 2." in moved.output, moved


# -- what fails ------------------------------------------------------------------------------

INGRESS_FAILING = """\
version: v1
volumes:
  data:
    reference: STORE
    ingress:
      - source: {uri: "SOURCE"SECRET}
        destination: {uri: "file://inputs/big.bin"}
      - source: {uri: "HTTP/big.bin"}
        destination: {uri: "file://inputs/never.bin"}
jobs:
  solve:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    cwd: DATA
    mounts:
      data: {location: DATA}
    command: [/bin/sh, -c, "touch ran"]
"""

# name: (source, secret, the reason the run gives)
INGRESS_FAILURES = {
    "unreachable": ("http://127.0.0.1:PORT/big.bin", None, "cannot connect to 127.0.0.1:PORT: connection refused"),
    "credentials": ("s3://fmn-in/case/mesh.dat", "user/wrong-secret",
                    "S3 SignatureDoesNotMatch: The request signature we calculated does not match the signature "
                    "you provided. Check your key and signing method. (HTTP 403)"),
    "missing": ("s3://fmn-in/case/no-such-mesh.dat", "user/s3",
                "S3 NoSuchKey: The specified key does not exist. (HTTP 404)"),
    "cut": ("HTTP/cut.bin", None, "the source ended after %d of its %d bytes" % (CUT_SENT, CUT_LENGTH)),
}
OLD_FILE = b"the inputs of an earlier run\n"


@pytest.fixture(scope="module")
def ingress_failed(servers, workdir):
    """A run per failure; "cut" ingresses into a persistent volume that
    holds inputs/big.bin from an earlier run (made here as the job user's)."""
    runs = {}
    user = pwd.getpwnam(lj.JOB_USER)
    kept = servers["root"] / "persistent" / "fmn-local-kept"
    (kept / "inputs").mkdir(parents=True)
    (kept / "inputs" / "big.bin").write_bytes(OLD_FILE)
    for path in (kept, kept / "inputs", kept / "inputs" / "big.bin"):
        os.chown(path, user.pw_uid, user.pw_gid)
    kept.chmod(0o700)
    for name, (source, secret, _unused) in INGRESS_FAILURES.items():
        store = "volume://user/persistent/fmn-local-kept" if name == "cut" else "volume://user/ephemeral"
        source = source.replace("PORT", str(free_port("127.0.0.1")))
        text = (INGRESS_FAILING.replace("STORE", store).replace("SOURCE", source)
                .replace("SECRET", ', secret: "secret://%s"' % secret if secret else ""))
        runs[name] = run(servers, workdir, "ingress-" + name, text)
        runs[name].source = text.split('source: {uri: "', 1)[1].split('"', 1)[0].replace("HTTP", servers["http"])
    runs["kept"] = sorted(str(path.relative_to(kept)) for path in kept.rglob("*"))
    runs["kept_bytes"] = (kept / "inputs" / "big.bin").read_bytes()
    return runs


@pytest.mark.parametrize("name", sorted(INGRESS_FAILURES))
def test_a_failed_ingress_fails_the_workflow_before_any_job_naming_item_uri_and_reason(ingress_failed, name):
    failed = ingress_failed[name]
    port = failed.source.split(":")[2].split("/")[0] if name == "unreachable" else ""
    reason = INGRESS_FAILURES[name][2].replace("PORT", port)
    assert failed.rc != 0, failed
    assert failed.failure() == (
        "workflow failed: volumes.data.ingress[0]: %s -> file://inputs/big.bin: %s (on localhost); solve NOT_RUN: "
        "job solve not run: the ingress of the volumes failed" % (failed.source, reason)), failed
    assert "[ingress] volumes.data.ingress[1]" not in failed.output, failed  # the next item is not tried
    assert failed.log("solve") == "" and failed.state == lj.cleaned(failed.state, failed.jobs), failed


def test_a_failed_ingress_leaves_nothing_behind_and_nothing_half_written(ingress_failed):
    """The ephemeral volumes are gone; the persistent one still holds the
    earlier run's file, whole, and nothing else."""
    for name in INGRESS_FAILURES:
        assert ingress_failed[name].ephemeral_after == [], ingress_failed[name]
    assert ingress_failed["kept"] == ["inputs", "inputs/big.bin"]
    assert ingress_failed["kept_bytes"] == OLD_FILE


EGRESS_FAILING = """\
version: v1
volumes:
  out:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://report.txt"}
        destination: {uri: "s3://fmn-out/failing/unknown-key.txt", secret: "secret://user/wrong-key"}
      - source: {uri: "file://report.txt"}
        destination: {uri: "s3://fmn-out/failing/wrong-secret.txt", secret: "secret://user/wrong-secret"}
      - source: {uri: "file://report.txt"}
        destination: {uri: "s3://fmn-no-such-bucket/failing/report.txt", secret: "secret://user/s3"}
      - source: {uri: "file://never-written.txt"}
        destination: {uri: "s3://fmn-out/failing/never.txt", secret: "secret://user/s3"}
      - source: {uri: "file://report.txt"}
        destination: {uri: "s3://fmn-out/failing/report.txt", secret: "secret://user/s3"}
jobs:
  report:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    cwd: DATA
    mounts:
      out: {location: DATA}
    script: |
      #!/bin/sh
      echo "what the job got to" >report.txt
      exit 3
"""


@pytest.fixture(scope="module")
def egress_failed(servers, workdir):
    return run(servers, workdir, "egress", EGRESS_FAILING)


def test_egress_runs_after_a_failed_job_and_each_failed_item_is_named(egress_failed, servers):
    failed = egress_failed
    assert failed.rc != 0, failed
    prefix = "volumes.out.egress[%d]: file://%s -> s3://%s: "
    assert failed.failure() == "workflow failed: " + "; ".join([
        prefix % (0, "report.txt", "fmn-out/failing/unknown-key.txt") + "S3 InvalidAccessKeyId: The AWS Access Key "
        "Id you provided does not exist in our records. (HTTP 403) (on localhost)",
        prefix % (1, "report.txt", "fmn-out/failing/wrong-secret.txt") + "S3 SignatureDoesNotMatch: The request "
        "signature we calculated does not match the signature you provided. Check your key and signing method. "
        "(HTTP 403) (on localhost)",
        prefix % (2, "report.txt", "fmn-no-such-bucket/failing/report.txt") + "S3 NoSuchBucket: The specified "
        "bucket does not exist (HTTP 404) (on localhost)",
        prefix % (3, "never-written.txt", "fmn-out/failing/never.txt") + "never-written.txt: no such file in the "
        "volume (on localhost)",
        "report FAILED: rank 0 (report-0 on localhost) exited with status 3",
    ]), failed
    # The item after the failed ones was copied; nothing of the failed ones is there.
    listed = servers["s3"].list_objects_v2(Bucket="fmn-out", Prefix="failing/").get("Contents", [])
    assert [entry["Key"] for entry in listed] == ["failing/report.txt"]
    body = servers["s3"].get_object(Bucket="fmn-out", Key="failing/report.txt")["Body"].read()
    assert body == b"what the job got to\n"
    assert failed.ephemeral_after == [] and failed.state == lj.cleaned(failed.state, failed.jobs), failed


ESCAPING = """\
version: v1
volumes:
  data:
    reference: volume://user/ephemeral
    ingress:
      - source: {uri: "HTTP/big.bin"}
        destination: {uri: "file://../../../etc/cron.d/fmn"}
jobs:
  solve:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    mounts:
      data: {location: DATA}
    command: ["true"]
"""


def test_a_volume_path_that_escapes_with_dotdot_is_refused_before_anything_runs(servers, workdir):
    before = sorted(os.listdir(servers["root"])) if servers["root"].exists() else []
    refused = run(servers, workdir, "escaping", ESCAPING)
    assert refused.rc != 0, refused
    assert ("volumes.data.ingress[0].destination.uri: 'file://../../../etc/cron.d/fmn' escapes the volume with "
            "'..'; it must be a path inside the volume (file://dir/name, or file:///dir/name from its root), "
            "without '..'") in refused.output, refused
    assert "TASK [fuzz.multinode.node" not in refused.output, refused  # no host touched
    assert not os.path.exists("/etc/cron.d/fmn")
    assert (sorted(os.listdir(servers["root"])) if servers["root"].exists() else []) == before


def test_no_secret_value_in_any_output_or_log(moved, ingress_failed, egress_failed, servers):
    secret = servers["secret_value"]
    runs = [moved, egress_failed] + [ingress_failed[name] for name in INGRESS_FAILURES]
    for each in runs:
        assert secret not in each.output, each
        for path in each.logs.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
