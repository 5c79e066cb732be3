"""run-job.yml refuses jobs it cannot run before it touches any host. The
inventory's host points at a closed loopback port: had the play tried to
reach it, the output would say UNREACHABLE."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

TOP = Path(__file__).resolve().parents[2]


def ansible_playbook():
    found = shutil.which("ansible-playbook") or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    assert os.path.exists(found), "ansible-playbook not found: run scripts/test (it installs .venv)"
    return found


def run(tmp_path, job, hosts=1, extra=(), kind="jobs"):
    fuzzfile = tmp_path / "job.yml"
    fuzzfile.write_text(yaml.safe_dump({"version": "v4", kind: {"solve": job}}))
    inventory = tmp_path / "inventory"
    inventory.write_text("[multinode]\n" + "".join(
        "ghost-%d ansible_host=127.0.0.1 ansible_port=9 ansible_connection=ssh\n" % i
        for i in range(hosts)))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(TOP), ANSIBLE_CONFIG=str(TOP / "ansible.cfg"))
    proc = subprocess.run(
        [ansible_playbook(), "run-job.yml", "-i", str(inventory), "-e", "fuzzfile=%s" % fuzzfile, *extra],
        cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, check=False)
    assert "UNREACHABLE" not in proc.stdout and "ghost-0" not in proc.stdout.split("PLAY RECAP")[0], proc.stdout
    assert "Traceback" not in proc.stdout
    return proc.returncode, proc.stdout


def job(**extra):
    base = {"image": {"uri": "docker://alpine"}, "command": ["true"],
            "multinode": {"nodes": 2, "implementation": "generic"}}
    base.update(extra)
    return base


def test_fewer_hosts_than_nodes_fails_naming_both_numbers(tmp_path):
    rc, out = run(tmp_path, job(), hosts=1)
    assert rc != 0
    assert "job solve needs 2 nodes but the inventory group multinode has 1 hosts" in out


def test_a_service_with_more_nodes_than_hosts_is_named_a_service(tmp_path):
    rc, out = run(tmp_path, job(), hosts=1, kind="services")
    assert rc != 0
    assert "service solve needs 2 nodes but the inventory group multinode has 1 hosts" in out


def test_unsupported_implementation_is_refused(tmp_path):
    """gasnet, the one implementation this collection cannot run, is refused
    by the first task, with the reason and the way out (the whole message is
    checked in test_fuzzfile.py)."""
    rc, out = run(tmp_path, job(multinode={"nodes": 1, "implementation": "gasnet"}), hosts=1)
    assert rc != 0
    assert ("jobs.solve.multinode.implementation: 'gasnet' is not supported: fuzz.multinode "
            "has no GASNet launcher" in out)
    assert "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER" in out


def test_invalid_fuzzfile_is_refused_with_the_field(tmp_path):
    rc, out = run(tmp_path, job(multinode={"nodes": 0, "implementation": "generic"}), hosts=1)
    assert rc != 0
    assert "jobs.solve.multinode.nodes: must be an integer >= 1" in out


def test_a_secret_in_a_command_line_is_refused_before_any_host_where_the_site_says_so(tmp_path):
    """fuzz_multinode_secret_arguments: refuse keeps the refusal of old
    (issue 12; by default such a job runs with a warning: tests/local)."""
    rc, out = run(tmp_path, job(env=["TOKEN=secret://user/token"], command=["/bin/sh", "run.sh", "$TOKEN"]),
                  hosts=2, extra=["-e", '{"fuzz_multinode_secrets": {"user/token": "t0ken"}}',
                                  "-e", "fuzz_multinode_secret_arguments=refuse"])
    assert rc != 0
    assert ("jobs.solve.command[2]: expands a secret:// env value, and every user of a node can read a "
            "process's command line (ps); read the secret from the job's environment instead "
            "(fuzz_multinode_secret_arguments: refuse)" in out), out
    assert "t0ken" not in out
    rc, out = run(tmp_path, job(), hosts=2, extra=["-e", "fuzz_multinode_secret_arguments=never"])
    assert rc != 0
    assert "value of secret_arguments must be one of: allow, refuse, got: never" in out, out


def test_an_image_secret_without_registry_credentials_is_refused_before_any_host(tmp_path):
    """Not defined, a plain string, a mapping without a password: each refused
    naming the job, the field and the reference, and no value is shown."""
    image = {"uri": "docker://registry.example.org/site/private:1", "secret": "secret://user/registry"}
    rc, out = run(tmp_path, job(image=image), hosts=2)
    assert rc != 0
    assert ("jobs.solve.image.secret: secret://user/registry is not defined in fuzz_multinode_secrets" in out), out
    for value in ('"fuzz:pa55word"', '{"username": "fuzz", "pasword": "pa55word"}'):
        rc, out = run(tmp_path, job(image=image), hosts=2,
                      extra=["-e", '{"fuzz_multinode_secrets": {"user/registry": %s}}' % value])
        assert rc != 0
        assert ("jobs.solve.image.secret: the value of secret://user/registry in fuzz_multinode_secrets is "
                "not registry credentials: it must be a mapping of username and password" in out), out
        assert "pa55word" not in out
