# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The mergeable settings of a job, a service or a ``defaults`` section
(``env``, ``mounts``, ``resource``, ``policy``), each parsed only as far as
given, and how later settings override earlier ones: ``defaults.env``
(v4), then ``defaults.job`` (a service: ``defaults.service``), then the
job's own, per key and deeply (``cpu.cores`` can come from the defaults and
``memory.size`` from the job; ``devices`` and ``annotations`` merge per
name). The three mount forms become one, ``{location: volume}``: the v1
form ``{volume: {location: /path}}`` and the v4 form ``{/path: {volume:
name}}`` (each only in its version's Fuzzfiles), and the short form
``{/path: volume}`` that the vendor's catalog uses (in both). A later
setting overrides an earlier mount with the same key as written: a v1 mount
the same volume's, a path-keyed one the same path's; two different mounts
at one location are an error."""

from __future__ import annotations

import dataclasses
import posixpath
from functools import partial
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    AFFINITIES,
    CPU_KEYS,
    DEFAULTS_JOB_KEYS,
    DEFAULTS_KEYS,
    DEFAULTS_SERVICE_KEYS,
    DEFAULTS_V4_KEYS,
    MEMORY_KEYS,
    NOTE,
    POLICY_KEYS,
    RESOURCE_KEYS,
    RESTART_POLICIES,
    RETRY_KEYS,
    TIMEOUT_KEYS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.quantities import (
    parse_go_duration,
    parse_memory_size,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _abs_path,
    _bool,
    _check_keys,
    _check_keys_versioned,
    _choice,
    _dedupe_env,
    _devices,
    _env_entry,
    _int_at_least,
    _join,
    _mapping,
    _names,
    _no_nul,
    _positive_int,
    _section,
    _show,
    _string,
    _string_map,
)


@dataclasses.dataclass
class _Context:
    """What parsing a job needs from the rest of the document."""

    version: str
    files: Dict[str, str]
    volumes: Dict[str, str]  # name -> its store (files_volumes.volume_store)
    warnings: List[str]


# A mount's key as the Fuzzfile wrote it: ("volume", NAME) for the v1 form,
# ("path", LOCATION) for the v4 and short forms.
_MountKey = Tuple[str, str]


@dataclasses.dataclass
class _Settings:
    """The mergeable settings of a job, a service or a defaults section,
    each only as far as given: ``env`` pairs, ``mounts`` by the form's key
    (``_MountKey``) as ``(location, volume, the location's field path)``,
    ``resource`` and ``policy`` by field."""

    env: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    mounts: Dict[_MountKey, Tuple[str, str, str]] = dataclasses.field(default_factory=dict)
    resource: Dict[str, Any] = dataclasses.field(default_factory=dict)
    policy: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def merged(self, later: "_Settings") -> "_Settings":
        """These settings overridden by ``later``, per key (deeply for the
        name -> value maps ``devices`` and ``annotations``)."""
        resource = dict(self.resource)
        for key, value in later.resource.items():
            if key in ("devices", "annotations"):
                combined = dict(resource.get(key, {}))
                combined.update(value)
                resource[key] = combined
            else:
                resource[key] = value
        mounts = dict(self.mounts)
        mounts.update(later.mounts)
        policy = dict(self.policy)
        policy.update(later.policy)
        return _Settings(
            env=_dedupe_env(self.env + later.env), mounts=mounts, resource=resource, policy=policy
        )


def _parse_env(value: Any, path: str) -> List[Tuple[str, str]]:
    if not isinstance(value, list):
        raise FuzzfileError(
            "%s: must be a list of KEY=VALUE strings, got %s" % (path, _show(value))
        )
    return _dedupe_env(
        _env_entry(item, "%s[%d]" % (path, index)) for index, item in enumerate(value)
    )


def _check_volume(volume: str, path: str, ctx: _Context) -> None:
    if volume not in ctx.volumes:
        raise FuzzfileError(
            "%s: no volume named %s under volumes (%s)"
            % (path, _show(volume), _names(ctx.volumes, "the workflow declares none"))
        )


def _parse_mounts(value: Any, path: str, ctx: _Context) -> Dict[_MountKey, Tuple[str, str, str]]:
    """Mounts in any of the three forms (the module's docstring), keyed as
    the Fuzzfile keys them."""
    data = _mapping(value, path)
    mounts: Dict[_MountKey, Tuple[str, str, str]] = {}
    for key, entry in data.items():
        item_path = _join(path, key)
        if isinstance(entry, str):
            location, volume = _short_mount(key, entry, path, ctx)
            mounts[("path", location)] = (location, volume, item_path)
        elif ctx.version == "v1":
            if not isinstance(key, str) or not key:
                raise FuzzfileError(
                    "%s: keys must be volume names (v1 form: VOLUME: {location: /path}), got %s"
                    % (path, _show(key))
                )
            hint = ""
            if key.startswith("/") or (isinstance(entry, Mapping) and "volume" in entry):
                hint = " (that is the v4 form; a v1 Fuzzfile mounts VOLUME: {location: /path})"
            if not isinstance(entry, Mapping) or "location" not in entry:
                raise FuzzfileError(
                    "%s: must be a mapping with 'location', got %s%s"
                    % (item_path, _show(entry), hint)
                )
            _check_keys(entry, item_path, ("location",))
            location_path = _join(item_path, "location")
            location = _abs_path(entry["location"], location_path)
            _check_volume(key, item_path, ctx)
            mounts[("volume", key)] = (location, key, location_path)
        else:
            hint = ""
            if isinstance(entry, Mapping) and "location" in entry:
                hint = " (that is the v1 form; a v4 Fuzzfile mounts /path: {volume: VOLUME})"
            if not isinstance(key, str) or not key.startswith("/"):
                raise FuzzfileError(
                    "%s: keys must be absolute mount paths (v4 form: /path: {volume: VOLUME}), "
                    "got %s%s" % (path, _show(key), hint)
                )
            _no_nul(key, item_path)
            if not isinstance(entry, Mapping) or "volume" not in entry:
                raise FuzzfileError(
                    "%s: must be a volume name or a mapping with 'volume', got %s%s"
                    % (item_path, _show(entry), hint)
                )
            _check_keys(entry, item_path, ("volume",))
            volume_path = _join(item_path, "volume")
            volume = _string(entry["volume"], volume_path, nonempty=True)
            _check_volume(volume, volume_path, ctx)
            mounts[("path", key)] = (key, volume, item_path)
    return mounts


def _short_mount(key: Any, entry: str, path: str, ctx: _Context) -> Tuple[str, str]:
    """The short form ``/path: VOLUME``: its location and volume."""
    if not isinstance(key, str) or not key.startswith("/"):
        hint = ""
        if entry.startswith("/"):
            hint = " (the short form is /path: VOLUME: the location first)"
        raise FuzzfileError(
            "%s: keys of the short form /path: VOLUME must be absolute mount paths, got %s%s"
            % (path, _show(key), hint)
        )
    item_path = _join(path, key)
    _no_nul(key, item_path)
    volume = _string(entry, item_path, nonempty=True)
    _check_volume(volume, item_path, ctx)
    return key, volume


def _mount_points(mounts: Mapping[_MountKey, Tuple[str, str, str]]) -> Dict[str, str]:
    """Merged mounts as location -> volume; two mounts at one location are
    an error (only possible when a v1 mount is one of them)."""
    result: Dict[str, str] = {}
    for location, volume, location_path in mounts.values():
        location = _mount_location(location, location_path)
        if location in result:
            raise FuzzfileError(
                "%s: %r is already the mount point of volume %r"
                % (location_path, location, result[location])
            )
        result[location] = volume
    return result


# Where the runtime's own file systems are, in a container and on the host:
# a volume mounted there would hide them (or be hidden).
RESERVED_LOCATIONS = ("/proc", "/sys", "/dev", "/multinode")


def _mount_location(location: str, path: str) -> str:
    """A mount location, normalized (a trailing / dropped): an absolute
    path that names one directory other than / and the runtime's own."""
    parts = location.split("/")
    if ".." in parts or "." in parts:
        raise FuzzfileError("%s: must not contain . or .. components, got %r" % (path, location))
    normal = posixpath.normpath(location)
    if normal == "/" or normal.startswith("//"):
        raise FuzzfileError("%s: a volume cannot be mounted at %r" % (path, location))
    for reserved in RESERVED_LOCATIONS:
        if normal == reserved or normal.startswith(reserved + "/"):
            raise FuzzfileError(
                "%s: %r is under %s, which the runtime provides; mount the volume elsewhere"
                % (path, location, reserved)
            )
    return normal


# A resource setting: (its key, the key it gets in the result, its validator,
# the NOTE it adds when set (None: none), whether only a true value adds it).
_Setting = Tuple[str, str, Callable[[Any, str], Any], Optional[str], bool]

# resource's settings by section (None: resource itself, whose keys are
# checked first), in the order they are checked and noted.
_RESOURCE_SETTINGS: Tuple[Tuple[Optional[str], Sequence[str], Tuple[_Setting, ...]], ...] = (
    ("cpu", CPU_KEYS, (
        ("cores", "cores", _positive_int, None, False),
        ("affinity", "affinity", partial(_choice, choices=AFFINITIES), None, False),
        ("threads", "threads", _bool, "cpu.threads", False),
        ("sockets", "sockets", _positive_int, "cpu.sockets", False),
    )),
    ("memory", MEMORY_KEYS, (
        ("size", "memory_bytes", parse_memory_size, None, False),
        ("by-core", "by_core", _bool, None, False),
    )),
    (None, RESOURCE_KEYS, (
        ("devices", "devices", _devices, None, False),
        ("exclusive", "exclusive", _bool, "exclusive", True),
        ("annotations", "annotations", _string_map, "resource.annotations", True),
    )),
)


def _parse_resource(value: Any, path: str, notes: List[str]) -> Dict[str, Any]:
    data = _mapping(value, path)
    _check_keys(data, path, RESOURCE_KEYS)
    resource: Dict[str, Any] = {}
    for section, section_keys, settings in _RESOURCE_SETTINGS:
        values, section_path = data, path
        if section is not None:
            found = _section(data, section, path)
            if found is None:
                continue
            values, section_path = found, _join(path, section)
            _check_keys(values, section_path, section_keys)
        for key, name, validate, note, only_if_true in settings:
            if values.get(key) is None:
                continue
            key_path = _join(section_path, key)
            resource[name] = validate(values[key], key_path)
            if note is not None and (resource[name] or not only_if_true):
                notes.append("%s: %s" % (key_path, NOTE[note]))
    return resource


def _parse_timeout_retry(data: Mapping[Any, Any], path: str, notes: List[str]) -> Dict[str, Any]:
    policy: Dict[str, Any] = {}
    timeout_path = _join(path, "timeout")
    timeout = _section(data, "timeout", path)
    if timeout is not None:
        _check_keys(timeout, timeout_path, TIMEOUT_KEYS)
        if timeout.get("execute") is not None:
            policy["timeout_ns"] = parse_go_duration(
                timeout["execute"], _join(timeout_path, "execute")
            )
    retry_path = _join(path, "retry")
    retry = _section(data, "retry", path)
    if retry is not None:
        _check_keys(retry, retry_path, RETRY_KEYS)
        if retry.get("attempts") is not None:
            attempts_path = _join(retry_path, "attempts")
            policy["retry_attempts"] = _int_at_least(retry["attempts"], attempts_path, 0)
            notes.append("%s: %s" % (attempts_path, NOTE["retry"]))
    return policy


def _parse_policy(value: Any, path: str, notes: List[str]) -> Dict[str, Any]:
    data = _mapping(value, path)
    _check_keys(data, path, POLICY_KEYS)
    policy = _parse_timeout_retry(data, path, notes)
    if data.get("restart") is not None:
        restart_path = _join(path, "restart")
        policy["restart"] = _choice(data["restart"], restart_path, RESTART_POLICIES)
        notes.append("%s: %s" % (restart_path, NOTE["restart"]))
    return policy


def _parse_settings(
    data: Mapping[Any, Any], path: str, ctx: _Context, notes: List[str], keys: Sequence[str]
) -> _Settings:
    """The mergeable sections (``keys`` of env, mounts, resource, policy)."""
    settings = _Settings()
    if "env" in keys and data.get("env") is not None:
        settings.env = _parse_env(data["env"], _join(path, "env"))
    if "mounts" in keys and data.get("mounts") is not None:
        mounts_path = _join(path, "mounts")
        settings.mounts = _parse_mounts(data["mounts"], mounts_path, ctx)
    if "resource" in keys and data.get("resource") is not None:
        settings.resource = _parse_resource(data["resource"], _join(path, "resource"), notes)
    if "policy" in keys and data.get("policy") is not None:
        settings.policy = _parse_policy(data["policy"], _join(path, "policy"), notes)
    return settings


@dataclasses.dataclass
class _Defaults:
    everything: _Settings = dataclasses.field(default_factory=_Settings)
    job: _Settings = dataclasses.field(default_factory=_Settings)
    service: _Settings = dataclasses.field(default_factory=_Settings)


def _parse_defaults(value: Any, ctx: _Context, notes: List[str]) -> _Defaults:
    data = _mapping(value, "defaults")
    _check_keys_versioned(data, "defaults", DEFAULTS_KEYS, DEFAULTS_V4_KEYS, ctx.version)
    defaults = _Defaults()
    defaults.everything = _parse_settings(
        data, "defaults", ctx, notes, ("env", "mounts", "resource")
    )
    for key, keys in (("job", DEFAULTS_JOB_KEYS), ("service", DEFAULTS_SERVICE_KEYS)):
        section = _section(data, key, "defaults")
        if section is not None:
            section_path = _join("defaults", key)
            _check_keys(section, section_path, keys)
            setattr(defaults, key, _parse_settings(section, section_path, ctx, notes, keys))
    return defaults
