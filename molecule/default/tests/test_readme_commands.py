"""The README's container-cluster command, exactly as a new user types it:
`scripts/run-example --cluster examples/generic-multinode-helper.yml` creates
its own 2-node cluster (beside this scenario's), runs the example over SSH,
shows the job's output and summary, and removes its cluster again."""

import os
import subprocess
from pathlib import Path

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])

# The verifier's own Molecule/Ansible settings are not what a user has.
USER_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("ANSIBLE_", "MOLECULE_", "PY_COLORS"))}


def example_containers():
    out = subprocess.run(["docker", "ps", "-a", "--filter", "name=fmn-example-", "--format", "{{.Names}}"],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def test_run_example_on_a_container_cluster_prints_the_documented_lines(tmp_path):
    before = example_containers()
    proc = subprocess.run([str(PROJECT / "scripts" / "run-example"), "--cluster",
                           str(PROJECT / "examples" / "generic-multinode-helper.yml")],
                          cwd=tmp_path, env=dict(USER_ENV, ANSIBLE_NOCOLOR="1"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout
    log = (tmp_path / "fuzz-logs" / "generic-multinode-helper.log").read_text()
    assert log.splitlines() == ["generic-multinode-helper-0 is the head node",
                                "generic-multinode-helper-1 is a worker node"], log
    # The user saw both lines on the terminal as they came, and the summary.
    for line in log.splitlines():
        assert "[generic-multinode-helper] " + line in proc.stdout, proc.stdout
    assert "job generic-multinode-helper FINISHED after" in proc.stdout, proc.stdout
    assert example_containers() == before, "run-example left its cluster behind"
