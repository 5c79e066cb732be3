"""A service's readiness as the head's supervisor decides it
(files/multinode-runtime/multinode_runtime/readiness.py): the probe's
timings, the passes needed, the ready timeout, what the log and the
controller are told. Probes are real: exec probes are real processes
(started as rank 0's would be, here by subprocess), network probes reach
real servers on this machine."""

import http.server
import os
import socket
import subprocess
import threading
import time

import pytest
from multinode_runtime import registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.processes import reap_children
from multinode_runtime.readiness import Readiness
from multinode_runtime.spec import JobSpec


def spec(probe, ready_timeout=30.0):
    return JobSpec(job="svc", service={"readiness_probe": probe, "ready_timeout": ready_timeout})


def spawn(argv, out):
    return subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)


class Loop:
    """The supervisor's loop around a Readiness: reap children (as the
    supervisor does), check."""

    def __init__(self, tmp_path, probe, ready_timeout=30.0, address="127.0.0.1"):
        os.makedirs(registry.job_dir("svc"), exist_ok=True)
        self.log_path = tmp_path / "svc.log"
        self.log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.readiness = Readiness(spec(probe, ready_timeout), address, spawn, self.log_fd)

    def until_ready(self, within):
        deadline = time.monotonic() + within
        while not self.readiness.ready:
            assert time.monotonic() < deadline, self.readiness.last
            self.readiness.check(reap_children())
            time.sleep(0.02)
        return time.monotonic()

    def log(self):
        return self.log_path.read_text()

    def told(self):
        path = registry.job_path("svc", registry.READY_FILE)
        return open(path).read() if os.path.exists(path) else None


@pytest.fixture
def loop(runtime_state, tmp_path):
    made = []

    def make(*args, **kwargs):
        made.append(Loop(tmp_path, *args, **kwargs))
        return made[-1]
    yield make
    for each in made:
        os.close(each.log_fd)


def test_the_ready_line_shows_each_endpoints_url_and_its_scope_as_not_enforced(loop):
    service = loop(None)
    service.readiness.endpoints = [{"name": "vnc", "url": "http://10.0.0.2:6080/", "scope": "user"},
                                   {"name": "api", "url": "http://10.0.0.2:8080/api/", "scope": None}]
    service.readiness.check({})
    assert service.log() == (
        "fuzz.multinode: service svc is ready: it has no readiness probe: ready once started; endpoint vnc at "
        "http://10.0.0.2:6080/ (scope user: not enforced, anyone who can reach the node can reach it); "
        "endpoint api at http://10.0.0.2:8080/api/\n")
    # what the workflow is told stays the probe's detail
    assert service.told() == "it has no readiness probe: ready once started\n"


def test_a_services_endpoints_come_from_its_spec():
    settings = {"readiness_probe": None, "ready_timeout": 5,
                "endpoints": [{"name": "vnc", "url": "http://10.0.0.2:6080/", "scope": "user"}]}
    readiness = Readiness(JobSpec(job="svc", service=settings), "127.0.0.1", spawn, -1)
    assert readiness.endpoints == settings["endpoints"]


def test_a_service_without_a_probe_is_ready_once_started(loop):
    service = loop(None)
    service.readiness.check({})
    assert service.readiness.ready
    assert service.told() == "it has no readiness probe: ready once started\n"
    assert service.log() == "fuzz.multinode: service svc is ready: it has no readiness probe: ready once started\n"


def test_an_exec_probe_passes_once_its_command_exits_0(loop, tmp_path):
    flag = tmp_path / "up"
    service = loop({"exec": {"command": ["test", "-e", str(flag)]}, "period-seconds": 1})
    threading.Timer(1.5, flag.touch).start()
    started = time.monotonic()
    ready_at = service.until_ready(10)
    assert ready_at - started >= 1.5  # not before the flag
    assert service.told() == "exec test -e %s: exit status 0\n" % flag


def test_an_exec_probe_that_keeps_failing_gives_the_service_up_after_the_ready_timeout(loop):
    service = loop({"exec": {"command": ["sh", "-c", "echo not yet; exit 3"]}, "period-seconds": 1},
                   ready_timeout=2)
    with pytest.raises(RuntimeFailure) as failure:
        service.until_ready(10)
    assert str(failure.value) == ("service svc did not become ready within 2 s: its readiness-probe "
                                  "exec sh -c echo not yet; exit 3: exit status 3: not yet")
    assert service.told() is None


def test_a_service_that_ends_before_it_is_ready_is_told_what_its_probe_last_said(loop):
    """What the supervisor adds to the failure of a service whose rank 0
    ended before it was ready: the probe's last word, or that it had not
    run yet; nothing once it was ready, or for a service without a probe."""
    service = loop({"exec": {"command": ["sh", "-c", "echo down; exit 1"]}, "initial-delay-seconds": 30})
    service.readiness.check({})
    assert service.readiness.not_ready_note() == "its readiness-probe exec had not run yet"
    service = loop({"exec": {"command": ["sh", "-c", "echo down; exit 1"]}, "period-seconds": 1})
    deadline = time.monotonic() + 10
    while service.readiness.last is None and time.monotonic() < deadline:
        service.readiness.check(reap_children())
        time.sleep(0.02)
    assert service.readiness.not_ready_note() == "its readiness-probe exec sh -c echo down; exit 1: exit status 1: down"
    ready = loop({"exec": {"command": ["true"]}, "period-seconds": 1})
    ready.until_ready(10)
    assert ready.readiness.not_ready_note() is None
    without = loop(None)
    without.readiness.check({})
    assert without.readiness.not_ready_note() is None


def test_an_exec_probe_over_its_timeout_is_killed_and_fails(loop):
    service = loop({"exec": {"command": ["sleep", "30"]}, "period-seconds": 1, "timeout-seconds": 1},
                   ready_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(RuntimeFailure) as failure:
        service.until_ready(10)
    assert "exec sleep 30: still running after 1 s (timeout-seconds)" in str(failure.value)
    assert time.monotonic() - started < 5


def test_the_first_probe_waits_for_the_initial_delay_and_success_threshold_passes_are_needed(loop, tmp_path):
    runs = tmp_path / "runs"
    service = loop({"exec": {"command": ["sh", "-c", "echo x >> %s" % runs]},
                    "initial-delay-seconds": 1, "period-seconds": 1, "success-threshold": 3})
    started = time.monotonic()
    ready_at = service.until_ready(15)
    assert runs.read_text() == "x\nx\nx\n"
    assert ready_at - started >= 3  # 1 s delay, then 3 passes a second apart


class Slow(http.server.BaseHTTPRequestHandler):
    statuses = []

    def do_GET(self):  # noqa: N802 -- http.server's name
        self.send_response(self.statuses.pop(0) if self.statuses else 200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_an_http_get_probe_passes_once_the_server_answers_ok(loop):
    server = http.server.HTTPServer(("127.0.0.1", 0), Slow)
    Slow.statuses = [503, 503]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        service = loop({"http-get": {"port": port, "path": "/healthz", "scheme": "HTTP"}, "period-seconds": 1})
        service.until_ready(10)
        assert Slow.statuses == []  # it took both 503s first
        assert service.told().startswith("http-get http://127.0.0.1:%d/healthz" % port)
    finally:
        server.shutdown()
        server.server_close()


def test_a_network_probe_of_a_closed_port_fails_naming_the_address(loop):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the with ends
    service = loop({"tcp-socket": {"port": port}, "period-seconds": 1}, ready_timeout=1.5)
    with pytest.raises(RuntimeFailure) as failure:
        service.until_ready(10)
    assert str(failure.value).startswith("service svc did not become ready within 1.5 s: its readiness-probe "
                                         "tcp-socket 127.0.0.1:%d" % port)
