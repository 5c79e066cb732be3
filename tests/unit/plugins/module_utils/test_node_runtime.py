"""module_utils/node_runtime.py: how a runtime subcommand's answer reads
(runtime_answer), and what node_job and launch_job ask the runtime; their
modules and action plugins share all of it."""

import json

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    RuntimeRefused,
    control_call,
    head_call,
    job_result,
    node_job_call,
    refusal,
    registered,
    run_here,
    runtime_answer,
    runtime_argv,
    runtime_command,
)

SPEC = {"job": "hello", "run": "r1", "ranks": []}


def node_job_params(**given):
    params = dict(job="hello", run="r1", state="present", spec=SPEC, secrets=None, logs=None, job_log=None,
                  runtime=None, node=None)
    params.update(given)
    return params


# -- runtime_answer --------------------------------------------------------

def test_the_answer_is_the_last_json_line_after_what_else_was_printed():
    stdout = "Welcome to the node\n{\"first\": 1}\nnoise\n{\"job\": \"hello\", \"finished\": true}\n"
    assert runtime_answer(0, stdout, "") == {"job": "hello", "finished": True}


def test_a_failure_gives_the_runtimes_last_message_without_its_prefix():
    stderr = "sudo: a warning\nmultinode-runtime: first\nmultinode-runtime: job hello is not registered\n"
    with pytest.raises(RuntimeRefused, match=r"^job hello is not registered$"):
        runtime_answer(1, "", stderr, "status")


def test_a_failure_without_the_runtimes_prefix_gives_all_that_was_said():
    with pytest.raises(RuntimeRefused, match=r"^sudo: a password is required$"):
        runtime_answer(1, "", "sudo: a password is required\n", "status")
    with pytest.raises(RuntimeRefused, match=r"^on stdout$"):
        runtime_answer(1, "on stdout\n", "", "status")


def test_a_silent_failure_names_the_subcommand_and_status():
    with pytest.raises(RuntimeRefused, match=r"^multinode-runtime cleanup exited with status 255$"):
        runtime_answer(255, "", "", "cleanup")


@pytest.mark.parametrize("stdout", ["", "no json here\n", "{not json\n", "[1, 2]\n"])
def test_no_answer_is_a_refusal_naming_the_subcommand(stdout):
    with pytest.raises(RuntimeRefused, match=r"^multinode-runtime start gave no answer"):
        runtime_answer(0, stdout, "", "start")


# -- command lines ---------------------------------------------------------

def test_a_subcommand_runs_the_installed_runtime_isolated_and_quoted():
    assert runtime_argv("cleanup", "hello", 3) == [
        "/usr/bin/python3", "-I", "/opt/fuzz-multinode/multinode-runtime", "cleanup", "hello", "3"]
    assert runtime_command("cancel", "hello", "the user's reason", runtime="/x y") == (
        "/usr/bin/python3 -I '/x y' cancel hello 'the user'\"'\"'s reason'")


def test_run_here_runs_the_subcommand_with_stdin_and_reads_its_answer(tmp_path):
    runtime = tmp_path / "runtime.py"
    runtime.write_text("import json, sys\nprint(json.dumps({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}))\n")
    answer = run_here(["prepare", "--node", "n1"], b"{}", runtime=str(runtime))
    assert answer == {"argv": ["prepare", "--node", "n1"], "stdin": "{}"}
    runtime.write_text("import sys\nsys.stderr.write('multinode-runtime: no such job\\n')\nsys.exit(1)\n")
    with pytest.raises(RuntimeRefused, match="^no such job$"):
        run_here(["status", "x"], runtime=str(runtime))


# -- node_job --------------------------------------------------------------

def test_registering_sends_the_spec_on_stdin_naming_the_node():
    call, stdin = node_job_call(node_job_params(), "n1", logs=True)
    assert call == ["prepare", "--node", "n1"]
    assert json.loads(stdin) == SPEC


def test_secrets_go_with_the_spec_on_stdin_only():
    call, stdin = node_job_call(node_job_params(secrets={"user/token": "s3cret"}), "n1", logs=True)
    assert call == ["prepare", "--node", "n1", "--secrets"]
    assert "s3cret" not in " ".join(call)
    assert json.loads(stdin) == {"spec": SPEC, "secrets": {"user/token": "s3cret"}}


@pytest.mark.parametrize("spec, message", [
    (None, "spec: the job spec of job hello is required with state=present"),
    (dict(SPEC, job="other"), "spec: the job spec of job hello is required with state=present"),
    (dict(SPEC, run="r0"), "spec: the spec is of run r0, not of run r1"),
])
def test_a_spec_that_is_not_the_jobs_or_its_runs_is_refused(spec, message):
    with pytest.raises(RuntimeRefused, match="^%s$" % message):
        node_job_call(node_job_params(spec=spec), "n1", logs=True)


def test_unregistering_asks_for_the_logs_and_the_job_log_only_when_they_come_home():
    absent = node_job_params(state="absent", spec=None)
    assert node_job_call(absent, "n1", logs=True) == (["cleanup", "hello", "--run", "r1", "--logs"], None)
    with_log = dict(absent, job_log="/c/hello.log")
    assert node_job_call(with_log, "n1", logs=True)[0] == ["cleanup", "hello", "--run", "r1", "--logs", "--job-log"]
    assert node_job_call(with_log, "n1", logs=False)[0] == ["cleanup", "hello", "--run", "r1"]
    assert node_job_call(dict(absent, run=None), "n1", logs=False)[0] == ["cleanup", "hello"]


def test_the_registration_result_names_job_node_and_run():
    answer = {"job": "hello", "node": "n1", "run": "r1", "hosts": ["hello-0"]}
    assert registered(answer) == dict(changed=True, job="hello", node="n1", run="r1")


# -- launch_job ------------------------------------------------------------

def test_start_and_status_name_the_run_the_wait_and_the_log_offset():
    params = dict(job="hello", run="r1", controller_timeout=60)
    assert control_call("start", params, 1.0, 0) == [
        "start", "hello", "--run", "r1", "--controller-timeout", "60", "--wait", "1.0", "--log-offset", "0"]
    assert control_call("status", dict(params, run=None), 0, 4096) == [
        "status", "hello", "--wait", "0", "--log-offset", "4096"]


def test_cancel_and_cleanup_everywhere_name_the_run():
    params = dict(job="hello", run="r1")
    assert head_call("cancel", params, "why") == ["cancel", "hello", "--run", "r1", "why"]
    assert head_call("cleanup", params, "--everywhere") == ["cleanup", "hello", "--run", "r1", "--everywhere"]


def test_a_refused_job_fails_with_every_nodes_reason():
    assert refusal("hello", ["n1: no such file x", "n2: cwd /y missing"]) == dict(
        job="hello", status="FAILED", message="n1: no such file x; n2: cwd /y missing", changed=False)


def test_the_jobs_result_leaves_out_its_start_details_and_log_piece():
    answer = {"finished": True, "status": "FINISHED", "rc": 0, "log_data": "aGk=", "log_size": 2,
              "started": True, "pid": 12, "kill_grace": 10}
    assert job_result(answer) == {"finished": True, "status": "FINISHED", "rc": 0}
