# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Argument expansion: ``$NAME`` and ``${NAME}`` are replaced with the value
from rank 0's environment (the one the job spec gives it, not the node's
own), once, with no other shell processing (``expand``). In command mode
``argv`` is ``command + args`` expanded; in script mode the script text is
left alone (its shell expands) and ``argv`` holds the expanded ``args``,
passed to the script as ``$1 ...``.

An argument that expands a secret key (an env value ``secret://NAME``)
keeps the reference in ``argv`` and is listed in the spec's ``secret_args``
as ``{index, parts}``, its parts ``[kind, value]`` (``text`` and its
expanded text, or ``secret`` and the NAME), from which the node runtime
builds the argument with the value (``secret_argument_parts``; the run
policy warns of it, or refuses it with fuzz_multinode_secret_arguments:
refuse). No value is known here.

Pure Python (standard library only); it does not import Ansible.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Sequence

__all__ = ["expand", "expansion_env", "secret_argument_parts"]

_EXPAND_RE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Expand ``$NAME`` and ``${NAME}`` from ``env``, in a single pass.

    Unknown names expand to the empty string. A ``$`` not followed by a name
    or a braced name stays literal (``$(ls)``, ``$1``, ``${}``, a trailing
    ``$``). No word splitting, globbing or command substitution; expanded
    values are not expanded again.
    """
    return _EXPAND_RE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


def secret_argument_parts(
    words: Sequence[str], env: Mapping[str, str], secrets: Mapping[str, str]
) -> List[Dict[str, Any]]:
    """``[{index, parts}]`` of the words that expand a key of ``secrets``
    (``{env key: secret NAME}``): each word as ``[kind, value]`` parts,
    ``["text", expanded text]`` (from ``env``, as ``expand`` does) and
    ``["secret", NAME]``, adjacent text joined. No value is known here."""
    found: List[Dict[str, Any]] = []
    for index, word in enumerate(words):
        if not any((m.group(1) or m.group(2)) in secrets for m in _EXPAND_RE.finditer(word)):
            continue
        pieces: List[List[str]] = []
        at = 0
        for match in _EXPAND_RE.finditer(word):
            name = match.group(1) or match.group(2)
            pieces.append(["text", word[at:match.start()]])
            pieces.append(["secret", secrets[name]] if name in secrets else ["text", env.get(name, "")])
            at = match.end()
        pieces.append(["text", word[at:]])
        parts: List[List[str]] = []
        for kind, value in pieces:
            if kind == "text" and parts and parts[-1][0] == "text":
                parts[-1][1] += value
            elif kind == "secret" or value:
                parts.append([kind, value])
        found.append({"index": index, "parts": parts})
    return found


def expansion_env(env: Mapping[str, str], run: str) -> Mapping[str, str]:
    """What ``command`` arguments expand from: the rank's env and, in a
    run, ``FB_WORKFLOW_ID`` (the runtime sets it in every process, over a
    value of the job's own)."""
    return dict(env, FB_WORKFLOW_ID=run) if run else env
