"""Every role checks its variables against meta/argument_specs.yml before
its first task: a bad value fails the play at once, naming the variable,
and nothing runs. The play targets a host that cannot be reached: had any
task of the role run there, the output would say UNREACHABLE."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TOP = Path(__file__).resolve().parents[2]


def ansible_playbook():
    found = shutil.which("ansible-playbook") or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    assert os.path.exists(found), "ansible-playbook not found: run scripts/test (it installs .venv)"
    return found


def run_role(tmp_path, role, variables):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Use the role with these variables",
        "hosts": "ghost",
        "gather_facts": False,
        "roles": [dict({"role": "fuzz.multinode." + role}, vars=variables)],
    }]))
    inventory = tmp_path / "inventory"
    inventory.write_text("ghost ansible_host=127.0.0.1 ansible_port=9 ansible_connection=ssh\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(TOP), ANSIBLE_CONFIG=str(TOP / "ansible.cfg"))
    proc = subprocess.run([ansible_playbook(), str(playbook), "-i", str(inventory)],
                          cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, check=False)
    assert "UNREACHABLE" not in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout, proc.stdout
    return proc.returncode, proc.stdout


@pytest.mark.parametrize(
    "role, variables, complaint",
    [
        ("node", {"fuzz_multinode_install_packages": "perhaps"}, "fuzz_multinode_install_packages"),
        ("node", {"fuzz_multinode_ssh_alive_interval": "often"}, "fuzz_multinode_ssh_alive_interval"),
        ("job", {}, "missing required arguments: fuzz_multinode_job"),
        ("job", {"fuzz_multinode_job": {"name": "x"}, "fuzz_multinode_kill_grace": "soon"},
         "fuzz_multinode_kill_grace"),
        ("job", {"fuzz_multinode_job": {"name": "x"}, "fuzz_multinode_claim_lease": "a while"},
         "fuzz_multinode_claim_lease"),
        ("job", {"fuzz_multinode_job": {"name": "x"}, "fuzz_multinode_rank_hosts": {"node1": 0}},
         "fuzz_multinode_rank_hosts"),
        ("workflow", {"fuzz_multinode_workflow_jobs": "all of them"}, "fuzz_multinode_workflow_jobs"),
    ],
)
def test_a_bad_role_variable_fails_before_any_task_naming_it(tmp_path, role, variables, complaint):
    rc, out = run_role(tmp_path, role, variables)
    assert rc != 0, out
    failure = out.split("fatal:", 1)[-1]
    assert "Validation of arguments failed" in failure, out
    assert complaint in failure, out
