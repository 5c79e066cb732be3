"""Services in local mode: a web service that takes a moment to serve and a
job that needs it RUNNING, on this one machine (the bare host). What a user
relies on: the job starts once the service's readiness probe passed, finds
it through FB_ENDPOINT_URL_<NAME> and <service>.svc, the service is
stopped once the job ended and the run succeeds, and nothing of either is
left on the machine. (The cluster's services, a 2-node one, one that
never becomes ready: molecule/workflow's test_services.py.)"""

import re
import socket

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
    assert "fuzz.multinode: service web is ready: http-get http://127.0.0.1:%d/hello.txt: status 200\n" \
        % services.port in web, web
    assert "job web canceled by the workflow: every job that needs it running has ended\n" in web, web
    started = re.findall(r"^\[(\S+)\] started on hosts ", services.output, re.M)
    assert started == ["web", "reader"], services
    rows = dict(re.findall(r"^    - '?(web|reader) +([A-Z_]+) ", services.output, re.M))
    assert rows == {"web": "FINISHED", "reader": "FINISHED"}, services


def test_services_leave_nothing_on_the_machine(services):
    assert services.state == lj.cleaned(services.state, ["reader", "web"]), services
