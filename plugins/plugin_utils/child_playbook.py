# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The command line of an ansible-playbook that the running one starts (the
workflow runner's, one per job): the same inventory, connection, become,
vault and extra-vars options as the user gave the running one, another
playbook. Taken from the running process's own command line (sys.argv, by
the option table of ansible-playbook's parser), without its playbooks and
without the options that choose what of a playbook runs or only list it."""

from __future__ import annotations

import sys

# Options of the running playbook that do not apply to another one.
NOT_PASSED = ("tags", "skip_tags", "start_at_task", "step", "listhosts", "listtasks", "listtags", "syntax",
              "flush_cache", "help", "version")
# What only a terminal can answer: a second ansible-playbook cannot ask
# again (it has no terminal), nor be told the answer without writing it
# somewhere.
PROMPTS = (("ask_pass", "-k/--ask-pass"), ("become_ask_pass", "-K/--ask-become-pass"),
           ("ask_vault_pass", "--ask-vault-pass"))


class NotPassable(Exception):
    """The running ansible-playbook's options cannot be given to another
    one; the message says why."""


def option_table():
    """{option string: (dest, whether it takes a value)} of ansible-playbook."""
    from ansible.cli.playbook import PlaybookCLI

    cli = PlaybookCLI(["ansible-playbook"])
    cli.init_parser()
    table = {}
    for action in cli.parser._actions:  # argparse has no public list of them
        for option in action.option_strings:
            table[option] = (action.dest, action.nargs != 0)
    return table


def _lookup(table, option):
    """The option an argument names: exactly, else as an unambiguous prefix
    of a long option (argparse accepts those)."""
    if option in table:
        return option
    if option.startswith("--"):
        found = [known for known in table if known.startswith("--") and known.startswith(option)]
        if len({table[known] for known in found}) == 1:
            return found[0]
    raise NotPassable("its option %s is not one of ansible-playbook's" % option)


def passed_options(argv, table):
    """The arguments of `argv` (without its program) that another
    ansible-playbook gets: each option in its own form, without the
    positional arguments (the playbooks) and the options in NOT_PASSED."""
    kept, index = [], 0
    while index < len(argv):
        argument = argv[index]
        index += 1
        if argument == "--":
            break  # the rest is positional
        if not argument.startswith("-") or argument == "-":
            continue  # a playbook
        if argument.startswith("--"):
            name, equals, value = argument.partition("=")
            dest, takes_value = table[_lookup(table, name)]
            words = [argument]
            if takes_value and not equals:
                if index >= len(argv):
                    raise NotPassable("its option %s has no value" % name)
                words.append(argv[index])
                index += 1
            if dest not in NOT_PASSED:
                kept += words
            continue
        # Short options, possibly several in one argument (-vvv, -bK), the
        # last one maybe with its value attached (-ihosts) or next.
        position = 1
        while position < len(argument):
            option = "-" + argument[position]
            dest, takes_value = table[_lookup(table, option)]
            position += 1
            words = [option]
            if takes_value:
                if position < len(argument):
                    words.append(argument[position:])
                elif index < len(argv):
                    words.append(argv[index])
                    index += 1
                else:
                    raise NotPassable("its option %s has no value" % option)
                position = len(argument)
            if dest not in NOT_PASSED:
                kept += words
    return kept


def prompt_reason(cliargs, vault_identities=()):
    """Why the running ansible-playbook's answers cannot reach another one
    (it asked the terminal for a password), or None."""
    for dest, option in PROMPTS:
        if cliargs.get(dest):
            return "%s asks the terminal for a password" % option
    for identity in list(cliargs.get("vault_ids") or []) + list(vault_identities or []):
        if str(identity).split("@", 1)[-1] == "prompt":
            return "--vault-id %s asks the terminal for a password" % identity
    return None


def child_command(playbook, extra_vars_file, argv=None, cliargs=None, table=None, vault_identities=()):
    """argv of an ansible-playbook of `playbook` with the running one's
    options and `-e @extra_vars_file` (given last, so its variables win).
    Raises NotPassable."""
    if cliargs is None:
        from ansible import context

        cliargs = context.CLIARGS
    if not cliargs.get("args"):
        raise NotPassable("the running process is no ansible-playbook (it has no playbook)")
    reason = prompt_reason(cliargs, vault_identities)
    if reason:
        raise NotPassable(reason)
    options = passed_options(list(sys.argv[1:] if argv is None else argv), table or option_table())
    return [sys.executable, "-m", "ansible.cli.playbook"] + options + ["-e", "@" + extra_vars_file, playbook]
