# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Parsing a Fuzzfile: ``parse_workflow(text)`` validates one YAML document
strictly (unknown keys are errors, as in the vendor's API) and normalizes it
into a ``Workflow``: defaults merged into every job and service
(``settings``), dependencies checked (no dangling names, no cycles;
``graph``). ``requires`` (deprecated) is read as ``depends-on`` with
status ``FINISHED``, and is ignored when ``depends-on`` is set; both cases
add a warning. Statuses are case-insensitive and stored upper-case.
``policy.timeout.execute`` becomes ``Job.timeout_seconds``; a zero duration
means no timeout. A service's ``policy`` (Fuzzball's services have none) is
validated as a job's and ignored, with a note. A workflow of services only
is a workflow like any other.

Features the reference documents but this collection does not execute yet
are validated like the rest and recorded as short notes in ``Job.unsupported``
(features of a job or service) or ``Workflow.unsupported`` (volumes,
annotations, and features set in ``defaults``) so that callers can warn;
nothing is dropped silently."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.files_volumes import (
    _file_source,
    _parse_files,
    _parse_volumes,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.graph import (
    _check_dependencies,
    _graph,
    dependency_order,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    DEPENDENCY_KEYS,
    DEPENDENCY_STATUSES,
    IMAGE_KEYS,
    IMPLEMENTATIONS,
    JOB_KEYS,
    MULTINODE_KEYS,
    NOTE,
    SERVICE_KEYS,
    TASK_ARRAY_KEYS,
    TOP_KEYS,
    VERSIONS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.loader import _load_fuzzfile_yaml
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import (
    Dependency,
    Job,
    Volume,
    Workflow,
    _task_array,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.network import (
    _check_workflow_endpoints,
    _parse_network,
    _parse_probe,
    _resolve_probe_port,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.settings import (
    _Context,
    _Defaults,
    _mount_points,
    _parse_defaults,
    _parse_policy,
    _parse_settings,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.transfers import unmounted_volumes
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _abs_path,
    _argument_list,
    _bool,
    _check_keys,
    _choice,
    _join,
    _list,
    _mapping,
    _no_nul,
    _positive_int,
    _secret_reference,
    _section,
    _show,
    _string,
    _string_map,
    validate_job_name,
)


def _parse_dependencies(
    data: Mapping[Any, Any], path: str, ctx: _Context
) -> Tuple[List[Dependency], List[Tuple[str, str]]]:
    """``depends-on``, else the deprecated ``requires``: the dependencies and,
    for each, the paths of its name and status fields."""
    dependencies: List[Dependency] = []
    paths: List[Tuple[str, str]] = []
    requires = data.get("requires")
    depends_on = data.get("depends-on")
    if requires is not None:
        requires_path = _join(path, "requires")
        names = _list(requires, requires_path)
        names = [
            _string(item, "%s[%d]" % (requires_path, index), nonempty=True)
            for index, item in enumerate(names)
        ]
        if depends_on is not None:
            ctx.warnings.append(
                "%s: ignored because depends-on is set (requires is deprecated)" % requires_path
            )
        else:
            ctx.warnings.append(
                "%s: deprecated; read as depends-on with status FINISHED" % requires_path
            )
            for index, name in enumerate(names):
                item_path = "%s[%d]" % (requires_path, index)
                dependencies.append(Dependency(name, "FINISHED"))
                paths.append((item_path, item_path))
    if depends_on is not None:
        depends_path = _join(path, "depends-on")
        for index, item in enumerate(_list(depends_on, depends_path)):
            item_path = "%s[%d]" % (depends_path, index)
            entry = _mapping(item, item_path, "a mapping with 'name' and 'status'")
            _check_keys(entry, item_path, DEPENDENCY_KEYS)
            name_path = _join(item_path, "name")
            status_path = _join(item_path, "status")
            if entry.get("name") is None:
                raise FuzzfileError("%s: required (the name of a job or service)" % name_path)
            name = _string(entry["name"], name_path, nonempty=True)
            status = "FINISHED"
            if entry.get("status") is not None:
                raw = entry["status"]
                if (
                    not isinstance(raw, str)
                    or not raw.isascii()
                    or raw.upper() not in DEPENDENCY_STATUSES
                ):
                    raise FuzzfileError(
                        "%s: must be FINISHED or RUNNING (any case), got %s"
                        % (status_path, _show(raw))
                    )
                status = raw.upper()
            if entry.get("description") is not None:
                _string(entry["description"], _join(item_path, "description"))
            dependencies.append(Dependency(name, status))
            paths.append((name_path, status_path))
    for index, dependency in enumerate(dependencies):
        if dependency.name in [d.name for d in dependencies[:index]]:
            raise FuzzfileError("%s: %r is listed twice" % (paths[index][0], dependency.name))
    return dependencies, paths


def _parse_unit(
    kind: str, name: str, data: Any, path: str, ctx: _Context, defaults: _Defaults
) -> Tuple[Job, List[Tuple[str, str]]]:
    """One job or service, defaults merged; also the paths of its
    dependencies' name and status fields."""
    data = _mapping(data, path)
    _check_keys(data, path, JOB_KEYS if kind == "job" else SERVICE_KEYS)
    notes: List[str] = []

    if data.get("name") is not None:
        # The vendor ignores a name inside a job: the key names the job.
        _string(data["name"], _join(path, "name"))

    image_path = _join(path, "image")
    if data.get("image") is None:
        raise FuzzfileError("%s: required (a mapping with 'uri')" % image_path)
    image = _mapping(data["image"], image_path, "a mapping with 'uri'")
    _check_keys(image, image_path, IMAGE_KEYS)
    if image.get("uri") is None:
        raise FuzzfileError("%s: required" % _join(image_path, "uri"))
    image_uri = _string(image["uri"], _join(image_path, "uri"), nonempty=True)
    image_secret = None
    if image.get("secret") is not None:
        image_secret = _secret_reference(image["secret"], _join(image_path, "secret"))

    command = None
    script = None
    if data.get("command") is not None:
        command = _argument_list(data["command"], _join(path, "command"), nonempty=True)
    if data.get("script") is not None:
        script = _string(data["script"], _join(path, "script"), nonempty=True)
    if command is not None and script is not None:
        raise FuzzfileError("%s: has both command and script; exactly one is allowed" % path)
    if command is None and script is None and kind == "job":
        raise FuzzfileError("%s: needs a command or a script (exactly one)" % path)

    args: List[str] = []
    if data.get("args") is not None:
        args = _argument_list(data["args"], _join(path, "args"))

    merged_keys = ("env", "mounts", "resource") + (("policy",) if kind == "job" else ())
    own = _parse_settings(data, path, ctx, notes, merged_keys)
    if kind == "service" and data.get("policy") is not None:
        policy_path = _join(path, "policy")
        _parse_policy(data["policy"], policy_path, [])
        notes.append("%s: %s" % (policy_path, NOTE["service.policy"]))
    base = defaults.everything.merged(defaults.job if kind == "job" else defaults.service)
    settings = base.merged(own)

    cwd = None
    if data.get("cwd") is not None:
        cwd = _abs_path(data["cwd"], _join(path, "cwd"))

    nodes = 1
    implementation = None
    procs_per_node = None
    multinode_path = _join(path, "multinode")
    multinode = _section(data, "multinode", path)
    if multinode is not None:
        _check_keys(multinode, multinode_path, MULTINODE_KEYS)
        nodes_path = _join(multinode_path, "nodes")
        if "nodes" not in multinode:
            raise FuzzfileError("%s: required (an integer >= 1)" % nodes_path)
        nodes = _positive_int(multinode["nodes"], nodes_path)
        impl_path = _join(multinode_path, "implementation")
        if "implementation" not in multinode:
            raise FuzzfileError(
                "%s: required (one of %s)" % (impl_path, ", ".join(IMPLEMENTATIONS))
            )
        implementation = _choice(multinode["implementation"], impl_path, IMPLEMENTATIONS)
        if multinode.get("procs-per-node") is not None:
            procs_per_node = _positive_int(
                multinode["procs-per-node"], _join(multinode_path, "procs-per-node")
            )

    files: Dict[str, str] = {}
    inline_files: Dict[str, str] = {}
    files_path = _join(path, "files")
    raw_files = _section(data, "files", path)
    if raw_files is not None:
        for target, reference in raw_files.items():
            item_path = _join(files_path, target)
            if not isinstance(target, str) or not target.startswith("/"):
                raise FuzzfileError(
                    "%s: keys must be absolute container paths, got %s"
                    % (files_path, _show(target))
                )
            _no_nul(target, item_path)
            source, is_reference = _file_source(reference, item_path, ctx)
            (files if is_reference else inline_files)[target] = source

    depends_on, dependency_paths = _parse_dependencies(data, path, ctx)

    task_array = None
    task_path = _join(path, "task-array")
    raw_task = _section(data, "task-array", path)
    if raw_task is not None:
        _check_keys(raw_task, task_path, TASK_ARRAY_KEYS)
        task_array = _task_array(
            raw_task.get("start"), raw_task.get("end"), raw_task.get("concurrency"), task_path
        )

    network: Dict[str, Any] = {"ports": [], "endpoints": []}
    network_path = _join(path, "network")
    if data.get("network") is not None:
        network = _parse_network(data["network"], network_path, kind, notes)

    persist = None
    readiness_probe = None
    if kind == "service":
        if data.get("persist") is not None:
            persist = _bool(data["persist"], _join(path, "persist"))
        if data.get("readiness-probe") is not None:
            probe_path = _join(path, "readiness-probe")
            readiness_probe = _resolve_probe_port(
                _parse_probe(data["readiness-probe"], probe_path), network["ports"], probe_path,
                _join(network_path, "ports"))

    resource = settings.resource
    policy = settings.policy
    timeout_ns = policy.get("timeout_ns")
    mounts = _mount_points(settings.mounts)
    job = Job(
        name=name,
        image_uri=image_uri,
        command=command,
        script=script,
        args=args,
        env=settings.env,
        cwd=cwd,
        cores=resource.get("cores"),
        affinity=resource.get("affinity"),
        memory_bytes=resource.get("memory_bytes"),
        nodes=nodes,
        implementation=implementation,
        procs_per_node=procs_per_node,
        unsupported=notes,
        kind=kind,
        depends_on=depends_on,
        timeout_seconds=timeout_ns / 10**9 if timeout_ns else None,
        task_array=task_array,
        files=files,
        mounts=mounts,
        volumes={volume: ctx.volumes[volume] for volume in mounts.values()},
        memory_by_core=resource.get("by_core", False),
        image_secret=image_secret,
        cpu_threads=resource.get("threads"),
        cpu_sockets=resource.get("sockets"),
        devices=resource.get("devices", {}),
        exclusive=resource.get("exclusive", False),
        resource_annotations=resource.get("annotations", {}),
        retry_attempts=policy.get("retry_attempts"),
        restart=policy.get("restart"),
        network_isolated=network.get("isolated", False),
        expose_tcp=network.get("expose-tcp", []),
        expose_udp=network.get("expose-udp", []),
        persist=persist,
        inline_files=inline_files,
        readiness_probe=readiness_probe,
        ports=network["ports"],
        endpoints=network["endpoints"],
    )
    return job, dependency_paths


def parse_workflow(text: str) -> Workflow:
    """Parse, validate and normalize a Fuzzfile (one YAML document)."""
    data, warnings = _load_fuzzfile_yaml(text)
    if data is None:
        raise FuzzfileError("the document is empty; expected a mapping with 'version' and 'jobs'")
    if not isinstance(data, Mapping):
        raise FuzzfileError(
            "top level: must be a mapping with 'version' and 'jobs', got %s" % _show(data)
        )
    _check_keys(data, "", TOP_KEYS)

    if data.get("version") is None:
        raise FuzzfileError("version: required (one of %s)" % ", ".join(VERSIONS))
    version = _choice(data["version"], "version", VERSIONS)

    raw_services: Mapping[Any, Any] = {}
    if data.get("services") is not None:
        raw_services = _mapping(data["services"], "services")
    for key in ("files", "defaults", "annotations", "volumes"):
        if data.get(key) is not None:
            _mapping(data[key], key)

    # At least one job or service, as in the vendor's API.
    if data.get("jobs") is None and not raw_services:
        raise FuzzfileError("jobs: required: a mapping of job names to jobs")
    raw_jobs: Mapping[Any, Any] = {}
    if data.get("jobs") is not None:
        raw_jobs = _mapping(data["jobs"], "jobs", "a mapping of job names to jobs")
    if not raw_jobs and not raw_services:
        raise FuzzfileError("jobs: must contain at least one job")

    notes: List[str] = []
    ctx = _Context(version=version, files={}, volumes={}, warnings=warnings)
    if data.get("files") is not None:
        ctx.files = _parse_files(data["files"])
    if data.get("annotations") is not None:
        if _string_map(data["annotations"], "annotations"):
            notes.append("annotations: %s" % NOTE["annotations"])
    volumes: Dict[str, Volume] = {}
    if data.get("volumes") is not None:
        volumes = _parse_volumes(data["volumes"], ctx, notes)
        ctx.volumes = {name: volume.store for name, volume in volumes.items()}
    defaults = _Defaults()
    if data.get("defaults") is not None:
        defaults = _parse_defaults(data["defaults"], ctx, notes)

    jobs: Dict[str, Job] = {}
    services: Dict[str, Job] = {}
    dependency_paths: Dict[str, List[Tuple[str, str]]] = {}
    for name, job_data in raw_jobs.items():
        validate_job_name(name, "jobs")
        jobs[name], dependency_paths[name] = _parse_unit(
            "job", name, job_data, _join("jobs", name), ctx, defaults
        )
    for name, service_data in raw_services.items():
        validate_job_name(name, "services", "service")
        service_path = _join("services", name)
        if name in jobs:
            raise FuzzfileError(
                "%s: a job has the same name; job and service names must differ" % service_path
            )
        services[name], dependency_paths[name] = _parse_unit(
            "service", name, service_data, service_path, ctx, defaults
        )
    _check_workflow_endpoints(services)

    workflow = Workflow(
        version=version,
        jobs=jobs,
        service_defs=services,
        files=ctx.files,
        volumes=volumes,
        unsupported=notes,
        warnings=ctx.warnings,
    )
    workflow.warnings.extend(unmounted_volumes(workflow))
    _check_dependencies(workflow.units, dependency_paths)
    dependency_order(_graph(workflow.units))
    return workflow
