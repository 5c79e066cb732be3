"""Running run-job.yml from a scenario's verifier exactly as a user does:
the repository's ansible.cfg and the checkout as the collection, against the
scenario's inventory. Every scenario's tests use this one definition; the
result of one job's run (JobRun) and the run with a timeout are shared too,
the latter also with tests/local."""

import os
import signal
import subprocess
import sys
import time


# Molecule's environment is read when a playbook is built, not on import:
# tests/local imports this module (run_with_timeout) and has none.
def _project():
    return os.environ["MOLECULE_PROJECT_DIRECTORY"]


def playbook(fuzzfile, logs, job=None, extra_vars=None, args=()):
    """argv and environment of `ansible-playbook run-job.yml` for a Fuzzfile;
    extra_vars (a dict) are passed as `-e NAME=VALUE` each, args (more
    ansible-playbook arguments, e.g. --vault-password-file FILE) as given."""
    # The conformance suite against another implementation: a playbook with
    # run-job.yml's arguments and log layout (docs/docsite/rst/guide_conformance.rst).
    runner = os.path.abspath(os.environ.get("FUZZ_MULTINODE_PLAYBOOK") or os.path.join(_project(), "run-job.yml"))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), runner,
            "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-e", "fuzzfile=%s" % fuzzfile, "-e", "log_dir=%s" % logs]
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
    env["ANSIBLE_COLLECTIONS_PATH"] = _project()
    return argv, env


def run_job(fuzzfile, logs, job=None, extra_vars=None, args=()):
    """Run the playbook to the end; returns (exit status, output, seconds)."""
    argv, env = playbook(fuzzfile, logs, job, extra_vars, args)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=_project(), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    return proc.returncode, proc.stdout, time.monotonic() - started


def failure_message(output):
    """What the play reports as the job's failure (its last task), not the
    job log it shows before."""
    marker = "TASK [fuzz.multinode.workflow : Report the workflow's result]"
    return output[output.rfind(marker):] if marker in output else ""


class JobRun:
    """One finished run of run-job.yml for one job: exit status, output,
    duration, the logs it fetched, and `leftovers`, what the scenario found
    on its nodes the moment the playbook returned (the caller looks, as each
    scenario counts leftovers its own way)."""

    def __init__(self, job, logs, rc, output, seconds, leftovers):
        self.job, self.logs, self.rc, self.output, self.seconds = job, logs, rc, output, seconds
        self.leftovers = leftovers

    def log(self):
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    def lines(self):
        return self.log().splitlines()

    def rank_log(self, rank):
        path = self.logs / self.job / ("rank-%d.log" % rank)
        return path.read_text() if path.exists() else ""

    def failure_message(self):
        return failure_message(self.output)

    def __repr__(self):  # shown by pytest when an assertion fails
        return "JobRun(%s, rc=%s, %.1f s)\n--- output ---\n%s\n--- job log ---\n%s" % (
            self.job, self.rc, self.seconds, self.output[-6000:], self.log())


def run_with_timeout(argv, env, cwd, timeout, grace):
    """Run a playbook to its end like run_job, (exit status, output,
    seconds), but one that hangs (an MPI run that never ends) fails its
    tests instead of hanging the whole tier: after `timeout` seconds its
    process group gets SIGINT, the Ctrl-C a user would give, which cancels
    the job on every node; if it has not ended `grace` seconds later, SIGKILL."""
    started = time.monotonic()
    # Its own session, as a shell runs a foreground command: the SIGINT goes
    # to ansible-playbook and its workers only, never to pytest.
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _unused = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _unused = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _unused = proc.communicate()
        output = "(interrupted after %d s)\n%s" % (timeout, output)
    return proc.returncode, output, time.monotonic() - started
