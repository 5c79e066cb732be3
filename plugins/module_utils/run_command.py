# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A run's command line as its record keeps it (module_utils/run_record.py):
the extra variables whose names say they are secrets have their values
left out. Pure logic."""

from __future__ import annotations

import json
import re
import shlex
from typing import List

# Extra variables whose values are secrets: never recorded.
SECRET_VARIABLE = re.compile(r"secret|passw|token|credential|private|(^|_)key$", re.IGNORECASE)


def recorded_command(argv: List[str]) -> List[str]:
    """The command line as recorded: every extra variable whose name says it
    is a secret (fuzz_multinode_secrets, *password*, *token*, ...) has its
    value replaced by `(not recorded)`; extra variables given inline in a
    form not parsed here (YAML) are not recorded at all. `@file` references
    are kept (the file is not read)."""
    kept: List[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        value = None
        if word in ("-e", "--extra-vars") and index < len(argv):
            value, index = argv[index], index + 1
            option = word
        elif word.startswith("--extra-vars="):
            option, value = "--extra-vars", word.split("=", 1)[1]
        elif word.startswith("-e") and not word.startswith("--") and len(word) > 2:
            option, value = "-e", word[2:]
        if value is None:
            kept.append(word)
            continue
        kept += [option, _recorded_extra_vars(value)]
    return kept


def _recorded_extra_vars(value: str) -> str:
    if value.startswith("@"):
        return value
    stripped = value.strip()
    if stripped.startswith(("{", "[")):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return "(inline variables not recorded)"
        if isinstance(parsed, dict):
            return json.dumps({key: "(not recorded)" if SECRET_VARIABLE.search(str(key)) else item
                               for key, item in parsed.items()}, sort_keys=True)
        return "(inline variables not recorded)"
    try:
        words = shlex.split(value)
    except ValueError:
        return "(inline variables not recorded)"
    recorded: List[str] = []
    secret = False  # the words of a secret's value (it may have spaces)
    for word in words:
        pair = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", word)
        if pair:
            secret = bool(SECRET_VARIABLE.search(pair.group(1)))
            recorded.append("%s=(not recorded)" % pair.group(1) if secret else shlex.quote(word))
        elif not secret:
            recorded.append(shlex.quote(word))
    return " ".join(recorded)
