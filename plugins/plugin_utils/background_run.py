# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A detached run (run-job.yml -e fuzz_multinode_detach=true): the same
playbook, with the same options, run again in the background by
ansible-runner (`ansible-runner run`, its private data directory the run
record's `runner/`: status, rc, stdout, job events), in a session of its
own (setsid) with no terminal, so that neither the end of the submitting
terminal (SIGHUP of its session and process group) nor the end of the
submitting playbook stops it.

Why `ansible-runner run` in a session of our own rather than `ansible-runner
start`: `start` daemonizes with umask 0 (the run's files would be created
readable by anyone), and its `stop` kills the playbook's process group with
SIGKILL (nothing would cancel the jobs on the nodes); `cancel` sends the
playbook SIGINT instead, as a terminal's Ctrl-C (run_record.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from ansible_collections.fuzz.multinode.plugins.plugin_utils.child_playbook import (
    NotPassable,
    option_table,
    passed_options,
    prompt_reason,
)

# Seconds the submission watches the runner start: one that cannot (a bad
# option, a missing program) ends well within them.
STARTUP_CHECK = 1.0


def runner_command(private_dir, cwd, playbooks, options, extra_vars):
    """argv of `ansible-runner run` for the playbook run again in `cwd`
    with `options` (the submitting one's) and `extra_vars` given last."""
    words = list(options)
    for name, value in extra_vars.items():
        words += ["-e", "%s=%s" % (name, value)]
    words += list(playbooks[1:])  # ansible-runner gives -p the last place
    return [sys.executable, "-m", "ansible_runner", "run", private_dir, "--project-dir", cwd,
            "-p", playbooks[0], "--cmdline=" + shlex.join(words),  # = : it starts with a dash
            "--omit-env-files", "--omit-event-data", "--rotate-artifacts", "3"]


def start(private_dir, extra_vars, cliargs, argv, host_key_checking):
    """Start the run in the background; the runner's pid. Raises
    NotPassable when the playbook cannot run without its terminal, or
    OSError."""
    reason = prompt_reason(cliargs)
    if reason:
        raise NotPassable(reason)
    playbooks = list(cliargs.get("args") or [])
    if not playbooks:
        raise NotPassable("the running process is no ansible-playbook (it has no playbook)")
    try:
        import ansible_runner  # noqa: F401  (only whether it is there)
    except ImportError:
        raise NotPassable("ansible-runner is not installed for %s (pip install ansible-runner)"
                          % sys.executable) from None
    cwd = os.getcwd()
    command = runner_command(private_dir, cwd, playbooks, passed_options(argv, option_table()), extra_vars)
    env = dict(os.environ)
    # ansible-runner turns host key checking off unless told; keep the
    # submitting playbook's (the collection's ansible.cfg turns it on).
    env["ANSIBLE_HOST_KEY_CHECKING"] = "True" if host_key_checking else "False"
    env["PWD"] = cwd
    # ansible-runner runs the ansible-playbook it finds first: this one's.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH") or os.defpath])
    os.makedirs(private_dir, 0o700, exist_ok=True)
    with open(os.path.join(private_dir, "daemon.log"), "ab") as log:
        os.chmod(log.name, 0o600)
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    try:  # a runner that cannot start says so at once
        status = process.wait(STARTUP_CHECK)
    except subprocess.TimeoutExpired:
        return process.pid
    with open(log.name, errors="replace") as handle:
        said = handle.read().strip().splitlines()[-3:]
    raise OSError("ansible-runner ended at once (status %s): %s" % (status, " ".join(said) or "(no output)"))
