"""Running run-job.yml from a scenario's verifier exactly as a user does:
the repository's ansible.cfg and the checkout as the collection, against the
scenario's inventory. Every scenario's tests use this one definition."""

import os
import subprocess
import sys
import time

PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]


def playbook(fuzzfile, logs, job=None, extra_vars=None, args=()):
    """argv and environment of `ansible-playbook run-job.yml` for a Fuzzfile;
    extra_vars (a dict) are passed as `-e NAME=VALUE` each, args (more
    ansible-playbook arguments, e.g. --vault-password-file FILE) as given."""
    # The conformance suite against another implementation: a playbook with
    # run-job.yml's arguments and log layout (README, "Conformance suite").
    runner = os.path.abspath(os.environ.get("FUZZ_MULTINODE_PLAYBOOK") or os.path.join(PROJECT, "run-job.yml"))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), runner,
            "-i", INVENTORY, "-e", "fuzzfile=%s" % fuzzfile, "-e", "log_dir=%s" % logs]
    if job:
        argv += ["-e", "job=" + job]
    # The conformance suite against another implementation of the helper.
    if os.environ.get("FUZZ_MULTINODE_HELPER"):
        argv += ["-e", "fuzz_multinode_helper_source=" + os.path.abspath(os.environ["FUZZ_MULTINODE_HELPER"])]
    for name, value in (extra_vars or {}).items():
        argv += ["-e", "%s=%s" % (name, value)]
    argv += list(args)
    env = dict(os.environ)
    # Molecule's own config and forced colours are not what a user has (whose
    # captured output, like ours, is uncoloured).
    env.pop("ANSIBLE_CONFIG", None)
    env.pop("ANSIBLE_FORCE_COLOR", None)
    env.pop("PY_COLORS", None)
    env["ANSIBLE_COLLECTIONS_PATH"] = PROJECT
    return argv, env


def run_job(fuzzfile, logs, job=None, extra_vars=None, args=()):
    """Run the playbook to the end; returns (exit status, output, seconds)."""
    argv, env = playbook(fuzzfile, logs, job, extra_vars, args)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout, time.monotonic() - started
