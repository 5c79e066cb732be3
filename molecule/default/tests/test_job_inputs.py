"""Job inputs on a real 2-node cluster, through run-job.yml as a user runs
it: secret:// env values from a vault-encrypted fuzz_multinode_secrets, job
files and cwd (tests/fuzzfiles/inputs/)."""

import hashlib
import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "inputs"
NODES = ["fmn-default-node-1", "fmn-default-node-2"]
testinfra_hosts = NODES
# Fixtures that run a job prepare and check every node themselves.
ALL_NODES = [testinfra.get_host("ansible://" + name, ansible_inventory=INVENTORY) for name in NODES]

# New for every run, so finding its random part anywhere can only mean it
# leaked (searched for that part: output formats escape the quotes). Quotes,
# $, backslash and % are there to be mangled by any shell or format on the way.
SECRET_ID = secrets.token_hex(12)
SECRET = "fmn-secret-%s with spaces $HOME 'single' \"double\" \\ %%s" % SECRET_ID
# The top-level files entry data.bin of inputs-ok.yml, exactly.
DATA = "tab\there\r\ncrlf above, \u00fc, {{ not_templated }} $HOME \\ no newline at end"
CWD = "/srv/fmn-inputs-cwd"


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def flat(text):
    """Output with every run of whitespace made one space: a long message
    may be folded over several lines by the YAML result format."""
    return " ".join(text.split())


def on_every_node(command):
    for node in ALL_NODES:
        node.check_output(command)


def run_job(fuzzfile, logs, args=()):
    return user_playbook.run_job(FUZZFILES / fuzzfile, logs, args=args)


def parse(line):
    """`key=value key=value ...` (a value may hold one space: `644 fuzz`)."""
    fields, key = {}, None
    for word in line.split(" "):
        if "=" in word:
            key, value = word.split("=", 1)
            fields[key] = value
        else:
            fields[key] += " " + word
    return fields


@pytest.fixture(scope="module")
def vault_args(tmp_path_factory):
    """fuzz_multinode_secrets as a user keeps it: a vars file encrypted with
    ansible-vault, passed with -e @FILE and a vault password file."""
    directory = tmp_path_factory.mktemp("vault")
    password = directory / "vault-password"
    password.write_text(secrets.token_hex(16) + "\n")
    password.chmod(0o600)
    variables = directory / "secrets.yml"
    variables.write_text(yaml.safe_dump({"fuzz_multinode_secrets": {
        "user/fmn-token": SECRET, "user/fmn-unused": "unused-" + SECRET_ID}}))
    vault = os.path.join(os.path.dirname(sys.executable), "ansible-vault")
    subprocess.run([vault, "encrypt", "--vault-password-file", str(password), str(variables)],
                   check=True, capture_output=True)
    assert variables.read_text().startswith("$ANSIBLE_VAULT;")
    return ["-e", "@%s" % variables, "--vault-password-file", str(password)]


# -- a job with a secret, files and a cwd ---------------------------------------

@pytest.fixture(scope="module")
def inputs_ok(tmp_path_factory, vault_args):
    """inputs-ok.yml at -vvv: (rc, output, {rank: fields}, head's argv
    line, logs). The job user already has kept.txt; cwd exists on both."""
    on_every_node("rm -rf /tmp/fmn-inputs /tmp/fmn-inputs-kept && mkdir -p %s "
                  "/tmp/fmn-inputs-kept && printf old > /tmp/fmn-inputs-kept/kept.txt && "
                  "chown -R fuzz /tmp/fmn-inputs-kept" % CWD)
    logs = tmp_path_factory.mktemp("logs")
    rc, output, _unused = run_job("inputs-ok.yml", logs, args=vault_args + ["-vvv"])
    log = (logs / "inputs-ok.log").read_text() if (logs / "inputs-ok.log").exists() else ""
    ranks = {}
    args = []
    for line in log.splitlines():
        if line.startswith("rank="):
            fields = parse(line)
            ranks[int(fields["rank"])] = fields
        elif line.startswith("arg="):
            args.append(line)
    return rc, output, ranks, args, logs, log


def test_inputs_job_runs(inputs_ok):
    rc, output, ranks, _unused, _unused, log = inputs_ok
    assert rc == 0, output[-5000:]
    assert sorted(ranks) == [0, 1], log
    assert [ranks[r]["host"] for r in (0, 1)] == ["inputs-ok-0", "inputs-ok-1"]


def test_secret_reaches_the_env_of_every_rank(inputs_ok):
    _unused, _unused, ranks, _unused, _unused, log = inputs_ok
    assert [ranks[r]["token"] for r in (0, 1)] == [sha256(SECRET)] * 2, log


def test_secret_value_is_printed_nowhere(inputs_ok):
    """Not in ansible-playbook -vvv output (which shows the planned spec,
    with the reference), not in any log, not in the spec the job user can
    read; the values file on the node is not readable by the job user."""
    _unused, output, ranks, _unused, logs, log = inputs_ok
    assert "<fmn-default-node-1> EXEC" in output  # -vvv detail, as asked
    assert "secret://user/fmn-token" in output  # the spec as returned by rank_plan
    assert SECRET_ID not in output
    assert sha256(SECRET) in log  # the job did see it
    for path in logs.rglob("*"):
        if path.is_file():
            assert SECRET_ID not in path.read_text(errors="replace"), path
    assert [ranks[r]["spec_has_value"] for r in (0, 1)] == ["0", "0"]
    assert [ranks[r]["secrets_file"] for r in (0, 1)] == ["unreadable", "unreadable"]


def test_secret_value_is_left_on_no_node(inputs_ok):
    for node in ALL_NODES:
        found = node.run("grep -rlF -e %s %s %s /tmp /etc" % (
            shlex.quote(SECRET_ID), node_runtime.registry.STATE_DIR, node_runtime.registry.LOG_DIR))
        assert found.rc == 1, found.stdout


def test_job_files_are_on_every_rank_byte_exact_owned_by_the_job_user(inputs_ok):
    _unused, _unused, ranks, _unused, _unused, log = inputs_ok
    for r in (0, 1):
        # data=: the exact bytes; file=/dir=: mode and owner of the file and
        # of the directory created for it.
        assert (ranks[r]["data"], ranks[r]["file"], ranks[r]["dir"]) == (
            sha256(DATA), "644 fuzz", "755 fuzz"), log
        assert ranks[r]["kept"] == sha256(DATA), log  # the job user's own file: overwritten


def test_job_files_created_are_removed_after_the_job_existing_own_file_kept(inputs_ok, host):
    assert not host.file("/tmp/fmn-inputs").exists  # files and the directories made for them
    kept = host.file("/tmp/fmn-inputs-kept/kept.txt")
    assert (kept.content, kept.user) == (DATA.encode("utf-8"), "fuzz")


def test_cwd_is_honoured_on_head_and_worker(inputs_ok):
    _unused, _unused, ranks, _unused, _unused, log = inputs_ok
    assert [ranks[r]["pwd"] for r in (0, 1)] == [CWD, CWD], log


# -- a secret that is not defined ---------------------------------------------

@pytest.fixture(scope="module")
def missing_secret(tmp_path_factory, vault_args):
    on_every_node("rm -rf /tmp/fmn-inputs-never")
    return run_job("inputs-missing-secret.yml", tmp_path_factory.mktemp("logs"), args=vault_args)


def test_missing_secret_is_refused_naming_job_key_and_reference(missing_secret):
    rc, output, _unused = missing_secret
    assert rc != 0, output
    assert ("jobs.inputs-missing-secret.env.FMN_MISSING: secret://user/fmn-missing is not "
            "defined in fuzz_multinode_secrets") in flat(output)
    assert "env.FMN_TOKEN" not in output  # that one is defined
    assert SECRET_ID not in output


def test_missing_secret_is_refused_before_the_job_reaches_a_node(missing_secret, host):
    rc, output, _unused = missing_secret
    assert "Register the job on its nodes" not in output
    held = node_runtime.show_on(host, "inputs-missing-secret")
    assert not held["registered"] and not held["log_dir"], held
    assert not host.file("/tmp/fmn-inputs-never").exists


# -- paths the job user may not write, a cwd that does not exist ----------------

@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    on_every_node("rm -rf /tmp/fmn-inputs-partial /etc/fmn-inputs-denied.conf && "
                  "printf \"root's own\" > /tmp/fmn-inputs-rootfile && "
                  "chown root:root /tmp/fmn-inputs-rootfile && chmod 666 /tmp/fmn-inputs-rootfile")
    logs = tmp_path_factory.mktemp("logs")
    rc, output, _unused = run_job("inputs-refused.yml", logs)
    return rc, output, logs


def refusal(rank):
    return ("job inputs-refused cannot start on node %s (rank %d, inputs-refused-%d) as user fuzz: "
            % (NODES[rank], rank, rank))


def test_unwritable_paths_fail_the_job_naming_path_and_reason(refused):
    """/etc is not the job user's to write; root's file is never overwritten,
    though its mode would let the job user write it."""
    rc, output, _unused = refused
    assert rc != 0, output
    for rank in (0, 1):
        assert (refusal(rank)
                + "jobs.inputs-refused.files./etc/fmn-inputs-denied.conf: cannot write it: "
                  "Permission denied; "
                  "jobs.inputs-refused.files./tmp/fmn-inputs-rootfile: exists and belongs to root, "
                  "not to the job user, so it is never overwritten; ") in flat(output), output


def failure_message(output):
    """The message the play fails with (its last task), as Ansible prints it
    on the [ERROR] line (the result block that follows repeats it)."""
    found = re.findall(r"^\[ERROR\]: Task failed: Action failed: (.*(?:\n(?!\S).*)*)", output, re.M)
    return flat(found[-1]) if found else ""


def test_missing_cwd_fails_the_job_naming_cwd_node_and_rank(refused):
    rc, output, _unused = refused
    for rank in (0, 1):
        # Each node's refusal is in the job's failure exactly once.
        assert failure_message(output).count(refusal(rank)) == 1, output
        assert ("it is never overwritten; jobs.inputs-refused.cwd: /srv/fmn-inputs-no-such-dir: "
                "no such directory") in flat(output), output


def test_refused_job_never_starts_and_leaves_the_node_as_it_was(refused, host):
    _unused, _unused, logs = refused
    assert not (logs / "inputs-refused.log").exists()  # rank 0 never ran: no job log
    assert not host.file("/etc/fmn-inputs-denied.conf").exists
    assert host.file("/tmp/fmn-inputs-rootfile").content_string == "root's own"
    # The good file was written before the others were refused; cleanup
    # removed it with the directory made for it.
    assert not host.file("/tmp/fmn-inputs-partial").exists
    assert not node_runtime.show_on(host, "inputs-refused")["registered"]
