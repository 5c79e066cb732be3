"""The wrapper's two ways to a rank over real ssh (quoting scenario, 3 nodes;
the held job quoting-held of tests/fuzzfiles/quoting/held.yml): a call from
the head to a worker is made by the job's agent over the job's one
connection to that node (no Python wrapper, no ssh process for it); a call
the agent does not make (forwarding into a read-only stdout, to the head's
own node, from a worker) is the Python wrapper's, with the same argv
contract; a wrapper process killed on the head while its command runs on a
worker stops that command, on either path.

Each call is made inside the running job the way test_round_trip.py enters
it: in a host name namespace named like the caller's rank, as the job user,
with rank 0's environment on the head (a bare one on a worker), forwarding
set for the call as the test asks. The local tier shows the same in local
mode (tests/local/test_local_wrapper_paths.py).
"""

import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (puts the collection on sys.path)
from held_job import JOB, held_run  # noqa: E402  (the held job, quoting-held)

RUNTIME_PATH = node_runtime.runtime_argv("wrapper")[2]  # the runtime's path on the nodes

NODES = ["fmn-quoting-node-1", "fmn-quoting-node-2", "fmn-quoting-node-3"]
HEAD = NODES[0]
RANK_NAMES = ["quoting-held-0", "quoting-held-1", "quoting-held-2"]
WRAPPER = "/multinode/ssh-wrapper"
GONE_WITHIN = 30  # seconds a killed wrapper's remote command may outlive it

# pidfile, rank name, then python3's arguments: make this process (its pid
# in pidfile) a process of the rank, as the job user, and run ENTER (run
# inside the job's sandbox, wrapper_argv: the pids are the sandbox's).
AS_RANK = r"""pidfile=$1 name=$2
shift 2
echo "$$" >"$pidfile"
exec unshare --uts -- /bin/sh -c 'hostname "$0" &&
    exec setpriv --reuid=fuzz --regid=fuzz --init-groups -- /usr/bin/python3 "$@"' "$name" "$@"
"""
# ENV_PID FORWARD ARGS...: run the wrapper with ARGS, in the environment of
# process ENV_PID (or a bare one for "-"), forwarding on when FORWARD is 1,
# and with a read-only stdout (which the agent cannot write to) when it is
# "read-only".
ENTER = """
import os, pwd, sys
env = {b"PATH": b"/usr/local/bin:/usr/bin:/bin", b"HOME": os.fsencode(pwd.getpwuid(os.getuid()).pw_dir)}
if sys.argv[1] != "-":
    with open("/proc/%s/environ" % sys.argv[1], "rb") as handle:
        env = dict(item.split(b"=", 1) for item in handle.read().split(b"\\0") if b"=" in item)
env.pop(b"MULTINODE_WRAPPER_FORWARD_STREAMS", None)
if sys.argv[2] in ("1", "read-only"):
    env[b"MULTINODE_WRAPPER_FORWARD_STREAMS"] = b"1"
if sys.argv[2] == "read-only":
    os.dup2(os.open("/dev/null", os.O_RDONLY), 1)
os.execve(CLIENT, [CLIENT] + sys.argv[3:], env)
""".replace("CLIENT", repr(WRAPPER))
# Every process of the job on the node (run in its sandbox): [pid, argv].
PROCESSES = """
import json, os
found = []
for entry in os.listdir("/proc"):
    try:
        with open("/proc/%s/cmdline" % entry, "rb") as handle:
            argv = handle.read().decode(errors="replace").split("\\0")[:-1]
    except OSError:
        continue
    if entry.isdigit() and argv:
        found.append([int(entry), argv])
print(json.dumps(found))
"""


def docker_exec(*argv, **kwargs):
    return subprocess.run(["docker", "exec", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=kwargs.pop("check", False), **kwargs)


def wrapper_argv(node, rank, env_pid, forward, args, pidfile="/tmp/paths-call.pid"):
    return [node, *node_runtime.in_sandbox(node, JOB), "/bin/sh", "-c", AS_RANK, "sh", pidfile, RANK_NAMES[rank],
            "-c", ENTER, str(env_pid), {False: "0", True: "1"}.get(forward, forward), *args]


def call(node, rank, env_pid, args, forward=False):
    """(exit status, stdout, stderr) of one wrapper call made by `rank` on
    `node`."""
    done = docker_exec(*wrapper_argv(node, rank, env_pid, forward, args), timeout=120)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def read(node, path):
    done = docker_exec(node, "cat", path)
    return done.stdout.decode(errors="replace") if done.returncode == 0 else None


def wait_for(node, path, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = read(node, path)
        if text and text.endswith("\n"):
            return text.strip()
        time.sleep(0.2)
    return None


def alive(node, pid):
    """Whether the job's process `pid` (its sandbox's) lives on `node`."""
    done = docker_exec(node, *node_runtime.in_sandbox(node, JOB), "sh", "-c",
                       'grep -q "^State:[[:space:]]*[^Z]" /proc/%d/status' % pid)
    return done.returncode == 0


def kill_and_wait_until_gone(client, node, sleeper):
    """SIGKILL the wrapper process `client` on the head; seconds until
    `sleeper` on `node` was gone (None: still there after GONE_WITHIN)."""
    docker_exec(HEAD, *node_runtime.in_sandbox(HEAD, JOB), "kill", "-9", str(client))
    killed = time.monotonic()
    while time.monotonic() - killed < GONE_WITHIN:
        if not alive(node, sleeper):
            return round(time.monotonic() - killed, 1)
        time.sleep(0.2)
    return None


@pytest.fixture(scope="module")
def held_job(tmp_path_factory):
    """The running held job, and the pid of its rank 0 script on the head."""
    for node in NODES:
        docker_exec(node, "sh", "-c", "rm -f /tmp/paths-*")
    with held_run(NODES, tmp_path_factory.mktemp("paths-logs")) as pid:
        yield pid
    for node in NODES:
        docker_exec(node, "sh", "-c", "rm -f /tmp/paths-*")


@pytest.fixture(scope="module")
def held_calls(held_job):
    """Two calls from rank 0 holding `sleep 600` on a worker each, one the
    fast way (to rank 1) and one with forwarding on into a read-only
    stdout (to rank 2, the Python wrapper): the head's processes while both
    run, then how long each sleep outlived its killed wrapper process."""
    seen = {}
    for way, rank, forward in (("fast", 1, False), ("slow", 2, "read-only")):
        command = "echo $$ >/tmp/paths-%s.sleep; exec sleep 600" % way
        docker_exec("-d", *wrapper_argv(HEAD, 0, held_job, forward, [RANK_NAMES[rank], command],
                                        pidfile="/tmp/paths-%s.client" % way))
    for way, node in (("fast", NODES[1]), ("slow", NODES[2])):
        seen[way + "_client"] = wait_for(HEAD, "/tmp/paths-%s.client" % way)
        seen[way + "_sleep"] = wait_for(node, "/tmp/paths-%s.sleep" % way)
    if all(seen.values()):
        seen["processes"] = dict((pid, argv) for pid, argv in json.loads(
            docker_exec(HEAD, *node_runtime.in_sandbox(HEAD, JOB), "python3", "-I", "-c", PROCESSES).stdout))
        for way, node in (("fast", NODES[1]), ("slow", NODES[2])):
            seen[way + "_gone"] = kill_and_wait_until_gone(int(seen[way + "_client"]), node,
                                                           int(seen[way + "_sleep"]))
    return seen


def started(seen):
    assert "processes" in seen, "the held calls did not both start: %r" % seen


def test_a_head_call_to_a_worker_goes_over_the_jobs_connection(held_calls):
    """While the calls run: the fast call's process is still the sh client
    (waiting for the agent's answer) and no ssh session was opened for it;
    the call forwarding into a read-only stdout beside it is the Python
    wrapper with an ssh session of its own (the job's own ssh processes are
    its ControlMasters)."""
    started(held_calls)
    processes = held_calls["processes"]
    fast, slow = processes.get(int(held_calls["fast_client"])), processes.get(int(held_calls["slow_client"]))
    assert fast[:3] == ["/bin/sh", WRAPPER, RANK_NAMES[1]], fast
    assert slow[:5] == ["/usr/bin/python3", "-I", RUNTIME_PATH, "wrapper", RANK_NAMES[2]], slow
    wrappers = [pid for pid, argv in processes.items() if argv[2:4] == [RUNTIME_PATH, "wrapper"]]
    assert wrappers == [int(held_calls["slow_client"])], processes
    sessions = [argv for argv in processes.values()
                if os.path.basename(argv[0]) == "ssh" and "-T" in argv and "-M" not in argv]
    assert len(sessions) == 1 and "HostKeyAlias=" + NODES[2] in sessions[0], sessions


@pytest.mark.parametrize("way", ["fast", "slow"])
def test_killing_a_head_wrapper_process_stops_its_worker_command(held_calls, way):
    """SIGKILL to the wrapper on the head while `sleep 600` runs on a worker
    for it: the sleep is gone soon after (the job runs on)."""
    started(held_calls)
    assert held_calls[way + "_gone"] is not None, (
        "%s: sleep 600 still runs %d s after its wrapper process was killed" % (way, GONE_WITHIN))


WORDS = ["printf", "'<%s>'", "'a  b'", "x   y", '"$HOSTNAME"', "\\*"]


def test_calls_the_agent_does_not_make_keep_the_argv_contract(held_job):
    """The same words from the head to a worker (the agent), to the head's
    own node and from a worker to a worker and to the head (the Python
    wrapper): joined with spaces and run by the remote sh, as ssh does;
    exit status passed through; nothing on the caller's stdout or stderr
    (forwarding off)."""
    made = {}
    for name, node, rank, env, target in (("fast", HEAD, 0, held_job, 1), ("own", HEAD, 0, held_job, 0),
                                          ("worker", NODES[1], 1, "-", 2), ("to-head", NODES[1], 1, "-", 0)):
        out = "/tmp/paths-words-%s" % name
        made[name] = (call(node, rank, env, ["-x", "-o", "BatchMode=yes", RANK_NAMES[target]] + WORDS + [">" + out]),
                      read(NODES[target], out))
    assert made == {
        "fast": ((0, "", ""), "<a  b><x><y><quoting-held-1><*>"),
        "own": ((0, "", ""), "<a  b><x><y><quoting-held-0><*>"),
        "worker": ((0, "", ""), "<a  b><x><y><quoting-held-2><*>"),
        "to-head": ((0, "", ""), "<a  b><x><y><quoting-held-0><*>"),
    }
    # A worker's failing call fails no job: its status is the caller's.
    assert call(NODES[1], 1, "-", [RANK_NAMES[2], "echo out; echo err >&2; exit 7"]) == (7, "", "")
