"""Services on the workflow scenario's 3-node cluster, run through
run-job.yml as a user runs them; and Ctrl-C in the middle of a parallel
run.

What a user relies on: a service starts before the jobs that need it
RUNNING, which start only once its readiness probe passed (the `web`
service serves only a few seconds after its start: a reader started early
would fail); the jobs reach it through FB_ENDPOINT_URL_<NAME> and the name
<service>.svc; a 2-node service's ranks work together through the wrapper
as a job's do; a service is stopped once the jobs that need it ended, and
that is the workflow's success; each service has its log, streamed live; a
service that never becomes ready fails, its dependants are not run, and
the message names the service and its probe, and so does one that exits
before it is ready; nothing of any of it is left on a node. Ctrl-C while
several jobs run cancels every one of them on every node."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)
from concurrency import canceled_table, started_on  # noqa: E402  (the workflow runner's lines)
from workflow_run import FUZZFILES, NO_PROCESSES, NODES, PROJECT, WorkflowRun, processes_on_all_nodes  # noqa: E402

FAN = ["fan-1", "fan-2", "fan-3", "fan-4"]


def registered_anywhere():
    """{node: the jobs registered there}, nodes with none left out."""
    return {node: jobs for node, jobs in ((node, node_runtime.show(node)["jobs"]) for node in NODES) if jobs}


def node_address(node):
    return subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                           node], capture_output=True, text=True, check=True).stdout.strip()


# -- a web service, a 2-node service and the job that reads from both ---------

@pytest.fixture(scope="module")
def services(tmp_path_factory):
    logs = tmp_path_factory.mktemp("services")
    run = WorkflowRun("services.yml", logs)
    run.registered = registered_anywhere()
    return run


def test_services_and_the_job_that_needs_them_finish(services):
    assert services.rc == 0, services
    assert services.outcome_rows() == {"web": "FINISHED", "pair": "FINISHED", "reader": "FINISHED"}, services


def test_the_job_starts_after_both_services_and_reads_from_each_through_what_fuzzball_gives_it(services):
    assert services.started() == ["web", "pair", "reader"], services
    web_head = services.hosts("web")[0]
    pair_head, pair_worker = services.hosts("pair")
    reader = services.log("reader")
    # web's page names its rank and node, and the run; pair's rank 1 answered
    # rank 0 on its own node, and rank 0 passed it on.
    run_id = re.search(r"in run (\S+)", reader).group(1)
    assert "web: hello from web-0 on %s in run %s\n" % (web_head, run_id) in reader, reader
    assert "pair: pair-1 on %s\n" % pair_worker in reader, reader
    assert pair_head != pair_worker


def test_a_service_is_given_its_own_endpoint_and_its_log_says_when_it_was_ready(services):
    web = services.log("web")
    address = node_address(services.hosts("web")[0])
    assert "endpoint http://%s:8471/ path /\n" % address in web, web
    assert re.search(r"^fuzz.multinode: service web is ready: http-get http://%s:8471/hello.txt: status 200; "
                     r"endpoint web at http://%s:8471/$" % (re.escape(address), re.escape(address)), web, re.M), web
    assert re.search(r"^fuzz.multinode: service pair is ready: tcp-socket ", services.log("pair"), re.M), \
        services.log("pair")
    # Streamed live, as a job's log: the ready line reached the terminal.
    assert "[web] fuzz.multinode: service web is ready" in services.output, services


def test_services_stop_once_the_job_that_needs_them_ended(services):
    for service in ("web", "pair"):
        assert "[%s] stopping the service: every job that needs it running has ended" % service in services.output
        assert re.search(r": job %s canceled by the workflow: every job that needs it running has ended$"
                         % service, services.log(service), re.M), services.log(service)


def test_services_leave_nothing_on_any_node(services):
    assert services.leftovers == NO_PROCESSES
    assert services.registered == {}


# -- a service that never becomes ready ----------------------------------------

@pytest.fixture(scope="module")
def never_ready(tmp_path_factory):
    logs = tmp_path_factory.mktemp("never-ready")
    run = WorkflowRun("service-never-ready.yml", logs, args=["-e", "fuzz_multinode_service_ready_timeout=6"])
    run.registered = registered_anywhere()
    return run


def test_a_service_that_never_becomes_ready_fails_and_its_dependant_is_not_run(never_ready):
    assert never_ready.rc != 0, never_ready
    assert never_ready.outcome_rows() == {"stuck": "FAILED", "quits": "FAILED", "waits": "NOT_RUN",
                                          "waits-too": "NOT_RUN"}, never_ready
    assert sorted(never_ready.started()) == ["quits", "stuck"], never_ready
    address = node_address(never_ready.hosts("stuck")[0])
    given_up = ("service stuck did not become ready within 6 s: its readiness-probe tcp-socket %s:8473: "
                % address)
    assert given_up in never_ready.log("stuck"), never_ready.log("stuck")
    failure = never_ready.failure()
    assert "job waits not run: it needs service stuck RUNNING, which ended (FAILED before it was ready): " \
           + given_up in failure, failure


def test_a_service_that_exits_before_it_is_ready_fails_and_its_dependant_is_not_run(never_ready):
    """quits exits with status 0 before its probe passed: it never served,
    so it is FAILED, and the message (its own and its dependant's) names
    the service and what its probe last saw."""
    head = never_ready.hosts("quits")[0]
    ended = ("service quits ended before it was ready: rank 0 (quits-0 on %s) exited with status 0; "
             "its readiness-probe tcp-socket %s:8474: " % (head, node_address(head)))
    failure = never_ready.failure()
    assert "quits FAILED: " + ended in failure, failure
    assert "job waits-too not run: it needs service quits RUNNING, which ended (FAILED before it was ready): " \
           + ended in failure, failure


def test_a_service_that_never_becomes_ready_leaves_nothing(never_ready):
    assert never_ready.leftovers == NO_PROCESSES
    assert never_ready.registered == {}


# -- Ctrl-C in the middle of a parallel run ------------------------------------

def test_ctrl_c_in_a_parallel_run_cancels_every_running_job_on_every_node(tmp_path):
    """The fan-out's first three jobs run at once, one on each node; Ctrl-C
    (SIGINT to the playbook's process group, as a terminal sends it) then
    cancels all three, the fourth is not run, and nothing of the run is
    left on any node once the playbook has ended."""
    argv, env = user_playbook.playbook(FUZZFILES / "fan-out.yml", tmp_path)
    out_path = tmp_path / "output"
    with open(out_path, "w") as out:
        playbook = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        # Each of the three has printed its first line: all three run.
        while not all(os.path.exists(tmp_path / ("%s.log" % job)) and "run " in (tmp_path / ("%s.log" % job))
                      .read_text() for job in FAN[:3]):
            assert playbook.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
            time.sleep(0.2)
        os.killpg(playbook.pid, signal.SIGINT)
        playbook.wait(timeout=120)
    finally:
        if playbook.poll() is None:
            os.killpg(playbook.pid, signal.SIGKILL)
            playbook.wait()
    output = out_path.read_text()
    assert playbook.returncode != 0, output[-6000:]
    assert [job for job, _unused in started_on(output)] == FAN[:3], output[-6000:]
    assert canceled_table(output) == {"fan-1": "CANCELED", "fan-2": "CANCELED", "fan-3": "CANCELED",
                                      "fan-4": "NOT_RUN"}, output[-6000:]
    assert processes_on_all_nodes() == NO_PROCESSES
    assert registered_anywhere() == {}
