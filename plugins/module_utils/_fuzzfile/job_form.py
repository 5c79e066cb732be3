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
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
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
    Workflow,
    _task_array,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.policy import ADMISSION_KEY
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
    _show,
    _string,
    _string_list,
    _string_map,
    validate_job_name,
)


def load_job(data: Any, path: str = "job") -> Job:
    """A Job from its JSON form, every field checked."""
    data = {key: value for key, value in _mapping(data, path).items() if key != ADMISSION_KEY}
    fields = [f.name for f in dataclasses.fields(Job)]
    _check_keys(data, path, fields + list(DERIVED_JOB_KEYS))

    def get(key: str, default: Any = None) -> Any:
        return data.get(key, default)

    def sub(key: str) -> str:
        return _join(path, key)

    name = validate_job_name(get("name"), sub("name"))
    kind = _choice(get("kind", "job"), sub("kind"), KINDS)
    image_uri = _string(get("image_uri"), sub("image_uri"), nonempty=True)
    command = get("command")
    script = get("script")
    if command is not None:
        command = _string_list(command, sub("command"), nonempty=True)
    if script is not None:
        script = _string(script, sub("script"), nonempty=True)
    if (command is not None and script is not None) or (
        kind == "job" and command is None and script is None
    ):
        raise FuzzfileError("%s: needs exactly one of command and script" % path)
    args = _string_list(get("args", []), sub("args"))

    env_path = sub("env")
    raw_env = get("env", [])
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

    cwd = get("cwd")
    if cwd is not None:
        cwd = _abs_path(cwd, sub("cwd"))
    cores = get("cores")
    if cores is not None:
        cores = _positive_int(cores, sub("cores"))
    affinity = get("affinity")
    if affinity is not None:
        affinity = _choice(affinity, sub("affinity"), AFFINITIES)
    memory_bytes = get("memory_bytes")
    if memory_bytes is not None:
        memory_bytes = _positive_int(memory_bytes, sub("memory_bytes"), SIZE_MAX)
    nodes = _positive_int(get("nodes", 1), sub("nodes"))
    implementation = get("implementation")
    if implementation is not None:
        implementation = _choice(implementation, sub("implementation"), IMPLEMENTATIONS)
    procs = get("procs_per_node")
    if procs is not None:
        procs = _positive_int(procs, sub("procs_per_node"))
    if implementation is None and (nodes != 1 or procs is not None):
        raise FuzzfileError(
            "%s: a job without a multinode implementation runs on 1 node without "
            "procs_per_node, got nodes=%s, procs_per_node=%s" % (path, nodes, _show(procs))
        )
    unsupported = _string_list(get("unsupported", []), sub("unsupported"))

    depends_on: List[Dependency] = []
    for index, item in enumerate(_list(get("depends_on", []), sub("depends_on"))):
        item_path = "%s[%d]" % (sub("depends_on"), index)
        item = _mapping(item, item_path, "a mapping with 'name' and 'status'")
        _check_keys(item, item_path, ("name", "status"))
        depends_on.append(
            Dependency(
                _string(item.get("name"), _join(item_path, "name"), nonempty=True),
                _choice(item.get("status"), _join(item_path, "status"), DEPENDENCY_STATUSES),
            )
        )
    _check_unique(depends_on, sub("depends_on"))

    timeout = get("timeout_seconds")
    if timeout is not None:
        if (
            not isinstance(timeout, (int, float))
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise FuzzfileError(
                "%s: must be a number of seconds > 0, got %s"
                % (sub("timeout_seconds"), _show(timeout))
            )
        timeout = float(timeout)

    task_array = get("task_array")
    if task_array is not None:
        task_path = sub("task_array")
        raw = _mapping(task_array, task_path)
        _check_keys(raw, task_path, ("start", "end", "concurrency"))
        task_array = _task_array(raw.get("start"), raw.get("end"), raw.get("concurrency"),
                                 task_path)

    files = _path_map(get("files", {}), sub("files"))
    mounts = _path_map(get("mounts", {}), sub("mounts"))
    devices = _devices(get("devices", {}), sub("devices"))
    persist = get("persist")
    if persist is not None:
        persist = _bool(persist, sub("persist"))
    image_secret = get("image_secret")
    if image_secret is not None:
        image_secret = _string(image_secret, sub("image_secret"))
    cpu_threads = get("cpu_threads")
    if cpu_threads is not None:
        cpu_threads = _bool(cpu_threads, sub("cpu_threads"))
    cpu_sockets = get("cpu_sockets")
    if cpu_sockets is not None:
        cpu_sockets = _positive_int(cpu_sockets, sub("cpu_sockets"))
    retry = get("retry_attempts")
    if retry is not None:
        retry = _int_at_least(retry, sub("retry_attempts"), 0)
    restart = get("restart")
    if restart is not None:
        restart = _choice(restart, sub("restart"), RESTART_POLICIES)

    return Job(
        name=name,
        image_uri=image_uri,
        command=command,
        script=script,
        args=args,
        env=_dedupe_env(pairs),
        cwd=cwd,
        cores=cores,
        affinity=affinity,
        memory_bytes=memory_bytes,
        nodes=nodes,
        implementation=implementation,
        procs_per_node=procs,
        unsupported=unsupported,
        kind=kind,
        depends_on=depends_on,
        timeout_seconds=timeout,
        task_array=task_array,
        files=files,
        mounts=mounts,
        memory_by_core=_bool(get("memory_by_core", False), sub("memory_by_core")),
        image_secret=image_secret,
        cpu_threads=cpu_threads,
        cpu_sockets=cpu_sockets,
        devices=devices,
        exclusive=_bool(get("exclusive", False), sub("exclusive")),
        resource_annotations=_string_map(
            get("resource_annotations", {}), sub("resource_annotations")
        ),
        retry_attempts=retry,
        restart=restart,
        network_isolated=_bool(get("network_isolated", False), sub("network_isolated")),
        expose_tcp=_ports(get("expose_tcp", []), sub("expose_tcp")),
        expose_udp=_ports(get("expose_udp", []), sub("expose_udp")),
        persist=persist,
    )


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
    if not units["job_defs"]:
        raise FuzzfileError("%s.job_defs: must contain at least one job" % path)
    workflow = Workflow(
        version=version,
        jobs=units["job_defs"],
        service_defs=units["service_defs"],
        files=files,
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
