"""The action plugins node_job and launch_job on the controller: one
runtime subcommand per request over the host's connection (here a
recording stand-in for it), its answer read by runtime_answer, the logs it
carries written to the controller."""

import base64
import json
import os
import signal
import time
from unittest import mock

import pytest

from ansible_collections.fuzz.multinode.plugins.action.launch_job import ActionModule as LaunchJob
from ansible_collections.fuzz.multinode.plugins.action.node_job import ActionModule as NodeJob
from ansible_collections.fuzz.multinode.plugins.action.run_volumes import ActionModule as RunVolumes

SPEC = {"job": "hello", "run": "r1", "ranks": []}


class Host:
    """Stands in for the host's connection: answers each command in turn
    as (rc, stdout, stderr) and records it with its stdin."""

    def __init__(self, *answers):
        self.answers, self.commands = list(answers), []
        self.fetched = []

    def execute(self, command, sudoable=True, in_data=None):
        self.commands.append((command, in_data))
        answer = self.answers.pop(0)
        if callable(answer):  # something happens while the host works on the command
            answer = answer()
        rc, stdout, stderr = answer
        return {"rc": rc, "stdout": stdout, "stderr": stderr}


def action(cls, args, host):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False)
    connection = mock.MagicMock()
    connection._shell.tmpdir = "/tmp/none"
    connection.fetch_file.side_effect = lambda src, dest: host.fetched.append((src, dest))
    plugin = cls(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    plugin._low_level_execute_command = host.execute
    return plugin


def answer(**fields):
    return 0, "some banner\n" + json.dumps(fields) + "\n", ""


def test_node_job_registers_under_the_inventory_name_with_the_spec_on_stdin():
    host = Host(answer(job="hello", node="node-1", run="r1"))
    result = action(NodeJob, dict(job="hello", run="r1", spec=SPEC), host).run(
        task_vars={"inventory_hostname": "node-1"})
    (command, stdin), = host.commands
    assert command.endswith(" prepare --node node-1")
    assert json.loads(stdin) == SPEC
    assert result == dict(changed=True, job="hello", node="node-1", run="r1")


def test_node_job_returns_the_nodes_refusal_without_failing_the_others():
    host = Host((1, "", "multinode-runtime: node-2: cwd /work does not exist\n"))
    result = action(NodeJob, dict(job="hello", spec=SPEC), host).run(task_vars={"inventory_hostname": "node-2"})
    assert result["failed"] and result["refused"] == result["msg"] == "node-2: cwd /work does not exist"


@pytest.fixture
def worker_signals():
    """Stands in for the Ansible worker's handlers of SIGINT and SIGTERM
    (which end the worker): the signals they got, in order."""
    got = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    yield got
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("said", [answer(job="hello", node="node-1", run="r1"),
                                  (1, "", "multinode-runtime: node-1: cwd /work does not exist\n")],
                         ids=["registered", "refused"])
@pytest.mark.parametrize("ends_run", [True, False], ids=["run-ends", "runner-member"])
def test_ctrl_c_while_the_node_registers_the_job_unregisters_it_there_then_ends_the_worker(worker_signals, said,
                                                                                           ends_run):
    """Ctrl-C while the node registers the job (it pulls the image then):
    the registration is not cut off (the node would finish it all the
    same, and no play undoes it); once the node has answered, the job of
    this run is unregistered there, with the run's ephemeral volumes when
    the run ends with the job, and then the worker gets the signal."""
    def interrupted():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)  # Ansible's main process follows with it
        assert worker_signals == []  # not yet: the registration goes on
        return said

    host = Host(interrupted, answer(changed=False, job="hello", killed=0))
    action(NodeJob, dict(job="hello", run="r1", spec=dict(SPEC, kill_grace=3), interrupt_ends_run=ends_run),
           host).run(task_vars={"inventory_hostname": "node-1"})
    (prepare, _unused), (cleanup, stdin) = host.commands
    assert prepare.endswith(" prepare --node node-1")
    assert cleanup.endswith(" cleanup hello --run r1" + (" --run-volumes" if ends_run else "")) and stdin is None
    assert worker_signals[:1] == [signal.SIGINT]


def test_ctrl_c_while_the_node_tears_the_job_down_lets_it_finish_then_ends_the_worker(worker_signals):
    """Ctrl-C while a node unregisters a job (a workflow's job whose own
    playbook is interrupted as it cleans up): the cleanup is not cut off
    (killed halfway, it would leave the job registered, and no play comes to
    finish it); once the node has answered, the worker gets the signal."""
    def interrupted():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert worker_signals == []  # not yet: the cleanup goes on
        return answer(changed=True, job="hello", killed=0, logs=[])

    host = Host(interrupted)
    result = action(NodeJob, dict(job="hello", run="r1", state="absent"), host).run(
        task_vars={"inventory_hostname": "node-1"})
    (cleanup, _unused), = host.commands
    assert cleanup.endswith(" cleanup hello --run r1 --logs")
    assert result["changed"] and worker_signals[:1] == [signal.SIGINT]


def test_the_playbook_killed_while_the_node_registers_the_job_unregisters_it_there(monkeypatch):
    """kill -9 of ansible-playbook while the node registers the job: this
    worker outlives it (a session of its own, a new parent); once the node
    has answered, the job of this run is unregistered there."""
    from ansible_collections.fuzz.multinode.plugins.action import node_job

    parents = [4242, 1]  # at the start, then (once the node answered) adopted by init
    monkeypatch.setattr(node_job.os, "getppid", lambda: parents.pop(0) if len(parents) > 1 else parents[0])
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    host = Host(answer(job="hello", node="node-1", run="r1"), answer(changed=False, job="hello", killed=0))
    result = action(NodeJob, dict(job="hello", run="r1", spec=SPEC), host).run(
        task_vars={"inventory_hostname": "node-1"})
    (prepare, _unused), (cleanup, _unused) = host.commands
    assert prepare.endswith(" prepare --node node-1") and cleanup.endswith(" cleanup hello --run r1 --run-volumes")
    assert result["failed"] and result["msg"] == "job hello unregistered on node-1: the playbook process ended"
    # The worker's handlers are as they were (not ignored: its children would inherit that).
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_node_job_writes_the_logs_the_cleanup_answer_carries_and_fetches_the_rest(tmp_path):
    logs = [{"rank": 1, "name": "rank-1.log", "size": 3, "path": "/var/log/x/rank-1.log",
             "data": base64.b64encode(b"hi\n").decode()},
            {"rank": 2, "name": "rank-2.log", "size": 1 << 30, "path": "/var/log/x/rank-2.log"}]
    host = Host(answer(changed=True, job="hello", killed=0, logs=logs,
                       job_log={"path": "/var/log/x/job.log", "size": 9}))
    result = action(NodeJob, dict(job="hello", run="r1", state="absent", logs=str(tmp_path / "hello"),
                                  job_log=str(tmp_path / "hello.log")), host).run(task_vars={})
    (command, stdin), = host.commands
    assert command.endswith(" cleanup hello --run r1 --logs --job-log") and stdin is None
    assert (tmp_path / "hello" / "rank-1.log").read_bytes() == b"hi\n"
    assert host.fetched == [("/var/log/x/rank-2.log", str(tmp_path / "hello" / "rank-2.log")),
                            ("/var/log/x/job.log", str(tmp_path / "hello.log"))]
    assert result["logs"] == {"1": str(tmp_path / "hello" / "rank-1.log"),
                              "2": str(tmp_path / "hello" / "rank-2.log")}


def test_launch_job_reports_a_refused_job_without_touching_the_head_or_the_log(tmp_path):
    host = Host()
    result = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log"),
                                    refused=["node-2: no such file in", "node-3: no cpus"]), host).run(task_vars={})
    assert host.commands == []
    assert not (tmp_path / "hello.log").exists()
    assert result == dict(job="hello", status="FAILED", message="node-2: no such file in; node-3: no cpus",
                          changed=False)


def test_launch_job_streams_the_log_a_short_jobs_start_brings_and_returns_its_result(tmp_path, capsys):
    host = Host(answer(finished=True, changed=True, status="FINISHED", rc=0, message="job hello finished",
                       log_data=base64.b64encode(b"hello\n").decode(), log_size=6,
                       started=True, pid=7, kill_grace=10))
    result = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log")), host).run(
        task_vars={})
    (command, _unused), = host.commands
    assert " start hello --run r1 --controller-timeout 60 --wait 1.0 --log-offset 0" in command
    assert (tmp_path / "hello.log").read_bytes() == b"hello\n"
    assert result["status"] == "FINISHED" and result["log_complete"] is True
    assert not {"log_data", "log_size", "pid", "started", "kill_grace"} & set(result)


def finished_start(log=b"hello\n", size=None):
    return answer(finished=True, changed=True, status="FINISHED", rc=0, message="job hello finished",
                  log_data=base64.b64encode(log).decode(), log_size=len(log) if size is None else size,
                  started=True, pid=7, kill_grace=10, torn_down=["node-2"])


def test_launch_job_cleans_up_the_head_itself_once_the_job_ended_and_says_so(tmp_path):
    """With rank_logs: one more call, the head's cleanup, brings the ranks'
    logs home; the head joins the workers in torn_down, so the play skips
    its cleanup task everywhere."""
    logs = [{"rank": 0, "name": "rank-0.log", "size": 3, "data": base64.b64encode(b"hi\n").decode()}]
    host = Host(finished_start(), answer(changed=True, job="hello", killed=0, logs=logs))
    plugin = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log"),
                                    rank_logs=str(tmp_path / "hello")), host)
    plugin._task.delegate_to = "node-1"
    result = plugin.run(task_vars={"inventory_hostname": "node-3"})
    assert host.commands[1][0].endswith(" cleanup hello --run r1 --logs"), host.commands
    assert (tmp_path / "hello" / "rank-0.log").read_bytes() == b"hi\n"
    assert (tmp_path / "hello.log").read_bytes() == b"hello\n"
    assert result["torn_down"] == ["node-2", "node-1"] and result["log_complete"] is True
    assert host.fetched == []


def test_launch_job_fetches_the_job_log_whole_with_the_heads_cleanup_when_the_polls_left_some(tmp_path):
    # The head's log grew past what the polls brought: the cleanup names it, it is fetched whole.
    host = Host(finished_start(size=1 << 30), answer(finished=True, status="FINISHED"),
                answer(changed=True, job="hello", killed=0, logs=[], job_log={"path": "/var/log/x/job.log"}))
    plugin = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log"),
                                    rank_logs=str(tmp_path / "hello")), host)
    plugin._task.delegate_to = None
    result = plugin.run(task_vars={"inventory_hostname": "node-1"})
    assert host.commands[-1][0].endswith(" cleanup hello --run r1 --logs --job-log"), host.commands
    assert host.fetched == [("/var/log/x/job.log", str(tmp_path / "hello.log"))]
    assert result["torn_down"] == ["node-2", "node-1"] and result["log_complete"] is True


def test_a_head_cleanup_that_fails_is_left_to_the_play(tmp_path):
    host = Host(finished_start(), (1, "", "multinode-runtime: cleanup: the disk is full\n"))
    plugin = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log"),
                                    rank_logs=str(tmp_path / "hello")), host)
    plugin._task.delegate_to = "node-1"
    result = plugin.run(task_vars={})
    assert len(host.commands) == 2
    assert result["status"] == "FINISHED" and result["torn_down"] == ["node-2"]
    assert not result.get("failed")


@pytest.mark.parametrize("ends_run", [True, False], ids=["run-ends", "runner-member"])
def test_ctrl_c_while_the_job_runs_cancels_it_and_cleans_up_everywhere_from_the_head(worker_signals, tmp_path,
                                                                                     ends_run):
    """Ctrl-C while the job runs: the head is asked to cancel it, polled
    until its teardown ended, then to clean up on every node of the job
    (no play comes to); both say when the run ends with the job, so that
    its ephemeral volumes go too; then the worker gets the signal."""
    def running():
        os.kill(os.getpid(), signal.SIGINT)
        return answer(finished=False, status="RUNNING", started=True, pid=7, kill_grace=1)

    host = Host(running, answer(changed=True), answer(finished=True, status="CANCELED", message="canceled"),
                answer(changed=True, job="hello", killed=0))
    result = action(LaunchJob, dict(job="hello", run="r1", log_file=str(tmp_path / "hello.log"),
                                    interrupt_ends_run=ends_run), host).run(task_vars={})
    # Each as "SUBCOMMAND ARGUMENTS", the runtime's path and the job's name left out.
    commands = [head.split()[-1] + " " + rest for head, rest in
                (command.split(" hello ", 1) for command, _unused in host.commands)]
    run_volumes = " --run-volumes" if ends_run else ""
    assert commands[1] == "cancel --run r1%s 'the controller: the playbook was interrupted (SIGINT)'" % run_volumes
    assert commands[2].startswith("status --run r1 "), commands
    assert commands[3] == "cleanup --run r1 --everywhere" + run_volumes, commands
    assert result["status"] == "CANCELED" and worker_signals[:1] == [signal.SIGINT]


def test_launch_job_fails_with_the_heads_refusal(tmp_path):
    host = Host((1, "", "multinode-runtime: job hello on this node belongs to run r0, not to run r1\n"))
    result = action(LaunchJob, dict(job="hello", run="r1"), host).run(task_vars={})
    assert result["failed"] and result["msg"] == "job hello on this node belongs to run r0, not to run r1"


# -- run_volumes ------------------------------------------------------------------

def test_run_volumes_asks_the_runtime_to_remove_the_runs_ephemeral_volumes():
    host = Host(answer(changed=True))
    result = action(RunVolumes, dict(run="20261203T071500Z-00abcd", volume_root="/shared/volumes"), host).run(
        task_vars={})
    (command, stdin), = host.commands
    assert command.endswith(" remove-volumes 20261203T071500Z-00abcd /shared/volumes")
    assert stdin is None
    assert result == dict(changed=True)


def test_run_volumes_fails_with_the_runtimes_message():
    host = Host((1, "", "multinode-runtime: remove-volumes: '../x' is not a run id\n"))
    result = action(RunVolumes, dict(run="../x"), host).run(task_vars={})
    assert result["failed"] and result["msg"] == "remove-volumes: '../x' is not a run id"


def test_launch_job_keeps_its_poll_interval_while_a_flood_of_output_keeps_it_behind(tmp_path):
    """768 KiB of log at once: three polls bring it, 256 KiB each, one a
    poll interval rather than back to back; all of it reaches the log."""
    chunk = 256 << 10
    flood = (b"x" * 1023 + b"\n") * 768
    times = []

    def piece(index, **fields):
        def answered():
            times.append(time.monotonic())
            data = flood[index * chunk:(index + 1) * chunk]
            return answer(log_data=base64.b64encode(data).decode(), log_size=len(flood), **fields)
        return answered

    host = Host(piece(0, finished=False, status="RUNNING", started=True, pid=7, kill_grace=1),
                piece(1, finished=False, status="RUNNING"),
                piece(2, finished=True, changed=True, status="FINISHED", rc=0, message="job hello finished"))
    result = action(LaunchJob, dict(job="hello", run="r1", poll=0.3, log_file=str(tmp_path / "hello.log")),
                    host).run(task_vars={})
    assert result["status"] == "FINISHED" and result["log_complete"] is True
    assert (tmp_path / "hello.log").read_bytes() == flood
    gaps = [round(later - earlier, 1) for earlier, later in zip(times, times[1:], strict=False)]
    assert len(gaps) == 2 and min(gaps) >= 0.3, times
    assert all(" --wait 0 " in command for command, _unused in host.commands[1:]), host.commands
