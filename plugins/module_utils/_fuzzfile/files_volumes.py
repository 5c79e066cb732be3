# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The workflow's top-level ``files`` (name -> contents), a job's or
service's ``files`` (a ``file://`` reference to one of them, or the file's
contents in place), and the top-level ``volumes`` with their ingress and
egress transfers (``transfers``). A v1
volume's ``name`` is its key (the vendor's client sets it so): another name
is ignored with a warning; a v4 volume's ``name`` names a persistent volume.

Each volume has a store, where the nodes keep its files: ``ephemeral`` (one
per run of the workflow), or ``persistent/NAME``, ``user/persistent`` (the
job user's default persistent volume) or ``account/persistent`` (the
account's), which live across runs.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    FILE_PREFIX,
    NOTE,
    VOLUME_KEYS,
    VOLUME_PREFIX,
    VOLUME_V4_KEYS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Volume
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.quantities import (
    parse_memory_size,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.settings import _Context
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.transfers import parse_transfers
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _check_keys_versioned,
    _join,
    _mapping,
    _names,
    _show,
    _string,
    _string_map,
)


def _parse_files(value: Any) -> Dict[str, str]:
    data = _mapping(value, "files")
    files: Dict[str, str] = {}
    for name, contents in data.items():
        if not isinstance(name, str) or not name:
            raise FuzzfileError("files: names must be non-empty strings, got %s" % _show(name))
        item_path = _join("files", name)
        if not isinstance(contents, str):
            raise FuzzfileError(
                "%s: must be the file's contents as a string, got %s"
                % (item_path, _show(contents))
            )
        files[name] = contents
    return files


def _file_reference(value: Any, path: str, ctx: _Context) -> str:
    """``file://<name>`` naming an entry of the top-level files; the name."""
    text = _string(value, path, nonempty=True)
    if not text.startswith(FILE_PREFIX):
        raise FuzzfileError(
            "%s: must be a file://<name> reference to an entry of the top-level files, got %s"
            % (path, _show(text))
        )
    name = text[len(FILE_PREFIX):]
    if name not in ctx.files:
        raise FuzzfileError(
            "%s: %s names no entry of the top-level files (%s)"
            % (path, _show(text), _names(ctx.files, "the workflow has none"))
        )
    return name


def _file_source(value: Any, path: str, ctx: _Context) -> Tuple[str, bool]:
    """A job's or service's ``files`` value: ``(name, True)`` for
    ``file://<name>`` of a top-level entry, else ``(contents, False)``: the
    file's contents given in place (a YAML block scalar in the vendor's own
    files), written as they are. A bare name of a top-level entry is refused:
    it is a reference without its ``file://``, not likely meant as contents."""
    text = _string(value, path, nonempty=True)
    if text.startswith(FILE_PREFIX):
        return _file_reference(text, path, ctx), True
    if text in ctx.files:
        raise FuzzfileError(
            "%s: %s names an entry of the top-level files; write %s%s to use it (any other "
            "string is the file's contents)" % (path, _show(text), FILE_PREFIX, text)
        )
    return text, False


EPHEMERAL = "volume://user/ephemeral"
PERSISTENT = "volume://user/persistent/"
# The references of v1 that name no volume (spec fuzzfile-reference.md, section
# 8): the user's and the account's default persistent volume, each a store of
# its own, and an ephemeral volume given a name, which is the run's like any
# other ephemeral volume (its directory is named by the volume's key).
USER_PERSISTENT = "volume://user/persistent"
ACCOUNT_PERSISTENT = "volume://account/persistent"
NAMED_EPHEMERAL = "volume://user/ephemeral/"
DEFAULT_STORES = {USER_PERSISTENT: "user/persistent", ACCOUNT_PERSISTENT: "account/persistent"}
ACCEPTED_REFERENCES = "%s, %sNAME, %s, %sNAME or %s" % (
    EPHEMERAL, NAMED_EPHEMERAL, USER_PERSISTENT, PERSISTENT, ACCOUNT_PERSISTENT)
# A persistent volume's name is a directory's name on every node.
PERSISTENT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def is_store(store: str) -> bool:
    """Whether ``store`` is one ``volume_store`` gives: ``ephemeral``,
    ``user/persistent``, ``account/persistent`` or ``persistent/NAME``."""
    kind, _unused, name = store.partition("/")
    return (store == "ephemeral" or store in DEFAULT_STORES.values()
            or (kind == "persistent" and bool(PERSISTENT_NAME_RE.match(name))))


def _checked_name(name: str, path: str, what: str) -> str:
    if not PERSISTENT_NAME_RE.match(name):
        raise FuzzfileError(
            "%s: the %s volume's name must be letters, digits and ._- (starting with a "
            "letter or digit, at most 128), got %s" % (path, what, _show(name))
        )
    return name


def volume_store(reference: Optional[str], use: Optional[str], name: Optional[str],
                 key: str, path: str, notes: Optional[List[str]] = None) -> str:
    """Where a volume's files live: ``ephemeral``, ``user/persistent``,
    ``account/persistent`` or ``persistent/NAME``, from its ``reference``
    (v1, or v4's ``use`` given as a reference), or v4's storage class
    ``use`` and ``name``: ``use: ephemeral`` (or neither set) is ephemeral;
    any other volume is persistent, named by ``name`` or else its key. The
    name of a ``volume://user/ephemeral/NAME`` is checked and noted in
    ``notes``: the run's ephemeral volume is named by its key."""
    if reference is None and use is not None and use.startswith(VOLUME_PREFIX):
        reference, path = use, _join(path, "use")
    elif reference is not None:
        path = _join(path, "reference")
    if reference is None:
        if use == "ephemeral" or (use is None and name is None):
            return "ephemeral"
        persistent, name_path = name or key, _join(path, "name") if name else path
    elif reference == EPHEMERAL:
        return "ephemeral"
    elif reference in DEFAULT_STORES:
        return DEFAULT_STORES[reference]
    elif reference.startswith(NAMED_EPHEMERAL) and reference != NAMED_EPHEMERAL:
        ephemeral = _checked_name(reference[len(NAMED_EPHEMERAL):], path, "ephemeral")
        if notes is not None:
            notes.append("%s: %s" % (path, NOTE["ephemeral_name"] % (_show(ephemeral), _show(key))))
        return "ephemeral"
    elif reference.startswith(PERSISTENT) and reference != PERSISTENT:
        persistent, name_path = reference[len(PERSISTENT):], path
    else:
        raise FuzzfileError(
            "%s: %s is not a volume this collection keeps (%s)" % (path, _show(reference), ACCEPTED_REFERENCES)
        )
    return "persistent/" + _checked_name(persistent, name_path, "persistent")


def _parse_volumes(value: Any, ctx: _Context, notes: List[str]) -> Dict[str, Volume]:
    """The volumes by name, each with its store (``volume_store``) and its
    transfers."""
    data = _mapping(value, "volumes")
    volumes: Dict[str, Volume] = {}
    for name, raw in data.items():
        if not isinstance(name, str) or not name:
            raise FuzzfileError("volumes: names must be non-empty strings, got %s" % _show(name))
        path = _join("volumes", name)
        volume = _mapping(raw, path)
        _check_keys_versioned(volume, path, VOLUME_KEYS, VOLUME_V4_KEYS, ctx.version)
        reference = volume.get("reference")
        if reference is not None:
            text = _string(reference, _join(path, "reference"), nonempty=True)
            if not text.startswith(VOLUME_PREFIX):
                raise FuzzfileError(
                    "%s: must be a volume:// reference such as volume://user/ephemeral, got %s"
                    % (_join(path, "reference"), _show(text))
                )
        elif ctx.version == "v1":
            raise FuzzfileError(
                "%s: required (%s)" % (_join(path, "reference"), ACCEPTED_REFERENCES)
            )
        for key in ("use", "name"):
            if volume.get(key) is not None:
                _string(volume[key], _join(path, key), nonempty=True)
        if ctx.version == "v1" and volume.get("name") not in (None, name):
            ctx.warnings.append(
                "%s: %s ignored: a v1 volume is named by its key, %s, which mounts name"
                % (_join(path, "name"), _show(volume["name"]), _show(name))
            )
        if volume.get("size") is not None:
            parse_memory_size(volume["size"], _join(path, "size"))
        if volume.get("annotations") is not None:
            _string_map(volume["annotations"], _join(path, "annotations"))
        use = volume.get("use")
        if use is not None and use not in ("ephemeral", "persistent") and not use.startswith(VOLUME_PREFIX):
            notes.append("%s: %s" % (_join(path, "use"), NOTE["storage_class"]))
        transfers = parse_transfers(volume, path, ctx.files, ctx.warnings)
        store = volume_store(
            reference,
            volume.get("use"),
            volume.get("name") if ctx.version != "v1" else None,
            name,
            path,
            notes,
        )
        volumes[name] = Volume(store, transfers["ingress"], transfers["egress"])
    return volumes
