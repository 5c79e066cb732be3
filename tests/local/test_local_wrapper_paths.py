"""Local mode, the wrapper's two ways to a rank
(tests/fuzzfiles/local/wrapper-paths.yml, 3 ranks, held until the test has
looked): a call from a rank of a running job is made by the job's agent
(the sh client waits for its answer; no Python wrapper starts for it), and
the Python wrapper the client falls back to keeps the same argv contract
(exit status, nothing on stdout or stderr but the wrapper's own message,
the command joined as ssh joins it); a wrapper process killed while its
call runs stops the remote command, on either path."""

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import local_jobs as lj

JOB = "wrapper-paths"
WRAPPER = "/multinode/ssh-wrapper"  # MULTINODE_SSH_WRAPPER in local mode
AGENT = Path(lj.registry.job_path(JOB, lj.registry.AGENT_DIR))
# How long a remote command may outlive its killed wrapper process: the
# agent sees the client end at once (pidfd) and the launcher then stops the
# command (SIGTERM); a loaded 2-core machine gets the slack.
GONE_WITHIN = 30
CONTRACT = ("exit", "words", "options", "output", "unknown", "where")


def cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            return handle.read().split(b"\0")[:-1]
    except OSError:
        return None


def runtime_processes(command):
    """[(pid, argv)] of every process on this machine that runs the node
    runtime's `command` (wrapper, connect) for any job."""
    found = []
    for entry in os.listdir("/proc"):
        argv = cmdline(entry) if entry.isdigit() else None
        if argv and len(argv) > 3 and argv[2] == lj.RUNTIME.encode() and argv[3] == command.encode():
            found.append((int(entry), argv))
    return found


def wait_for(path, proc, timeout=240):
    """The pid the job wrote to path (complete once it ends in a newline)."""
    deadline = time.monotonic() + timeout
    while not (path.read_text() if path.exists() else "").endswith("\n"):
        if proc.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.1)
    return path.read_text().strip()


def kill_and_wait_until_gone(client, sleeper):
    """SIGKILL the wrapper process `client` (host pids, both); seconds until
    the remote `sleeper` was gone (None: still there after GONE_WITHIN)."""
    assert client and sleeper, (client, sleeper)
    killed = time.monotonic()
    os.kill(client, 9)
    while time.monotonic() - killed < GONE_WITHIN:
        argv = cmdline(sleeper)
        if argv is None or argv[:1] != [b"sleep"]:
            return round(time.monotonic() - killed, 2)
        time.sleep(0.05)
    return None


@pytest.fixture(scope="module")
def paths(workdir):
    """What the tests look at while the job runs, then the job released and
    the run's result. Yields a dict."""
    root = workdir / "wrapper-paths"
    root.mkdir()
    shared = Path(tempfile.mkdtemp(prefix="fmn-local-paths-", dir="/var/tmp"))
    user = pwd.getpwnam(lj.JOB_USER)
    os.chown(shared, user.pw_uid, user.pw_gid)
    shared.chmod(0o755)
    fuzzfile = lj.combine(root / "wrapper-paths.yml", [(lj.LOCAL_FUZZFILES / "wrapper-paths.yml", None)],
                          replace={"/fmn-local/paths": str(shared), "/fmn-local/runtime": lj.RUNTIME,
                                   "/fmn-local/agent": str(AGENT)})
    logs = root / "logs"
    argv, env = lj.playbook(fuzzfile, logs)
    out_path = root / "ansible-playbook.out"
    seen = {}
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=lj.REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        for way in ("fast", "slow"):
            seen[way + "_client"] = wait_for(shared / (way + ".client"), proc)
            seen[way + "_sleep"] = wait_for(shared / (way + ".sleep"), proc)
        seen["contract"] = {name: (shared / name).read_text() for name in os.listdir(shared)
                            if name.split("-")[0] in CONTRACT}
        if all(seen[key] for key in ("fast_client", "fast_sleep", "slow_client", "slow_sleep")):
            # Both calls are running: each client has made its call. The
            # job wrote the pids its sandbox knows them by; this machine's:
            host = {key: lj.host_pid(JOB, seen[key]) for key in ("fast_client", "fast_sleep", "slow_client",
                                                                 "slow_sleep")}
            seen["host_pids"] = host
            for way in ("fast", "slow"):
                seen[way + "_argv"] = cmdline(host[way + "_client"])
            seen["agent_clients"] = agent_clients()
            seen["wrappers"] = runtime_processes("wrapper")
            seen["connects"] = runtime_processes("connect")
            for way in ("fast", "slow"):
                seen[way + "_gone"] = kill_and_wait_until_gone(host[way + "_client"], host[way + "_sleep"])
            seen["running_after_kills"] = proc.poll() is None
        (shared / "stop").touch()
        try:
            seen["rc"] = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            seen["rc"] = None
        seen["output"] = out_path.read_text()
        seen["log"] = (logs / (JOB + ".log")).read_text() if (logs / (JOB + ".log")).exists() else ""
        seen["rank2_log"] = (logs / JOB / "rank-2.log").read_text() if (logs / JOB / "rank-2.log").exists() else ""
        seen["after"] = lj.machine_state([JOB])
        yield seen
    finally:
        if proc.poll() is None:
            (shared / "stop").touch()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                lj.unregister([JOB])
        shutil.rmtree(shared, ignore_errors=True)


def agent_clients():
    """The pids of the clients the agent directory holds a call of: in each
    claim of its pool, and of each reply FIFO of a client's own (as the
    clients know themselves, in the job's sandbox)."""
    pids = set()
    for name in (os.listdir(AGENT) if AGENT.exists() else []):
        if name.startswith("pool-") and name.endswith(".claim"):
            pid = (AGENT / name).read_bytes().split(b"\0", 1)[0]
        elif name.endswith(".reply") and name[:-len(".reply")].isdigit():
            pid = name[:-len(".reply")].encode()
        else:
            continue
        if pid.isdigit():
            pids.add(int(pid))
    return pids


def started(paths):
    assert paths.get("fast_argv") and paths.get("slow_argv"), (
        "the held calls did not both start:\n%s" % paths.get("output", "")[-8000:])


def test_the_job_finishes_with_both_calls_killed(paths):
    assert paths["rc"] == 0, paths["output"][-8000:]
    assert paths["log"].splitlines() == ["contract status=0", "released"], paths["output"][-8000:]
    assert paths["after"] == lj.cleaned(paths["after"], [JOB]), paths["after"]


def test_a_call_from_the_head_is_made_by_the_agent(paths):
    """While its call runs, the client is still the sh wrapper, waiting for
    the agent's answer (its claim of a reply FIFO of the agent's pool, or a
    FIFO of its own, is in the agent directory); no Python
    wrapper and no `connect` runs for it. The slow call beside it is the
    Python wrapper, in the same process (the client exec'd it)."""
    started(paths)
    fast, slow = paths["fast_argv"], paths["slow_argv"]
    assert fast[:3] == [b"/bin/sh", WRAPPER.encode(), b"wrapper-paths-1"], fast
    assert int(paths["fast_client"]) in paths["agent_clients"], paths["agent_clients"]
    assert slow[:5] == [b"/usr/bin/python3", b"-I", lj.RUNTIME.encode(), b"wrapper", b"wrapper-paths-2"], slow
    assert int(paths["slow_client"]) not in paths["agent_clients"], paths["agent_clients"]
    # The one Python wrapper on the machine is the slow call's, and so is
    # the one `connect` (its way to the local launch socket).
    assert [pid for pid, _unused in paths["wrappers"]] == [paths["host_pids"]["slow_client"]], paths["wrappers"]
    assert len(paths["connects"]) == 1, paths["connects"]


@pytest.mark.parametrize("way", ["fast", "slow"])
def test_killing_the_wrapper_process_stops_its_remote_command(paths, way):
    """SIGKILL to the wrapper on the head while its `sleep 600` runs on
    another rank: the sleep is gone soon after, while the job still runs
    (the call's lifeline ended, as the end of an ssh session would)."""
    started(paths)
    assert paths[way + "_gone"] is not None, "%s: sleep still there %d s after its wrapper was killed" % (
        way, GONE_WITHIN)
    assert paths["running_after_kills"], paths["output"][-8000:]


def contract_of(paths, how):
    """{call: (status, stdout, stderr, what the remote command wrote)}."""
    files = paths["contract"]
    return {label: (files.get("%s-%s.status" % (label, how)), files.get("%s-%s.out" % (label, how)),
                    files.get("%s-%s.err" % (label, how)), files.get("%s-%s.remote" % (label, how)))
            for label in CONTRACT if label != "where"}


def test_both_paths_keep_the_argv_contract(paths):
    """The same calls, from rank 1 to rank 2, through the sh client (the
    agent) and through the Python wrapper: the same exit status; nothing
    of the remote command's output on the caller's stdout or stderr
    (forwarding is off: it is in rank 2's log); the command words joined
    with spaces and run by the remote sh, as ssh does; ssh's options
    accepted; an unknown host refused with the wrapper's message, 255."""
    ranks = "wrapper-paths-0, wrapper-paths-1, wrapper-paths-2"
    expected = {
        "exit": ("7\n", "", "", None),
        "words": ("0\n", "", "", "<a  b><x><y><wrapper-paths-2><*>"),
        "options": ("0\n", "", "", "options\n"),
        "output": ("0\n", "", "", None),
        "unknown": ("255\n", "", "multinode-ssh-wrapper: unknown host 'no-such-host': job %s has ranks %s\n"
                    % (JOB, ranks), None),
    }
    assert contract_of(paths, "fast") == expected, paths["contract"]
    assert contract_of(paths, "slow") == expected, paths["contract"]
    rank2 = paths["rank2_log"].splitlines()
    for how in ("fast", "slow"):
        assert rank2.count("to-stdout-" + how) == rank2.count("to-stderr-" + how) == 1, rank2


def test_the_contract_calls_took_the_path_they_name(paths):
    """While its "where" call ran, the sh client of the fast one was among
    the agent's clients; no client of the slow one was (the Python wrapper
    makes it)."""
    files = paths["contract"]
    fast = files.get("where-fast.remote", "").splitlines()
    slow = files.get("where-slow.remote", "").splitlines()
    assert any(line.startswith("/bin/sh %s wrapper-paths-2 for f in " % WRAPPER) for line in fast), fast
    assert not any(" wrapper-paths-2 " in line for line in slow), slow
    # The rank-1 driver call from rank 0 is the agent's in both.
    assert any(line.startswith("/bin/sh %s wrapper-paths-1 sh " % WRAPPER) for line in slow), slow
