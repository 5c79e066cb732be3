"""The command line of a job's own ansible-playbook, taken from the running
one's (plugins/plugin_utils/child_playbook.py), with ansible-playbook's real
option table: the user's options pass as given, the playbooks and the
options that choose or list what runs do not, and what only a terminal can
answer is refused."""

import sys

import pytest

from ansible_collections.fuzz.multinode.plugins.plugin_utils.child_playbook import (
    NotPassable,
    child_command,
    option_table,
    passed_options,
    prompt_reason,
)

TABLE = option_table()


@pytest.mark.parametrize("argv, kept", [
    (["run-job.yml", "-i", "hosts", "-e", "fuzzfile=f.yml"], ["-i", "hosts", "-e", "fuzzfile=f.yml"]),
    # Options before and after the playbook, values attached or with =.
    (["-ihosts", "run-job.yml", "--extra-vars=@secrets.yml", "-e", "job=x"],
     ["-i", "hosts", "--extra-vars=@secrets.yml", "-e", "job=x"]),
    # Flags clustered, verbosity, become, a value that looks like a playbook.
    (["-vvv", "-b", "--become-user", "run-job.yml", "run-job.yml"], ["-v", "-v", "-v", "-b", "--become-user",
                                                                     "run-job.yml"]),
    # An unambiguous prefix of a long option, as argparse accepts it.
    (["--inv", "hosts", "a.yml", "--vault-pass-file", "pw"], ["--inv", "hosts", "--vault-pass-file", "pw"]),
    # What chooses or lists the tasks of the running playbook does not pass.
    (["a.yml", "-t", "x", "--skip-tags=y", "--start-at-task", "Run the jobs", "--step", "--flush-cache",
      "-l", "node-1,node-2"], ["-l", "node-1,node-2"]),
    # Everything after -- is a playbook.
    (["-i", "h", "--", "-weird-name.yml"], ["-i", "h"]),
])
def test_the_running_playbooks_options_pass_without_its_playbooks(argv, kept):
    assert passed_options(argv, TABLE) == kept


def test_an_option_ansible_playbook_has_not_is_refused():
    with pytest.raises(NotPassable) as caught:
        passed_options(["a.yml", "--no-such-option"], TABLE)
    assert str(caught.value) == "its option --no-such-option is not one of ansible-playbook's"
    with pytest.raises(NotPassable) as caught:
        passed_options(["a.yml", "-i"], TABLE)
    assert str(caught.value) == "its option -i has no value"


@pytest.mark.parametrize("cliargs, vault_identities, reason", [
    ({"ask_pass": True}, (), "-k/--ask-pass asks the terminal for a password"),
    ({"become_ask_pass": True}, (), "-K/--ask-become-pass asks the terminal for a password"),
    ({"ask_vault_pass": True}, (), "--ask-vault-pass asks the terminal for a password"),
    ({"vault_ids": ["dev@prompt"]}, (), "--vault-id dev@prompt asks the terminal for a password"),
    ({}, ("prod@prompt",), "--vault-id prod@prompt asks the terminal for a password"),
    ({"vault_ids": ["dev@~/.vault-pass"], "ask_pass": False}, (), None),
])
def test_a_password_asked_at_the_terminal_cannot_reach_another_playbook(cliargs, vault_identities, reason):
    assert prompt_reason(cliargs, vault_identities) == reason


def test_the_command_runs_ansible_playbook_with_the_options_and_the_extra_vars_last():
    command = child_command("/c/job.yml", "/tmp/w/job.json", argv=["run-job.yml", "-i", "h", "-e", "x=1"],
                            cliargs={"args": ("run-job.yml",)}, table=TABLE)
    assert command == [sys.executable, "-m", "ansible.cli.playbook", "-i", "h", "-e", "x=1",
                       "-e", "@/tmp/w/job.json", "/c/job.yml"]
    with pytest.raises(NotPassable) as caught:
        child_command("/c/job.yml", "x", argv=["run-job.yml", "-K"], cliargs={"args": ("run-job.yml",),
                                                                              "become_ask_pass": True}, table=TABLE)
    assert str(caught.value) == "-K/--ask-become-pass asks the terminal for a password"
    with pytest.raises(NotPassable):
        child_command("/c/job.yml", "x", argv=[], cliargs={}, table=TABLE)  # not from ansible-playbook
