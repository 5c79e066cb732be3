"""Unit tests of the head supervisor's end of a job: wrapper calls that
rank 0's command was about to make when it ended (exec_all forks each
worker's call with `&`, and rank 0's shell can exit before a fork has
exec'd the wrapper) still count, for a moment (supervisor.SETTLE_SECONDS).
Real processes throughout: the first test with a stand-in for nsenter, the
second in a real sandbox of the run, as `multinode-runtime head` runs
rank 0 (the Molecule scenario failure runs it on real nodes)."""

import os
import pwd
import signal
import subprocess
import time
import types
from pathlib import Path

from multinode_runtime import execution, registry, supervisor
from multinode_runtime.processes import command_line, parent, process_state
from multinode_runtime.sandbox import ENTER_SCRIPT, place_job, remove_sandbox
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import Job
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_job

USER = pwd.getpwuid(os.getuid()).pw_name


class StandInSandbox:
    """Enters nothing: a shell runs the entering shell as its child, as
    nsenter does (it forks into the sandbox's PID namespace), and waits."""

    image = None
    pid = os.getpid()  # its root is the sandbox's file system

    def enter_argv(self, user, cwd, argv):
        return ["/bin/sh", "-c", '"$@"; exit $?', "nsenter", "/bin/sh", "-c", ENTER_SCRIPT,
                "fuzz-multinode", cwd] + list(argv)


def children_of(pid):
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and parent(int(e)) == pid]


def about_to_call(head, pids):
    return [pid for pid in pids if head.about_to_call(pid, command_line(pid))]


def wait_for(predicate, within=10):
    deadline = time.monotonic() + within
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_a_fork_of_the_head_command_not_yet_execd_counts_only_within_the_settle_window(tmp_path):
    """A `#!/bin/sh` script (its forks show /bin/sh's command line, not the
    argv it was started with) forks a subshell that sleeps before its exec,
    and ends: that fork is a call about to be made right after the end,
    no longer once the window is over; an exec'd process never is."""
    script, pidfile = tmp_path / "job", tmp_path / "fork.pid"
    script.write_text('#!/bin/sh\n(sleep 5; exec sleep 30) &\necho $! >"$1"\n')
    script.chmod(0o755)
    unrelated = subprocess.Popen(["sleep", "30"])
    child = None
    try:
        argv, sandbox = [str(script), str(pidfile)], StandInSandbox()
        child = execution.spawn_rank(types.SimpleNamespace(cwd=str(tmp_path)), None, None, argv,
                                     {"PATH": "/usr/bin:/bin"}, sandbox, subprocess.DEVNULL, subprocess.DEVNULL)
        head = supervisor.HeadCommand(execution.command_shown(argv, sandbox, str(tmp_path)))
        assert child.wait(timeout=10) == 0
        head.end()
        fork = int(pidfile.read_text())
        assert wait_for(lambda: children_of(fork))  # its `sleep 5`, exec'd
        (sleeper,) = children_of(fork)
        assert command_line(fork) == [b"/bin/sh"] + [os.fsencode(arg) for arg in argv] + [b""]
        assert about_to_call(head, [fork, sleeper, unrelated.pid]) == [fork]
        time.sleep(supervisor.SETTLE_SECONDS + 0.1)
        assert tuple(command_line(fork)) in head.lines  # still a fork, not exec'd
        assert about_to_call(head, [fork, sleeper, unrelated.pid]) == []
    finally:
        unrelated.kill()
        unrelated.wait()
        if child is not None:
            os.killpg(child.pid, signal.SIGKILL)  # the fork and its sleep (the launcher's session)
            child.wait()


def start_head(tmp_path, script, grace):
    """Rank 0 of a 2-node host-mode job running `script`, started by the
    real Supervisor in the run's sandbox; returns (supervisor, child)."""
    spec = plan_job(Job(name="race", image_uri="docker://alpine", nodes=2, implementation="generic", script=script,
                        env=[("PATH", "/usr/bin:/bin")]),
                    [{"node": "n%d" % i, "address": "10.0.0.%d" % i} for i in (1, 2)],
                    user=USER, wrapper_path=str(tmp_path / "ssh-wrapper"), kill_grace=grace,
                    execution="host")
    directory = Path(registry.job_dir(spec["job"]))
    directory.mkdir(parents=True)
    registry.write_file(str(directory / "script"), spec["script"], 0o755)
    place_job(JobSpec.from_dict(spec), "n1")
    fd = os.open(tmp_path / "job.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        head = supervisor.Supervisor(JobSpec.from_dict(spec))
        head.agent = types.SimpleNamespace(calls_in_flight=lambda: False, check=lambda: None)
        return head, head.start_rank0(fd)
    finally:
        os.close(fd)


def test_the_supervisor_waits_for_a_call_whose_fork_had_not_exec_d_when_rank_0_ended(tmp_path, runtime_state):
    """As exec_all with a short rank 0: the worker's call is forked, rank 0's
    shell ends before the fork has exec'd the wrapper (orphaned, it is
    below the sandbox's PID 1 then). The supervisor waits for the call
    (its fork, then the wrapper) to end, not the grace."""
    done = tmp_path / "call-done"
    wrapper = tmp_path / "ssh-wrapper"
    wrapper.write_text("#!/bin/sh\nsleep 1\necho \"$@\" >%s\n" % done)
    wrapper.chmod(0o755)
    head, child = start_head(tmp_path, '#!/bin/sh\n(sleep 0.3; exec "$MULTINODE_SSH_WRAPPER" race-1 true) &\n',
                             grace=20)
    try:
        started = time.monotonic()
        assert head.wait(child) == (0, None)
        assert done.read_text() == "race-1 true\n"
        assert time.monotonic() - started < 10
    finally:
        remove_sandbox(head.job)


def test_the_supervisor_waits_no_longer_than_the_window_for_a_jobs_own_background_subshell(
        tmp_path, runtime_state):
    head, child = start_head(tmp_path, "#!/bin/sh\n(sleep 30; exec true) &\n", grace=20)
    try:
        started = time.monotonic()
        assert head.wait(child) == (0, None)
        assert time.monotonic() - started < supervisor.SETTLE_SECONDS + 3
    finally:
        remove_sandbox(head.job)


def test_the_command_lines_shown_are_the_kernels_for_a_script_and_argv_for_the_rest(tmp_path):
    """What a process really shows, checked on real ones: a `#!` script's
    interpreter (with its argument), env's exec of a name, a binary as it is."""
    cases = {"arg": "#!/bin/sh -e\nsleep 5\n", "env": "#!/usr/bin/env sh\nsleep 5\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    for argv in (["./arg", "a b"], [str(tmp_path / "env"), "c"], ["/bin/sleep", "5"]):
        proc = subprocess.Popen(argv, cwd=tmp_path)
        try:
            shown = execution.command_shown(argv, StandInSandbox(), str(tmp_path))
            assert wait_for(lambda pid=proc.pid, shown=shown: command_line(pid)[:-1] in shown), (
                command_line(proc.pid), shown)
        finally:
            proc.kill()
            proc.wait()


def test_a_call_caught_in_the_exec_of_the_wrapper_still_counts(tmp_path):
    """exec_all's fork execs the wrapper: for some microseconds between the
    fork's command line and the wrapper's, the kernel shows none. A look
    (calls_in_flight's, every poll) that lands there must still count the
    call, or the job ends and its teardown kills it. A shell makes wrapper
    calls one after the other for 3 s, forked and exec'd each, while its
    child is looked at again and again: a fork of it, or a call, until it
    is a zombie."""
    wrapper, loop = tmp_path / "ssh-wrapper", tmp_path / "job"
    wrapper.write_text("#!/bin/sh\n:\n")
    loop.write_text('#!/bin/sh\nwhile :; do "$1" host true & wait $!; done\n')
    for script in (wrapper, loop):
        script.chmod(0o755)
    argv = [str(loop), str(wrapper)]
    shell = subprocess.Popen(argv)
    head = supervisor.HeadCommand(execution.command_shown(argv, StandInSandbox(), str(tmp_path)))
    missed, looks = [], 0
    try:
        started = time.monotonic()
        while time.monotonic() - started < 3:
            head.end()  # always within its window
            with open("/proc/%d/task/%d/children" % (shell.pid, shell.pid)) as children:
                pids = [int(pid) for pid in children.read().split()]
            for pid in pids:
                looks += 1
                if not supervisor.making_call(pid, os.fsencode(wrapper), head) \
                        and process_state(pid) not in (None, "Z", "X"):
                    missed.append((pid, command_line(pid)))
    finally:
        shell.kill()
        shell.wait()
    assert looks > 1000 and missed == [], (looks, missed)
