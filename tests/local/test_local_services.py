"""Services in local mode: a web service that takes a moment to serve and a
job that needs it RUNNING, on this one machine (the bare host). What a user
relies on: the job starts once the service's readiness probe passed, finds
it through FB_ENDPOINT_URL_<NAME> and <service>.svc, the service is
stopped once the job ended and the run succeeds, and nothing of either is
left on the machine; a workflow of services only runs until Ctrl-C, which
stops its services and leaves nothing. (The cluster's services, a 2-node one, one that
never becomes ready: molecule/workflow's test_services.py.)"""

import os
import re
import signal
import socket
import time

import pytest

import local_jobs as lj

FUZZFILE = """\
version: v4
services:
  web:
    image: {uri: docker://mirror.gcr.io/library/python:3.11-slim}
    script: |
      #!/bin/sh
      dir=$(mktemp -d)
      echo "hello from $HOSTNAME" >"$dir/hello.txt"
      # Not ready at once: a reader started before the probe passed would fail.
      sleep 2
      exec python3 -m http.server %(port)d --bind 127.0.0.1 --directory "$dir"
    network:
      ports: [{name: http, port: %(port)d}]
      endpoints: [{name: web, port-name: http}]
    readiness-probe:
      http-get: {path: /hello.txt, port: http}
      period-seconds: 1
jobs:
  reader:
    image: {uri: docker://mirror.gcr.io/library/python:3.11-slim}
    depends-on: [{name: web, status: RUNNING}]
    command: [/bin/sh, -c, 'curl -sS --max-time 5 "${FB_ENDPOINT_URL_WEB}hello.txt" && getent hosts web.svc']
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def services(workdir):
    directory = workdir / "services"
    directory.mkdir()
    port = free_port()
    fuzzfile = directory / "services.yml"
    fuzzfile.write_text(FUZZFILE % {"port": port})
    run = lj.run_job(fuzzfile, directory / "logs")
    run.port = port
    return run


def test_the_job_reads_from_the_service_once_it_is_ready_and_the_service_is_then_stopped(services):
    assert services.rc == 0, services
    assert services.log("reader").startswith("hello from web-0\n127.0.0.1 "), services.log("reader")
    assert " web.svc\n" in services.log("reader"), services.log("reader")
    web = services.log("web")
    assert ("fuzz.multinode: service web is ready: http-get http://127.0.0.1:%d/hello.txt: status 200; "
            "endpoint web at http://127.0.0.1:%d/\n" % (services.port, services.port)) in web, web
    assert "job web canceled by the workflow: every job that needs it running has ended\n" in web, web
    started = re.findall(r"^\[(\S+)\] started on hosts ", services.output, re.M)
    assert started == ["web", "reader"], services
    rows = dict(re.findall(r"^    - '?(web|reader) +([A-Z_]+) ", services.output, re.M))
    assert rows == {"web": "FINISHED", "reader": "FINISHED"}, services


def test_services_leave_nothing_on_the_machine(services):
    assert services.state == lj.cleaned(services.state, ["reader", "web"]), services


SERVICES_ONLY = """\
version: v4
services:
  notebook:
    image: {uri: docker://mirror.gcr.io/library/python:3.11-slim}
    persist: true
    script: |
      #!/bin/sh
      up=/tmp/notebook-up-$FB_WORKFLOW_ID
      trap 'rm -f "$up"; exit 0' TERM
      touch "$up"
      sleep 1000 &
      wait
    readiness-probe:
      exec: {command: [/bin/sh, -c, 'test -e /tmp/notebook-up-$FB_WORKFLOW_ID']}
      period-seconds: 1
"""


def test_a_workflow_of_services_only_runs_until_ctrl_c_which_stops_them_and_leaves_nothing(workdir):
    directory = workdir / "services-only"
    directory.mkdir()
    fuzzfile = directory / "services-only.yml"
    fuzzfile.write_text(SERVICES_ONLY)
    out_path = directory / "services-only.out"
    proc = lj.start_playbook(fuzzfile, directory / "logs", out_path)
    try:
        lj.wait_for_output(proc, out_path, lambda output: "[notebook] fuzz.multinode: service notebook is ready: "
                           "exec /bin/sh -c" in output, 240)
        time.sleep(3)
        assert proc.poll() is None, out_path.read_text()[-6000:]  # ready, and kept running
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends Ctrl-C
        assert proc.wait(timeout=240) != 0, out_path.read_text()[-6000:]
        output = out_path.read_text()
        summary = output[output.index("[ERROR]: User interrupted execution"):]
        assert re.search(r"^notebook +CANCELED ", summary, re.M), summary
        state = lj.machine_state(["notebook"])
        assert state == lj.cleaned(state, ["notebook"]), output[-6000:]
    finally:
        lj.end_playbook(proc, ["notebook"])


ENDS_EARLY = """\
version: v4
services:
  flaky:
    image: {uri: docker://mirror.gcr.io/library/python:3.11-slim}
    command: [/bin/sh, -c, 'echo "starting, then giving up"; exit 0']
    readiness-probe:
      tcp-socket: {port: %(port)d}
      period-seconds: 1
jobs:
  client:
    image: {uri: docker://mirror.gcr.io/library/python:3.11-slim}
    depends-on: [{name: flaky, status: RUNNING}]
    command: [echo, never]
"""


def test_a_service_that_ends_before_it_is_ready_fails_and_its_dependant_is_not_run(workdir):
    """Even with status 0: it never served. The service's failure and its
    dependant's message name the service and what its probe last said."""
    directory = workdir / "ends-early"
    directory.mkdir()
    fuzzfile = directory / "ends-early.yml"
    fuzzfile.write_text(ENDS_EARLY % {"port": free_port()})
    run = lj.run_job(fuzzfile, directory / "logs")
    assert run.rc != 0, run
    failed = run.failed_jobs()
    assert re.fullmatch(r"service flaky ended before it was ready: rank 0 \(flaky-0 on \S+\) exited with status 0; "
                        r"its readiness-probe (tcp-socket had not run yet|tcp-socket 127\.0\.0\.1:\d+: .*)",
                        failed["flaky"]), failed
    assert failed["client"] == ("job client not run: it needs service flaky RUNNING, which ended (FAILED before "
                                "it was ready): " + failed["flaky"]), failed
    assert run.state == lj.cleaned(run.state, ["flaky", "client"]), run
