"""Verifier of the security scenario, root and the job's paths (issue 12,
docs/docsite/rst/guide_security.rst): hostile jobs on a 3-node cluster, each the attacker's
job script, run through run-job.yml as a user runs it.

- root-paths-worker.yml: links in the job user's parts of the job
  directory on a worker node; the worker's teardown removes the links,
  never what they point to, and never reads a record through one.
- forced-env.yml: a launch request sent with client environment
  (ssh SendEnv LC_*): root's forced command starts without it.
"""

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "security"
NODES = ["fmn-security-node-1", "fmn-security-node-2", "fmn-security-node-3"]
HEAD, WORKER = NODES[:2]
ROOT_RECORD = {"rank": 1, "start": 1.0, "end": 2.0, "status": 7, "lost": "ROOT-ONLY-WORKER-RECORD"}


def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, check=False)


def on(node, script, timeout=60):
    return docker("exec", node, "sh", "-c", script, timeout=timeout)


# -- links in the job's directories on a worker ---------------------------------

@pytest.fixture(scope="module")
def worker_links(tmp_path_factory):
    made = on(WORKER, "rm -rf /root/fmn-rp-victim && mkdir -m 755 /root/fmn-rp-victim && "
                      "echo keep > /root/fmn-rp-victim/keep && printf %%s '%s' > /root/fmn-rp-record.json"
              % json.dumps(ROOT_RECORD))
    assert made.returncode == 0, made.stderr
    logs = tmp_path_factory.mktemp("logs")
    try:
        rc, output, seconds = user_playbook.run_job(FUZZFILES / "root-paths-worker.yml", logs)
        yield {"rc": rc, "output": output, "seconds": seconds, "logs": logs,
               "victim": on(WORKER, "ls /root/fmn-rp-victim").stdout.split(),
               "worker": node_runtime.show(WORKER, "rp-worker-links")}
    finally:
        on(WORKER, "rm -rf /root/fmn-rp-victim /root/fmn-rp-record.json")


def test_a_workers_teardown_removes_the_jobs_links_and_unregisters_the_job(worker_links):
    """A crashed teardown there left the job directory behind, and every
    later run of the job name failed at prepare."""
    assert worker_links["rc"] == 0, worker_links["output"][-6000:]
    rank_log = worker_links["logs"] / "rp-worker-links" / "rank-1.log"
    assert rank_log.exists() and rank_log.read_text() == "worker links made on rp-worker-links-1\n", (
        worker_links["output"][-6000:])
    assert worker_links["worker"]["registered"] is False, worker_links["worker"]


def test_a_workers_teardown_never_removes_what_the_jobs_links_point_to(worker_links):
    assert worker_links["victim"] == ["keep"]


def test_a_worker_never_hands_over_a_root_only_record_behind_a_link(worker_links):
    shown = [worker_links["output"]] + [path.read_text(errors="replace")
                                        for path in worker_links["logs"].rglob("*") if path.is_file()]
    assert not [text for text in shown if "ROOT-ONLY-WORKER-RECORD" in text]


# -- client environment into the forced command -----------------------------------

def launch_processes_env(node):
    """{pid: environ entries} of the root processes on `node` running the
    runtime's `launch` (sshd's forced command)."""
    script = r"""
for d in /proc/[0-9]*; do
  [ "$(stat -c %u "$d" 2>/dev/null)" = 0 ] || continue
  tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q ' launch $' || continue
  printf '%s ' "${d#/proc/}"; tr '\0' ' ' < "$d/environ"; echo
done"""
    found = {}
    for line in on(node, script).stdout.splitlines():
        pid, _unused, env = line.partition(" ")
        found[pid] = env.split()
    return found


@pytest.fixture(scope="module")
def forced_env(tmp_path_factory):
    on(HEAD, "rm -f /tmp/fmn-rp-forced-ready /tmp/fmn-rp-forced-stop")
    logs = tmp_path_factory.mktemp("logs")
    argv, env = user_playbook.playbook(FUZZFILES / "forced-env.yml", logs)
    out_path = logs / "ansible-playbook.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    seen = {}
    try:
        deadline = time.monotonic() + 240
        while on(HEAD, "test -e /tmp/fmn-rp-forced-ready").returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the job did not start:\n%s" % out_path.read_text()[-6000:])
            time.sleep(0.5)
        # The run's own token (root may read it): the request is the run's.
        token = on(HEAD, "cat /run/fuzz-multinode/jobs/rp-forced-env/token").stdout.strip()
        assert token
        request = "launch " + base64.b64encode(json.dumps(
            {"job": "rp-forced-env", "rank": 1, "command": "sleep 20", "forward": False,
             "token": token}).encode()).decode()
        # As a client can: its own environment, sent (stdin held open: the
        # call's lifeline).
        attack = docker("exec", "-d", HEAD, "sh", "-c",
                        "sleep 30 | LC_FMN_PROBE=client-sent LANG=fmn-client ssh -F /etc/fuzz-multinode/ssh_config "
                        "-o ControlMaster=no -o ControlPath=none -o SendEnv=LC_FMN_PROBE -o SendEnv=LANG "
                        "-o HostKeyAlias=%s -T root@%s '%s' >/tmp/fmn-rp-forced-ssh.out 2>&1" % (
                            WORKER, WORKER, request))
        assert attack.returncode == 0, attack.stderr
        deadline = time.monotonic() + 30
        while not seen.get("launch") and time.monotonic() < deadline:
            seen["launch"] = launch_processes_env(WORKER)
            time.sleep(0.3)
        seen["ssh"] = on(HEAD, "cat /tmp/fmn-rp-forced-ssh.out").stdout
        on(HEAD, ": > /tmp/fmn-rp-forced-stop")
        proc.wait(timeout=240)
        seen["rc"], seen["output"] = proc.returncode, out_path.read_text()
        yield seen
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        on(HEAD, "rm -f /tmp/fmn-rp-forced-*")  # the attack's ssh ends with its sleep


def test_the_forced_command_starts_without_the_clients_environment(forced_env):
    assert forced_env["launch"], "no launch process on %s: %s" % (WORKER, forced_env.get("ssh"))
    for pid, env in forced_env["launch"].items():
        assert not [entry for entry in env if "client-sent" in entry or "fmn-client" in entry], (pid, env)
    assert forced_env["rc"] == 0, forced_env["output"][-6000:]
