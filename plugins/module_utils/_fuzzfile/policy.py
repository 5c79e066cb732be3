# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The run policy: which jobs and services of a workflow a run runs
(``select_run``, ``select_job``; "job" below means either unless said),
what of a job is validated but not carried out (``not_executed_yet``),
and whether a job may run at all (``admit``): its
implementation can be run here (``require_runnable``), its rank and task host
names fit one DNS label (``check_rank_names``), every secret it
references is defined (``check_secrets``) and its ``image.secret``, if any,
holds registry credentials (``check_registry_secret``). A job is admitted once per run,
by the task that loads the Fuzzfile, before any host is touched; its JSON
form then carries the admission (``admission``, under ``ADMISSION_KEY``), so
that the task planning its ranks takes it as admitted (``admit_once``)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    REGISTRY_CREDENTIAL_KEYS,
    SECRET_PREFIX,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Job, Workflow
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import _show

MULTINODE_VARS = (
    "MULTINODE_HOSTLIST",
    "MULTINODE_HOSTLIST_NOSLOTS",
    "MULTINODE_TOTAL_SLOTS",
    "MULTINODE_NODE_IP",
    "MULTINODE_SSH_WRAPPER",
    "MULTINODE_RSH_WRAPPER",
)
HOST_NAME_MAX = 63  # one DNS label
ADMISSION_KEY = "admitted"  # in a job's JSON form: what admit checked (admission)


def rank_name(job: str, rank: int) -> str:
    """Host name of rank ``rank`` of job ``job``."""
    return "%s-%d" % (job, rank)


def task_name(job: str, task_id: int) -> str:
    """Host name of task ``task_id`` of task-array job ``job``."""
    return "%s-%d" % (job, task_id)


def _no_unit_named(workflow: Workflow, name: Any) -> FuzzfileError:
    listed = "jobs: %s" % (", ".join(workflow.jobs) or "none")
    if not workflow.service_defs:
        return FuzzfileError("jobs: no job named %s; %s" % (_show(name), listed))
    return FuzzfileError("jobs: no job or service named %s; %s; services: %s"
                         % (_show(name), listed, ", ".join(workflow.services)))


def select_job(workflow: Workflow, name: Optional[str] = None) -> Job:
    """Pick a job or service by name; without a name the workflow must have
    exactly one job (or, having none, one service)."""
    if name is None:
        kind, names = ("job", list(workflow.jobs)) if workflow.jobs else ("service", workflow.services)
        if len(names) == 1:
            return workflow.units[names[0]]
        raise FuzzfileError("%ss: the workflow has %d %ss; name the one to run: %s"
                            % (kind, len(names), kind, ", ".join(names)))
    if name not in workflow.units:
        raise _no_unit_named(workflow, name)
    return workflow.units[name]


def select_run(workflow: Workflow, name: Optional[str] = None) -> List[Job]:
    """What run-job.yml runs, in dependency order: the job or service
    named, or without a name every job and service of the workflow (their
    ``kind`` says which)."""
    if name is not None:
        return [select_job(workflow, name)]
    return [workflow.units[unit] for unit in workflow.order]


def not_executed_yet(job: Job, whole_workflow: bool = False) -> List[str]:
    """Notes on what this job asks for that run-job.yml validates but does
    not carry out yet, so that a user is told instead of silently surprised.
    ``whole_workflow``: the job runs as part of its whole workflow, so its
    dependencies do run first."""
    notes = []
    if job.depends_on and not whole_workflow:
        notes.append("%s.depends-on: %s not run first; -e job=%s runs this one %s only" % (
            job.field_path, ", ".join(dep.name for dep in job.depends_on), job.name, job.kind))
    return notes


def require_runnable(job: Job) -> Job:
    """The runner's gate: every job runs except a ``gasnet`` multinode job
    and a task array of multinode jobs (whose task host names ``<job>-<task>``
    and rank host names ``<job>-<rank>`` would clash); every service runs
    except one that is a task array (a service is one long-running process,
    ready and reached at its rank 0) or has neither command nor script (its
    container is started with a shell of the runtime's, never the image's
    own entry point).

    Plain and ``generic`` jobs run their command as given; ``openmpi``,
    ``ompi`` and ``mpich`` jobs run it under the MPI launcher (see
    job_spec.launcher). GASNet is not packaged for the test nodes' OS, so
    Fuzzball's GASNet launch cannot be reproduced and tested here; the
    message says how to run such a program as a ``generic`` job instead,
    with GASNet's own ssh spawner going through the wrapper."""
    if job.kind == "service" and job.task_array is not None:
        raise FuzzfileError(
            "%s.task-array: a service cannot be a task array: a service is one long-running "
            "process, ready and reached at its rank 0; use multinode for a service on several "
            "nodes" % job.field_path)
    if job.kind == "service" and job.command is None and job.script is None:
        raise FuzzfileError(
            "%s: needs a command or a script to run here: fuzz.multinode starts a service's "
            "command in its image, not the image's own entry point" % job.field_path)
    if job.implementation == "gasnet":
        raise FuzzfileError(
            "%s.multinode.implementation: 'gasnet' is not supported: fuzz.multinode "
            "has no GASNet launcher (GASNet is not packaged in Debian, the OS its tests run "
            "on, so one could not be tested); use implementation 'generic' and let GASNet's "
            "ssh spawner start the processes through the wrapper: run the program with "
            "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER, "
            "GASNET_SSH_SERVERS=$MULTINODE_HOSTLIST_NOSLOTS and GASNET_SPAWNFN=S "
            "(udp conduit; other conduits: GASNET_<CONDUIT>_SPAWNER=ssh)" % job.field_path
        )
    if job.task_array is not None and job.multinode:
        raise FuzzfileError(
            "%s: a task array of multinode jobs cannot run: task host names "
            "%s-<task> and rank host names %s-<rank> would be the same names; use a "
            "task array of single-node jobs, or one multinode job" % (job.field_path, job.name, job.name)
        )
    return job


def check_rank_names(job: Job) -> None:
    """Raise FuzzfileError unless every rank host name ``<job>-<rank>`` of
    ``job`` fits one DNS label. The job name alone may be 63 characters (a
    valid Fuzzfile); whether its ranks can be named depends on ``nodes``."""
    if job.task_array is not None:
        last = task_name(job.name, job.task_array.end)
        if len(last) > HOST_NAME_MAX:
            raise FuzzfileError(
                "%s: task host name %r is longer than %d characters; use a shorter job name"
                % (job.field_path, last, HOST_NAME_MAX)
            )
    last = rank_name(job.name, job.nodes - 1)
    if len(last) > HOST_NAME_MAX:
        raise FuzzfileError(
            "%s: rank host name %r is longer than %d characters; use a shorter %s name"
            % (job.field_path, last, HOST_NAME_MAX, job.kind)
        )


def reserved_env(job: Job) -> List[str]:
    """Env names the runtime sets for ``job``; the job's own values for them
    are dropped."""
    if job.multinode:
        return ["HOSTNAME", "RANK"] + list(MULTINODE_VARS)
    return ["HOSTNAME"]


def secret_references(job: Job) -> Dict[str, str]:
    """``{env key: secret name}`` for the job's ``secret://NAME`` env values,
    in the env's order. NAME (``scope/name``, everything after
    ``secret://``) is the key of the value in ``fuzz_multinode_secrets``.
    Keys the runtime sets itself are left out: their job value is dropped,
    so their secret is never needed."""
    reserved = reserved_env(job)
    return {
        key: value[len(SECRET_PREFIX):]
        for key, value in job.env
        if value.startswith(SECRET_PREFIX) and key not in reserved
    }


def image_secret_name(job: Job) -> Optional[str]:
    """The secret name of the job's ``image.secret`` (``secret://NAME``): the
    key of the registry credentials in ``fuzz_multinode_secrets``; None
    when the job names none."""
    if job.image_secret is None:
        return None
    return job.image_secret[len(SECRET_PREFIX):]


def missing_secrets(job: Job, available: Iterable[Any]) -> List[str]:
    """One message per ``secret://`` reference of ``job`` (its env values,
    its ``image.secret``) whose name is not among ``available`` (the names
    defined in ``fuzz_multinode_secrets``). A message names the job, the
    field and the reference, never a value."""
    names = {name for name in available if isinstance(name, str)}
    fields = ["env.%s" % key for key in secret_references(job)]
    references = list(secret_references(job).values())
    image_secret = image_secret_name(job)
    if image_secret is not None:
        fields.append("image.secret")
        references.append(image_secret)
    return [
        "%s.%s: %s%s is not defined in fuzz_multinode_secrets"
        % (job.field_path, field, SECRET_PREFIX, name)
        for field, name in zip(fields, references)
        if name not in names
    ]


def check_secrets(job: Job, available: Iterable[Any]) -> None:
    """Raise FuzzfileError naming every secret ``job`` references that is not
    among ``available`` (see ``missing_secrets``)."""
    missing = missing_secrets(job, available)
    if missing:
        raise FuzzfileError(
            "%s (fuzz_multinode_secrets maps each secret name, such as %s, to its value; "
            "keep it in a vault-encrypted vars file and pass it with -e @FILE)"
            % ("; ".join(missing), missing[0].split(SECRET_PREFIX, 1)[1].split(" ", 1)[0])
        )


def registry_credentials(value: Any) -> bool:
    """Whether a value of ``fuzz_multinode_secrets`` is registry
    credentials, the form an ``image.secret``'s value takes: a mapping of
    exactly ``username`` and ``password`` (a password or token), both
    non-empty strings, the user name without ``:`` (a registry's basic
    authentication joins them as ``USER:PASSWORD``). The node runtime
    checks the same when it writes the credentials for a pull
    (multinode_runtime/image_registry.py)."""
    if not isinstance(value, Mapping) or set(value) != set(REGISTRY_CREDENTIAL_KEYS):
        return False
    username, password = value["username"], value["password"]
    return (isinstance(username, str) and isinstance(password, str) and bool(username)
            and bool(password) and ":" not in username)


def registry_secret_names(secrets: Any) -> List[str]:
    """The names of the values of ``secrets`` (``fuzz_multinode_secrets``)
    that are registry credentials (``registry_credentials``): what the tasks'
    ``registry_secret_names`` option takes. Names only, never a value."""
    if not isinstance(secrets, Mapping):
        return []
    return sorted(name for name, value in secrets.items()
                  if isinstance(name, str) and registry_credentials(value))


def check_registry_secret(job: Job, registry_names: Iterable[Any]) -> None:
    """Raise FuzzfileError when the job's ``image.secret`` names a secret
    that is not among ``registry_names`` (``registry_secret_names``): its
    value is not registry credentials. The message names the job, the
    field and the reference, never the value."""
    name = image_secret_name(job)
    if name is None or name in {item for item in registry_names if isinstance(item, str)}:
        return
    raise FuzzfileError(
        "%s.image.secret: the value of %s%s in fuzz_multinode_secrets is not registry "
        "credentials: it must be a mapping of username and password (a password or token), "
        "both non-empty strings, the user name without ':'" % (job.field_path, SECRET_PREFIX, name)
    )


# $NAME or ${NAME}, as an argument expands it (job_spec.expand).
_ARGUMENT_REFERENCE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


# fuzz_multinode_secret_arguments: whether an argument may expand a
# secret:// env value (allow: with a warning) or not (refuse).
SECRET_ARGUMENTS = ("allow", "refuse")


def secret_arguments(job: Job) -> List[Tuple[str, List[str]]]:
    """``[(field, [env keys])]`` of each ``command`` or ``args`` entry that
    expands ``secret://`` env values (``command[2]``, ``args[0]``)."""
    secret_keys = set(job.secret_env)
    if not secret_keys:
        return []
    fields = [("command[%d]" % i, word) for i, word in enumerate(job.command or [])]
    fields += [("args[%d]" % i, word) for i, word in enumerate(job.args)]
    found = []
    for field, word in fields:
        keys = [key for key in (m.group(1) or m.group(2) for m in _ARGUMENT_REFERENCE.finditer(word))
                if key in secret_keys]
        if keys:
            found.append((field, sorted(set(keys), key=keys.index)))
    return found


def check_secret_arguments(job: Job, policy: str = "allow") -> List[str]:
    """A warning for each argument that expands a ``secret://`` env value
    (``secret_arguments``): runs live in PID namespaces of their own, so
    other jobs cannot see a rank's command line, but users logged in on the
    node's host can (``ps``). With ``policy`` ``refuse``
    (fuzz_multinode_secret_arguments) FuzzfileError names the first one."""
    if policy not in SECRET_ARGUMENTS:
        raise FuzzfileError("secret_arguments (fuzz_multinode_secret_arguments): must be allow or refuse, "
                            "got %s" % _show(policy))
    warnings = []
    for field, keys in secret_arguments(job):
        if policy == "refuse":
            raise FuzzfileError(
                "%s.%s: expands a secret:// env value, and every user of a node can read a "
                "process's command line (ps); read the secret from the job's environment instead "
                "(fuzz_multinode_secret_arguments: refuse)" % (job.field_path, field))
        warnings.append(
            "%s.%s: expands the secret:// env value %s: users logged in on the job's nodes can read "
            "it in the rank's command line (ps); other jobs cannot" % (job.field_path, field, ", ".join(keys)))
    return warnings


def admit(
    job: Job,
    secret_names: Optional[Iterable[Any]] = None,
    registry_secret_names: Optional[Iterable[Any]] = None,
    secret_arguments_policy: str = "allow",
) -> Job:
    """The run policy's gate, applied once to each job of a run: raise
    FuzzfileError unless its host names fit and it can run here
    (``check_rank_names``, ``require_runnable``), no argument expands a
    secret when ``secret_arguments_policy`` is ``refuse``
    (``check_secret_arguments``; its warnings are the caller's to show), when ``secret_names`` is given,
    every secret it references is among them (``check_secrets``) and, when
    ``registry_secret_names`` is given, its ``image.secret`` is among those
    (``check_registry_secret``)."""
    check_rank_names(job)
    require_runnable(job)
    check_secret_arguments(job, secret_arguments_policy)
    if secret_names is not None:
        check_secrets(job, secret_names)
    if registry_secret_names is not None:
        check_registry_secret(job, registry_secret_names)
    return job


def admission(
    job: Job,
    secret_names: Optional[Iterable[Any]] = None,
    registry_secret_names: Optional[Iterable[Any]] = None,
) -> Dict[str, Any]:
    """The record of ``admit(job, secret_names, registry_secret_names)``
    having passed, for the job's JSON form: the digest of the job admitted,
    and the names its references were checked against (None: not checked)."""
    return {"job": _digest(job), "secret_names": _names(secret_names),
            "registry_secret_names": _names(registry_secret_names)}


def admit_once(
    job: Job,
    record: Any,
    secret_names: Optional[Iterable[Any]] = None,
    registry_secret_names: Optional[Iterable[Any]] = None,
) -> Job:
    """``admit``, unless ``record`` (``admission``) shows that this very job
    was admitted already in this run; then only references not checked yet
    are: when the names given lack a name the admission had, or it had none.
    A job changed since its admission, or without a record, is admitted."""
    if not isinstance(record, Mapping) or record.get("job") != _digest(job):
        return admit(job, secret_names, registry_secret_names)
    for given, checked, check in (
        (secret_names, record.get("secret_names"), check_secrets),
        (registry_secret_names, record.get("registry_secret_names"), check_registry_secret),
    ):
        names = _names(given)
        if names is not None and (not isinstance(checked, list) or not set(checked) <= set(names)):
            check(job, names)
    return job


def _names(names: Optional[Iterable[Any]]) -> Optional[List[str]]:
    return None if names is None else sorted({name for name in names if isinstance(name, str)})


def _digest(job: Job) -> str:
    return hashlib.sha256(json.dumps(job.to_dict(), sort_keys=True).encode()).hexdigest()
