# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Reading the JSON form of a job or a workflow (``Job.to_dict()``,
``Workflow.to_dict()``) when it arrives as a task's argument: the
``rank_plan`` task's ``job``, which a play may have built or changed by
hand. Every field is checked, as the parser checks a Fuzzfile's, and the
message names it (``job.nodes: must be an integer >= 1, got 0``). Keys
missing from the data take their defaults, so dicts written before a field
existed still load; the derived keys (``DERIVED_JOB_KEYS``, ``order``,
``waves``) and a job's admission (``ADMISSION_KEY``, read by the run policy)
are ignored."""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.files_volumes import is_store
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.graph import (
    _check_dependencies,
    _graph,
    dependency_order,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    AFFINITIES,
    DEPENDENCY_STATUSES,
    IMPLEMENTATIONS,
    KINDS,
    RESTART_POLICIES,
    SIZE_MAX,
    VERSIONS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import (
    DERIVED_JOB_KEYS,
    Dependency,
    Job,
    TaskArray,
    Transfer,
    Volume,
    Workflow,
    _task_array,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.network import (
    _parse_ports,
    _parse_probe,
    _resolve_probe_port,
    load_endpoints,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.policy import ADMISSION_KEY
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.settings import _mount_location
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.transfers import DIRECTIONS, check_end
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _abs_path,
    _bool,
    _check_keys,
    _choice,
    _dedupe_env,
    _devices,
    _env_name,
    _int_at_least,
    _join,
    _list,
    _mapping,
    _names,
    _path_map,
    _ports,
    _positive_int,
    _secret_reference,
    _show,
    _string,
    _string_list,
    _string_map,
    validate_job_name,
)


def load_job(data: Any, path: str = "job") -> Job:
    """A Job from its JSON form, every field checked, in ``_JOB_FIELDS``'
    order (the first bad field is the one named)."""
    data = {key: value for key, value in _mapping(data, path).items() if key != ADMISSION_KEY}
    fields = [f.name for f in dataclasses.fields(Job)]
    _check_keys(data, path, fields + list(DERIVED_JOB_KEYS))
    values: Dict[str, Any] = {}
    for key, validate, default in _JOB_FIELDS:
        value = data.get(key) if default is _REQUIRED else data.get(key, default)
        if value is None and default is None:
            values[key] = None  # an optional field left out (or null)
        else:
            values[key] = validate(value, _join(path, key))
        check = _CHECKS_AFTER.get(key)
        if check is not None:
            check(values, path)
    return Job(**values)


def _env_form(raw_env: Any, env_path: str) -> List[Tuple[str, str]]:
    """``env`` as ``[[key, value], ...]`` (or a mapping), deduplicated."""
    pairs: List[Tuple[str, str]] = []
    if isinstance(raw_env, Mapping):
        for key, value in raw_env.items():
            item_path = _join(env_path, key)
            pairs.append((_env_name(key, item_path), _string(value, item_path)))
    elif isinstance(raw_env, (list, tuple)):
        for index, item in enumerate(raw_env):
            item_path = "%s[%d]" % (env_path, index)
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise FuzzfileError(
                    "%s: must be a [key, value] pair, got %s" % (item_path, _show(item))
                )
            pairs.append((_env_name(item[0], item_path), _string(item[1], item_path)))
    else:
        raise FuzzfileError(
            "%s: must be a list of [key, value] pairs, got %s" % (env_path, _show(raw_env))
        )
    return _dedupe_env(pairs)


def _dependencies_form(value: Any, path: str) -> List[Dependency]:
    depends_on: List[Dependency] = []
    for index, item in enumerate(_list(value, path)):
        item_path = "%s[%d]" % (path, index)
        item = _mapping(item, item_path, "a mapping with 'name' and 'status'")
        _check_keys(item, item_path, ("name", "status"))
        depends_on.append(
            Dependency(
                _string(item.get("name"), _join(item_path, "name"), nonempty=True),
                _choice(item.get("status"), _join(item_path, "status"), DEPENDENCY_STATUSES),
            )
        )
    _check_unique(depends_on, path)
    return depends_on


def _seconds(timeout: Any, path: str) -> float:
    if (
        not isinstance(timeout, (int, float))
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise FuzzfileError("%s: must be a number of seconds > 0, got %s" % (path, _show(timeout)))
    return float(timeout)


def _task_array_form(value: Any, path: str) -> TaskArray:
    raw = _mapping(value, path)
    _check_keys(raw, path, ("start", "end", "concurrency"))
    return _task_array(raw.get("start"), raw.get("end"), raw.get("concurrency"), path)


def _one_of_command_and_script(values: Mapping[str, Any], path: str) -> None:
    command, script = values["command"], values["script"]
    if (command is not None and script is not None) or (
        values["kind"] == "job" and command is None and script is None
    ):
        raise FuzzfileError("%s: needs exactly one of command and script" % path)


def _single_node_unless_multinode(values: Mapping[str, Any], path: str) -> None:
    nodes, procs = values["nodes"], values["procs_per_node"]
    if values["implementation"] is None and (nodes != 1 or procs is not None):
        raise FuzzfileError(
            "%s: a job without a multinode implementation runs on 1 node without "
            "procs_per_node, got nodes=%s, procs_per_node=%s" % (path, nodes, _show(procs))
        )


def _one_source_per_file(values: Mapping[str, Any], path: str) -> None:
    for target in values["inline_files"]:
        if target in values["files"]:
            raise FuzzfileError(
                "%s.inline_files.%s: is in files too; a file has one source" % (path, target)
            )


STORES_MESSAGE = "must be ephemeral, user/persistent, account/persistent or persistent/NAME"


def _volume_stores(value: Any, path: str) -> Dict[str, str]:
    stores = _string_map(value, path)
    for name, store in stores.items():
        if not is_store(store):
            raise FuzzfileError("%s: %s, got %s" % (_join(path, name), STORES_MESSAGE, _show(store)))
    return stores


def _transfer_form(value: Any, path: str, direction: str, files: Mapping[str, str]) -> Transfer:
    raw = _mapping(value, path)
    _check_keys(raw, path, ("source", "destination", "secret", "timeout_seconds", "attempts"))
    ends = {}
    for end in ("source", "destination"):
        ends[end] = _string(raw.get(end), _join(path, end), nonempty=True)
        check_end(ends[end], direction, end, _join(path, end), files)
    secret = raw.get("secret")
    timeout = raw.get("timeout_seconds")
    return Transfer(
        ends["source"],
        ends["destination"],
        _secret_reference(secret, _join(path, "secret")) if secret is not None else None,
        _seconds(timeout, _join(path, "timeout_seconds")) if timeout is not None else None,
        _positive_int(raw.get("attempts", 1), _join(path, "attempts")),
    )


def _volumes_form(value: Any, path: str, files: Mapping[str, str]) -> Dict[str, Volume]:
    """A workflow's ``volumes``: each ``{store, ingress, egress}``."""
    volumes: Dict[str, Volume] = {}
    for name, raw in _mapping(value, path).items():
        item_path = _join(path, name)
        raw = _mapping(raw, item_path)
        _check_keys(raw, item_path, ("store",) + DIRECTIONS)
        store = raw.get("store")
        if not isinstance(name, str) or not isinstance(store, str):
            raise FuzzfileError("%s.store: %s, got %s" % (item_path, STORES_MESSAGE, _show(store)))
        _volume_stores({name: store}, path)
        transfers = {
            direction: [_transfer_form(item, "%s.%s[%d]" % (item_path, direction, index), direction, files)
                        for index, item in enumerate(_list(raw.get(direction, []), _join(item_path, direction)))]
            for direction in DIRECTIONS
        }
        volumes[name] = Volume(store, transfers["ingress"], transfers["egress"])
    return volumes


def _probe_port_resolved(values: Dict[str, Any], path: str) -> None:
    """A probe's port given by name (a form made by hand) is resolved
    against the job's ``ports``, as the parser resolves it."""
    values["readiness_probe"] = _resolve_probe_port(
        values["readiness_probe"], values["ports"], _join(path, "readiness_probe"), _join(path, "ports"))


def _every_mount_has_its_store(values: Mapping[str, Any], path: str) -> None:
    for location, volume in values["mounts"].items():
        if volume not in values["volumes"]:
            raise FuzzfileError(
                "%s.mounts.%s: volume %r has no store in volumes" % (path, location, volume)
            )
    for location in values["mounts"]:
        _mount_location(location, "%s.mounts.%s" % (path, location))


_REQUIRED = object()  # a field's default: none, the field must be there

# Every field of the JSON form: (key, validator, default), in the order they
# are checked. A default of None makes the field optional (null or left out
# stays None); any other default stands in for a missing key, and is checked.
_JOB_FIELDS: Tuple[Tuple[str, Callable[[Any, str], Any], Any], ...] = (
    ("name", validate_job_name, _REQUIRED),
    ("kind", partial(_choice, choices=KINDS), "job"),
    ("image_uri", partial(_string, nonempty=True), _REQUIRED),
    ("command", partial(_string_list, nonempty=True), None),
    ("script", partial(_string, nonempty=True), None),
    ("args", _string_list, []),
    ("env", _env_form, []),
    ("cwd", _abs_path, None),
    ("cores", _positive_int, None),
    ("affinity", partial(_choice, choices=AFFINITIES), None),
    ("memory_bytes", partial(_positive_int, maximum=SIZE_MAX), None),
    ("nodes", _positive_int, 1),
    ("implementation", partial(_choice, choices=IMPLEMENTATIONS), None),
    ("procs_per_node", _positive_int, None),
    ("unsupported", _string_list, []),
    ("depends_on", _dependencies_form, []),
    ("timeout_seconds", _seconds, None),
    ("task_array", _task_array_form, None),
    ("files", _path_map, {}),
    ("mounts", _path_map, {}),
    ("volumes", _volume_stores, {}),
    ("devices", _devices, {}),
    ("persist", _bool, None),
    ("image_secret", _secret_reference, None),
    ("cpu_threads", _bool, None),
    ("cpu_sockets", _positive_int, None),
    ("retry_attempts", partial(_int_at_least, minimum=0), None),
    ("restart", partial(_choice, choices=RESTART_POLICIES), None),
    ("memory_by_core", _bool, False),
    ("exclusive", _bool, False),
    ("resource_annotations", _string_map, {}),
    ("network_isolated", _bool, False),
    ("expose_tcp", _ports, []),
    ("expose_udp", _ports, []),
    ("inline_files", _path_map, {}),
    ("ports", _parse_ports, []),
    ("endpoints", load_endpoints, []),
    ("readiness_probe", _parse_probe, None),
)

# Checks across fields, each made once the fields it reads are checked.
_CHECKS_AFTER: Dict[str, Callable[[Dict[str, Any], str], None]] = {
    "volumes": _every_mount_has_its_store,
    "script": _one_of_command_and_script,
    "procs_per_node": _single_node_unless_multinode,
    "inline_files": _one_source_per_file,
    "readiness_probe": _probe_port_resolved,
}


def _check_unique(depends_on: Sequence[Dependency], path: str) -> None:
    """A job depends on each name once."""
    seen = set()
    for index, dependency in enumerate(depends_on):
        if dependency.name in seen:
            raise FuzzfileError(
                "%s[%d].name: %r is listed twice" % (path, index, dependency.name)
            )
        seen.add(dependency.name)


def load_workflow(data: Any, path: str = "workflow") -> Workflow:
    """A Workflow from its JSON form, every field and the dependencies checked."""
    data = _mapping(data, path)
    _check_keys(
        data,
        path,
        (
            "version",
            "jobs",
            "services",
            "unsupported",
            "warnings",
            "files",
            "volumes",
            "order",
            "waves",
            "job_defs",
            "service_defs",
        ),
    )
    version = _choice(data.get("version"), _join(path, "version"), VERSIONS)
    files = _string_map(data.get("files", {}), _join(path, "files"))
    units: Dict[str, Dict[str, Job]] = {}
    for key, kind in (("job_defs", "job"), ("service_defs", "service")):
        defs_path = _join(path, key)
        raw = _mapping(data.get(key, {}), defs_path)
        units[key] = {}
        for name, item in raw.items():
            item_path = _join(defs_path, name)
            unit = load_job(item, item_path)
            if unit.name != name:
                raise FuzzfileError(
                    "%s.name: must be %s, got %s" % (item_path, _show(name), _show(unit.name))
                )
            if unit.kind != kind:
                raise FuzzfileError(
                    "%s.kind: must be %s, got %s" % (item_path, _show(kind), _show(unit.kind))
                )
            if name in units.get("job_defs", {}) and kind == "service":
                raise FuzzfileError(
                    "%s: a job has the same name; names must be unique" % item_path
                )
            for target, file_name in unit.files.items():
                if file_name not in files:
                    raise FuzzfileError(
                        "%s.files.%s: no entry %r in files (%s)"
                        % (item_path, target, file_name, _names(files, "none"))
                    )
            units[key][name] = unit
    if not units["job_defs"] and not units["service_defs"]:
        raise FuzzfileError(
            "%s.job_defs: must contain at least one job (or service_defs a service)" % path
        )
    volumes = _volumes_form(data.get("volumes", {}), _join(path, "volumes"), files)
    for key, defs in units.items():
        for name, unit in defs.items() if volumes else ():
            for volume, store in unit.volumes.items():
                if volume not in volumes or volumes[volume].store != store:
                    raise FuzzfileError(
                        "%s.%s.%s.volumes.%s: must be the store of %s.volumes.%s, got %s" % (
                            path, key, name, volume, path, volume, _show(store)))
    workflow = Workflow(
        version=version,
        jobs=units["job_defs"],
        service_defs=units["service_defs"],
        files=files,
        volumes=volumes,
        unsupported=_string_list(data.get("unsupported", []), _join(path, "unsupported")),
        warnings=_string_list(data.get("warnings", []), _join(path, "warnings")),
    )
    dependency_paths = {
        name: [
            (
                "%s.%s.%s.depends_on[%d].name" % (path, defs, name, index),
                "%s.%s.%s.depends_on[%d].status" % (path, defs, name, index),
            )
            for index in range(len(unit.depends_on))
        ]
        for defs in ("job_defs", "service_defs")
        for name, unit in units[defs].items()
    }
    _check_dependencies(workflow.units, dependency_paths)
    dependency_order(_graph(workflow.units))
    return workflow
