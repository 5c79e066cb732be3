"""The collection as users install it: the artifact `ansible-galaxy
collection build` makes, installed into a fresh collections path, runs the
spec's helper example on this scenario's cluster by its fuzz.multinode names
(the FQCN playbook fuzz.multinode.run_job), from outside the repository."""

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
BIN = Path(sys.executable).parent


def test_installed_artifact_runs_an_example_by_its_fqcn_playbook(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANSIBLE_", "MOLECULE_", "PY_COLORS"))}
    env["ANSIBLE_NOCOLOR"] = "1"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", str(PROJECT),
                    "--output-path", str(tmp_path)], check=True, env=env, capture_output=True)
    artifact = next(tmp_path.glob("fuzz-multinode-*.tar.gz"))
    collections = tmp_path / "collections"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", "-p",
                    str(collections), str(artifact)], check=True, env=env, capture_output=True)
    installed = collections / "ansible_collections" / "fuzz" / "multinode"
    outside = tmp_path / "work"
    outside.mkdir()
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "fuzz.multinode.run_job", "-i", INVENTORY,
         "-e", "fuzzfile=%s" % (installed / "examples" / "generic-multinode-helper.yml"),
         "-e", "log_dir=%s" % (outside / "logs")],
        cwd=outside, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout
    # fuzz.multinode resolves to the installed artifact only, not the checkout.
    listed = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "list", "fuzz.multinode"],
                            cwd=outside, env=env, capture_output=True, text=True, check=False).stdout
    paths = [line[2:].strip() for line in listed.splitlines() if line.startswith("# ")]
    assert paths == [str(collections / "ansible_collections")], listed
    assert (outside / "logs" / "generic-multinode-helper.log").read_text().splitlines() == [
        "generic-multinode-helper-0 is the head node",
        "generic-multinode-helper-1 is a worker node",
    ]
