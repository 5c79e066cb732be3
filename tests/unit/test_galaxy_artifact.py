"""The collection as users get it: `ansible-galaxy collection build` makes an
artifact without the development files, which installs into a fresh
collections path and works from outside the repository by its fuzz.multinode
names (modules, their documentation, the FQCN playbook)."""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tool(name):
    # The Ansible installed beside this Python (.venv), not another one on PATH.
    found = str(BIN / name) if (BIN / name).exists() else shutil.which(name)
    assert os.path.exists(found), "%s not found: run scripts/test (it installs .venv)" % name
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(artifact, collections path, a working directory outside the repository)."""
    top = tmp_path_factory.mktemp("galaxy")
    subprocess.run([tool("ansible-galaxy"), "collection", "build", str(ROOT), "--output-path",
                    str(top)], check=True, capture_output=True, text=True)
    artifact = top / ("fuzz-multinode-%s.tar.gz" % galaxy_version())
    collections = top / "collections"
    # --force: a checkout on the configured collections path would otherwise
    # count as "already installed".
    subprocess.run([tool("ansible-galaxy"), "collection", "install", "--force", "-p",
                    str(collections), str(artifact)], check=True, capture_output=True, text=True)
    assert (collections / "ansible_collections/fuzz/multinode/run-job.yml").exists()
    outside = top / "work"
    outside.mkdir()
    return artifact, collections, outside


def galaxy_version():
    for line in (ROOT / "galaxy.yml").read_text().splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("galaxy.yml has no version")


def run(installed, argv, stderr=subprocess.STDOUT):
    _unused, collections, outside = installed
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, cwd=outside, env=env, stdout=subprocess.PIPE,
                          stderr=stderr, text=True, timeout=300, check=False)


def test_artifact_holds_what_users_run_and_no_development_files(installed):
    artifact, _unused, _unused = installed
    with tarfile.open(artifact) as tar:
        names = set(tar.getnames())
    for needed in ("run-job.yml", "playbooks/run_job.yml", "files/multinode-runtime/__main__.py",
                   "files/multinode-runtime/multinode_runtime/cli.py",
                   "files/generic-helper", "files/ssh-wrapper", "roles/workflow/tasks/step.yml",
                   "plugins/modules/fuzzfile.py", "examples/pipeline.yml", "README.md"):
        assert needed in names, needed
    tops = {name.split("/")[0] for name in names}
    for dev in ("tests", "molecule", "scripts", "bench", ".hypothesis", ".venv", ".git",
                "ansible_collections", ".ci"):
        assert dev not in tops, dev
    assert not [name for name in names if "__pycache__" in name]


MODULES = sorted(path.stem for path in (ROOT / "plugins" / "modules").glob("*.py") if path.stem != "__init__")


@pytest.fixture(scope="module")
def module_docs(installed):
    """ansible-doc's JSON of every module of the installed collection, from
    one call (a call per module cost seconds each)."""
    proc = run(installed, [tool("ansible-doc"), "--json", "-t", "module"]
               + ["fuzz.multinode." + module for module in MODULES], stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_documents_itself_from_the_installed_collection(module_docs, module):
    doc = module_docs["fuzz.multinode." + module]
    assert doc["doc"]["short_description"] and doc["examples"].strip() and doc["return"]
    # Every attribute says what it means (the attributes fragment) and how
    # far this module supports it.
    attributes = doc["doc"]["attributes"]
    assert set(attributes) == {"action", "check_mode", "diff_mode"}
    for name, attribute in attributes.items():
        assert attribute.get("description") and attribute.get("support") in ("full", "partial", "none"), name


def test_the_installed_validator_reads_the_installed_example(installed):
    _unused, collections, _unused = installed
    example = collections / "ansible_collections/fuzz/multinode/examples/pipeline.yml"
    proc = run(installed, [tool("ansible"), "localhost", "-m", "fuzz.multinode.fuzzfile",
                           "-a", "path=%s" % example])
    assert proc.returncode == 0, proc.stdout
    assert "prepare" in proc.stdout and "FAILED" not in proc.stdout


def test_the_fqcn_playbook_runs_from_outside_the_repository(installed, tmp_path):
    """fuzz.multinode.run_job loads, validates and refuses a job it cannot run
    before touching the (unreachable) host: the whole first play works from
    the installed artifact."""
    fuzzfile = tmp_path / "job.yml"
    fuzzfile.write_text("version: v4\njobs:\n  chapel:\n    image: {uri: docker://x}\n"
                        "    command: [\"true\"]\n    multinode: {nodes: 1, implementation: gasnet}\n")
    inventory = tmp_path / "inventory"
    inventory.write_text("[multinode]\nghost ansible_host=127.0.0.1 ansible_port=9\n")
    proc = run(installed, [tool("ansible-playbook"), "fuzz.multinode.run_job", "-i", str(inventory),
                           "-e", "fuzzfile=%s" % fuzzfile])
    assert proc.returncode != 0
    assert "jobs.chapel.multinode.implementation: 'gasnet' is not supported" in proc.stdout
    assert "UNREACHABLE" not in proc.stdout and "Traceback" not in proc.stdout


def test_a_detached_run_and_the_run_playbooks_work_from_the_installed_collection(installed, tmp_path):
    """fuzz.multinode.run_job -e fuzz_multinode_detach=true returns at once;
    its background run (ansible-runner, the installed playbook by its FQCN)
    cannot reach the host, and its record says so: FAILED before its jobs.
    runs and status read it; an unknown run gets one clear line."""
    import re
    import time

    fuzzfile = tmp_path / "job.yml"
    fuzzfile.write_text("version: v4\njobs:\n  hello:\n    image: {uri: docker://x}\n    command: [\"true\"]\n")
    inventory = tmp_path / "inventory"
    inventory.write_text("[multinode]\nghost ansible_host=127.0.0.1 ansible_port=9 ansible_user=nobody\n")
    runs = tmp_path / "runs"
    started = time.monotonic()
    proc = run(installed, [tool("ansible-playbook"), "fuzz.multinode.run_job", "-i", str(inventory),
                           "-e", "fuzzfile=%s" % fuzzfile, "-e", "fuzz_multinode_detach=true",
                           "-e", "fuzz_multinode_runs_dir=%s" % runs])
    assert proc.returncode == 0 and time.monotonic() - started < 60, proc.stdout
    run_id = re.search(r"run (\S+) submitted in the background", proc.stdout).group(1)
    # ansible-runner writes the playbook's exit status last.
    deadline = time.monotonic() + 120
    while not list((runs / run_id / "runner" / "artifacts").glob("*/rc")) and time.monotonic() < deadline:
        time.sleep(0.5)
    for _unused in range(20):  # a look at the record finds its processes gone
        proc = run(installed, [tool("ansible-playbook"), "fuzz.multinode.status", "-e", "run=" + run_id,
                               "-e", "fuzz_multinode_runs_dir=%s" % runs])
        if "run %s (job): RUNNING" % run_id not in proc.stdout:
            break
    assert proc.returncode == 0 and "run %s (job): FAILED" % run_id in proc.stdout, proc.stdout
    assert "its playbook ended before any job started" in proc.stdout
    state = json.loads((runs / run_id / "state.json").read_text())
    assert state["state"] == "FAILED" and state["jobs"]["hello"]["state"] == "NOT_RUN", state
    proc = run(installed, [tool("ansible-playbook"), "fuzz.multinode.runs", "-e", "fuzz_multinode_runs_dir=%s" % runs])
    assert re.search(r"^%s +job +FAILED " % re.escape(run_id), proc.stdout, re.M), proc.stdout
    proc = run(installed, [tool("ansible-playbook"), "fuzz.multinode.logs", "-e", "run=20260101T000000Z-000000",
                           "-e", "fuzz_multinode_runs_dir=%s" % runs])
    assert proc.returncode != 0 and "no run 20260101T000000Z-000000 in" in proc.stdout
    assert "Traceback" not in proc.stdout
