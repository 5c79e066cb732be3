# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Validators of single values. Each takes the value and the path of its field
(``jobs.a.resource.cpu.cores``) and returns the value normalized, or raises
FuzzfileError with a message that starts with that path."""

from __future__ import annotations

import difflib
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    ENV_NAME_RE,
    INT_MAX,
    JOB_NAME_MAX,
    JOB_NAME_RE,
    PORT_MAX,
    SECRET_PREFIX,
)


def _show(value: Any) -> str:
    """Render a value for an error message, YAML-style."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value.bit_length() > 1000:
        return "a very large integer"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a %s" % type(value).__name__


def _join(path: str, key: Any) -> str:
    part = key if isinstance(key, str) else repr(key)
    return "%s.%s" % (path, part) if path else part


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping(value: Any, path: str, what: str = "a mapping") -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise FuzzfileError("%s: must be %s, got %s" % (path, what, _show(value)))
    return value


def _check_keys(data: Mapping[Any, Any], path: str, known: Iterable[str]) -> None:
    known = sorted(known)
    for key in data:
        if key in known:
            continue
        hint = ""
        if isinstance(key, str):
            close = difflib.get_close_matches(key, known, n=1)
            if close:
                hint = " (did you mean %r?)" % close[0]
        raise FuzzfileError(
            "%s: unknown key; expected one of %s%s" % (_join(path, key), ", ".join(known), hint)
        )


def _no_nul(value: str, path: str) -> str:
    if "\x00" in value:
        raise FuzzfileError("%s: must not contain a NUL character" % path)
    return value


def _string(value: Any, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        hint = ""
        if isinstance(value, (bool, int, float)):
            hint = " (quote it in YAML)"
        raise FuzzfileError("%s: must be a string, got %s%s" % (path, _show(value), hint))
    if nonempty and not value:
        raise FuzzfileError("%s: must not be empty" % path)
    return _no_nul(value, path)


def _secret_reference(value: Any, path: str) -> str:
    """A ``secret://NAME`` reference (``image.secret``): NAME, the key of its
    value in ``fuzz_multinode_secrets``, is not empty and has no white
    space."""
    text = _string(value, path, nonempty=True)
    name = text[len(SECRET_PREFIX):]
    if not text.startswith(SECRET_PREFIX) or not name or any(c.isspace() for c in name):
        raise FuzzfileError(
            "%s: must be a secret:// reference (secret://SCOPE/NAME, e.g. secret://user/registry), "
            "got %s" % (path, _show(text))
        )
    return text


def _string_list(value: Any, path: str, *, nonempty: bool = False) -> List[str]:
    if not isinstance(value, (list, tuple)):
        raise FuzzfileError("%s: must be a list of strings, got %s" % (path, _show(value)))
    if nonempty and not value:
        raise FuzzfileError("%s: must not be empty" % path)
    return [_string(item, "%s[%d]" % (path, index)) for index, item in enumerate(value)]


def _positive_int(value: Any, path: str, maximum: int = INT_MAX) -> int:
    if not _is_int(value) or value < 1:
        raise FuzzfileError("%s: must be an integer >= 1, got %s" % (path, _show(value)))
    if value > maximum:
        raise FuzzfileError(
            "%s: must be an integer from 1 to %d, got %s" % (path, maximum, _show(value))
        )
    return int(value)


def _choice(value: Any, path: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise FuzzfileError(
            "%s: must be one of %s, got %s" % (path, ", ".join(choices), _show(value))
        )
    return value


def _abs_path(value: Any, path: str) -> str:
    text = _string(value, path, nonempty=True)
    if not text.startswith("/"):
        raise FuzzfileError("%s: must be an absolute path, got %s" % (path, _show(text)))
    return text


def validate_job_name(name: Any, path: str = "jobs", what: str = "job") -> str:
    """Check that a job name can become host names ``<name>-<rank>`` (a
    service name, host name ``<name>.svc``; ``what`` names which)."""
    if not isinstance(name, str):
        raise FuzzfileError("%s: %s names must be strings, got %s" % (path, what, _show(name)))
    if not JOB_NAME_RE.match(name) or len(name) > JOB_NAME_MAX:
        becomes = "a host name" if what == "service" else "the ranks' host names"
        raise FuzzfileError(
            "%s: invalid %s name %r: use at most %d lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (the name becomes %s)"
            % (path, what, name, JOB_NAME_MAX, becomes)
        )
    return name


def _env_entry(value: Any, path: str) -> Tuple[str, str]:
    text = _string(value, path)
    key, sep, val = text.partition("=")
    if not sep:
        raise FuzzfileError("%s: must be KEY=VALUE, got %s" % (path, _show(text)))
    return _env_name(key, path), val


def _env_name(key: Any, path: str) -> str:
    if not isinstance(key, str) or not ENV_NAME_RE.match(key):
        raise FuzzfileError(
            "%s: %s is not a valid variable name (letters, digits and '_', not starting "
            "with a digit)" % (path, _show(key))
        )
    return key


def _dedupe_env(pairs: Iterable[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Later duplicates win; each key keeps the position of its first use."""
    merged: Dict[str, str] = {}
    for key, value in pairs:
        merged[key] = value
    return list(merged.items())


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise FuzzfileError("%s: must be a boolean, got %s" % (path, _show(value)))
    return value


def _int_at_least(value: Any, path: str, minimum: int, maximum: int = INT_MAX) -> int:
    if not _is_int(value) or value < minimum:
        raise FuzzfileError(
            "%s: must be an integer >= %d, got %s" % (path, minimum, _show(value))
        )
    if value > maximum:
        raise FuzzfileError(
            "%s: must be an integer from %d to %d, got %s" % (path, minimum, maximum, _show(value))
        )
    return int(value)


def _port(value: Any, path: str) -> int:
    if not _is_int(value) or not 1 <= value <= PORT_MAX:
        raise FuzzfileError(
            "%s: must be a port number from 1 to %d, got %s" % (path, PORT_MAX, _show(value))
        )
    return int(value)


def _list(value: Any, path: str, what: str = "a list") -> List[Any]:
    if not isinstance(value, list):
        raise FuzzfileError("%s: must be %s, got %s" % (path, what, _show(value)))
    return value


def _string_map(value: Any, path: str) -> Dict[str, str]:
    """A mapping of non-empty string keys to string values."""
    data = _mapping(value, path)
    result: Dict[str, str] = {}
    for key, item in data.items():
        if not isinstance(key, str) or not key:
            raise FuzzfileError("%s: keys must be non-empty strings, got %s" % (path, _show(key)))
        result[key] = _string(item, _join(path, key))
    return result


def _check_keys_versioned(
    data: Mapping[Any, Any],
    path: str,
    known: Sequence[str],
    v4_only: Sequence[str],
    version: str,
) -> None:
    """``_check_keys``, where the keys ``v4_only`` are errors in v1 Fuzzfiles."""
    if version == "v1":
        for key in data:
            if key in v4_only:
                raise FuzzfileError(
                    "%s: only allowed in version v4 Fuzzfiles (this one is v1)" % _join(path, key)
                )
        known = [key for key in known if key not in v4_only]
    _check_keys(data, path, known)


def _section(data: Mapping[Any, Any], key: str, path: str) -> Optional[Mapping[Any, Any]]:
    """An optional sub-mapping; null counts as absent."""
    value = data.get(key)
    if value is None:
        return None
    return _mapping(value, _join(path, key))


def _names(names: Iterable[str], none: str) -> str:
    listed = ", ".join(names)
    return listed if listed else none


def _path_map(value: Any, path: str) -> Dict[str, str]:
    """A mapping of absolute container paths to names (a JSON form's files, mounts)."""
    data = _mapping(value, path)
    result: Dict[str, str] = {}
    for key, item in data.items():
        item_path = _join(path, key)
        if not isinstance(key, str) or not key.startswith("/"):
            raise FuzzfileError(
                "%s: keys must be absolute paths, got %s" % (path, _show(key))
            )
        result[_no_nul(key, item_path)] = _string(item, item_path, nonempty=True)
    return result


# A CDI device kind, VENDOR/CLASS (nvidia.com/gpu): the Container Device
# Interface's rules for both parts (letters, digits, and inside also - _ .).
DEVICE_KIND_RE = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z"
)


def _devices(value: Any, path: str) -> Dict[str, int]:
    """``resource.devices``: a CDI device kind (``nvidia.com/gpu``, as the
    nodes' CDI specifications name it) -> how many devices each rank or
    task gets of it."""
    data = _mapping(value, path)
    result: Dict[str, int] = {}
    for key, count in data.items():
        if not isinstance(key, str) or not DEVICE_KIND_RE.match(key):
            raise FuzzfileError(
                "%s: device kinds are CDI kinds VENDOR/CLASS, such as nvidia.com/gpu, got %s"
                % (path, _show(key))
            )
        result[key] = _positive_int(count, _join(path, key))
    return result


def _ports(value: Any, path: str) -> List[int]:
    items = _list(value, path, "a list of port numbers")
    return [_port(item, "%s[%d]" % (path, index)) for index, item in enumerate(items)]


def _argument(value: Any, path: str) -> str:
    """One word of an argv (``command``, ``args``, a probe's
    ``exec.command``): a string, or a bare number taken as written in the
    Fuzzfile (``8``, ``0.5``; the loader keeps its text), as the vendor's YAML
    decoder gives a number where it takes a string. A boolean or null is
    refused: its text would depend on the YAML version (``yes``, ``~``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return getattr(value, "yaml_text", "") or str(value)
    if isinstance(value, str):
        return _no_nul(value, path)
    hint = " (quote it in YAML)" if isinstance(value, bool) else ""
    raise FuzzfileError("%s: must be a string or a number, got %s%s" % (path, _show(value), hint))


def _argument_list(value: Any, path: str, *, nonempty: bool = False) -> List[str]:
    """An argv: a list of strings (``_argument``: bare numbers as written)."""
    if not isinstance(value, (list, tuple)):
        raise FuzzfileError("%s: must be a list of strings, got %s" % (path, _show(value)))
    if nonempty and not value:
        raise FuzzfileError("%s: must not be empty" % path)
    return [_argument(item, "%s[%d]" % (path, index)) for index, item in enumerate(value)]
