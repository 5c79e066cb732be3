"""Verifier of the security scenario, the cluster key (issue 12, hole 3;
docs/docsite/rst/guide_security.rst): the key that sshd accepts for root's forced command is
read by the job user's ssh, but no job may change it. The attacker's job
tests/fuzzfiles/security/key-tamper.yml tries on every node, through
run-job.yml as a user runs it; the key must be root's on every node,
unchanged, and every attempt denied."""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILE = PROJECT / "tests" / "fuzzfiles" / "security" / "key-tamper.yml"
NODES = ["fmn-security-node-1", "fmn-security-node-2", "fmn-security-node-3"]
KEY = "/etc/fuzz-multinode/cluster_ed25519"
ATTEMPTS = 6  # in key-tamper.yml, on each rank


def key_state(node):
    """Owner, group, mode and digest of the node's cluster key."""
    done = subprocess.run(["docker", "exec", node, "sh", "-c",
                           "stat -c '%%U %%G %%a' %s && sha256sum <%s" % (KEY, KEY)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    return done.stdout.split()


def test_no_job_can_change_the_cluster_key(tmp_path):
    before = {node: key_state(node) for node in NODES}
    rc, output, seconds = user_playbook.run_job(FUZZFILE, tmp_path)
    run = user_playbook.JobRun("key-tamper", tmp_path, rc, output, seconds, {})
    assert rc == 0, run
    lines = [line for line in run.lines() if " allowed: " in line or " denied: " in line]
    assert len(lines) == ATTEMPTS * len(NODES), run
    assert [line for line in lines if " allowed: " in line] == [], run
    after = {node: key_state(node) for node in NODES}
    assert after == before, run
    for node, (owner, group, mode, *_unused) in after.items():
        assert (owner, group, mode) == ("root", "fuzz", "640"), node


def test_the_nodes_connections_use_the_first_key_exchange_of_the_setting():
    """curve25519-sha256 (fuzz_multinode_ssh_kex_algorithms' first), not
    OpenSSH 9's own first choice, sntrup761x25519, whose handshake costs
    twice the CPU: every job pays it twice a worker. A connection with the
    runtime's ssh_config and pinned host key; the key exchange comes before
    any login, which is not the point here."""
    done = subprocess.run(["docker", "exec", NODES[0], "ssh", "-v", "-F", "/etc/fuzz-multinode/ssh_config",
                           "-o", "HostKeyAlias=" + NODES[1], "root@" + NODES[1], "-T", "not-a-request"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    assert "debug1: kex: algorithm: curve25519-sha256\n" in done.stdout, done.stdout
