# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Fuzzfile model: parse, validate and normalize a Fuzzball workflow.

Pure Python (standard library and PyYAML); it does not import Ansible, so unit
tests use it directly and modules import it as module_utils.

Entry points:

- ``parse_workflow(text)`` -> ``Workflow``: one YAML document, validated
  strictly (unknown keys are errors, as in the vendor's API);
- ``select_job(workflow, name)`` -> ``Job``;
- ``require_generic(job)``: the runner's gate (only ``generic`` multinode jobs
  and plain single-node jobs run);
- ``Job.to_dict()`` / ``Job.from_dict()``: the JSON form passed between
  modules.

Every bad input raises ``FuzzfileError`` whose message starts with the path of
the offending field (``jobs.solve.multinode.nodes: must be an integer >= 1,
got 0``) or, for YAML errors, with the position (``line 4, column 3: ...``).

Keys the reference documents but this collection does not execute yet
(mounts, depends-on, policy, task arrays, ...) are accepted after a container
type check and recorded as human-readable notes in ``Job.unsupported`` /
``Workflow.unsupported`` so that callers can warn.

YAML dialect: PyYAML's safe loader with three changes that bring it closer to
the YAML 1.2 parser the vendor uses: only ``true``/``false`` (any case
variant) are booleans (``yes``, ``no``, ``on``, ``off`` stay strings), dates
are not converted (they stay strings), and a key repeated in one mapping is an
error instead of silently replacing the earlier one.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from fractions import Fraction
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

try:
    import yaml
except ImportError:  # pragma: no cover - reported by the modules
    yaml = None  # type: ignore[assignment]
    HAS_YAML = False
else:
    HAS_YAML = True

__all__ = [
    "AFFINITIES",
    "FuzzfileError",
    "HAS_YAML",
    "IMPLEMENTATIONS",
    "Job",
    "VERSIONS",
    "Workflow",
    "parse_memory_size",
    "parse_workflow",
    "require_generic",
    "select_job",
    "validate_job_name",
]

VERSIONS = ("v1", "v4")
IMPLEMENTATIONS = ("ompi", "openmpi", "mpich", "gasnet", "generic")
AFFINITIES = ("NUMA", "SOCKET", "CORE")

JOB_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
JOB_NAME_MAX = 63  # one DNS label
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "ki": 2**10,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mi": 2**20,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gi": 2**30,
    "gib": 2**30,
    "t": 10**12,
    "tb": 10**12,
    "ti": 2**40,
    "tib": 2**40,
    "p": 10**15,
    "pb": 10**15,
    "pi": 2**50,
    "pib": 2**50,
    "e": 10**18,
    "eb": 10**18,
    "ei": 2**60,
    "eib": 2**60,
}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*\Z")
_SIZE_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1  # counts (nodes, cores, procs-per-node)


class FuzzfileError(ValueError):
    """A Fuzzfile (or a job passed between modules) is invalid.

    The message names the field path and the problem.
    """


# --------------------------------------------------------------------------
# YAML loading


if HAS_YAML:

    class _Loader(yaml.SafeLoader):  # type: ignore[name-defined,misc]
        """SafeLoader: YAML 1.2 booleans, no timestamps, no duplicate keys."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _value in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                    except TypeError:  # unhashable: reported by PyYAML
                        continue
                    if duplicate:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping",
                            node.start_mark,
                            "found duplicate key %r" % (key,),
                            key_node.start_mark,
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    _Loader.yaml_implicit_resolvers = {
        first: [
            (tag, regexp)
            for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
        ]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )


def _line_col(text: str, position: int) -> Tuple[int, int]:
    before = text[:position]
    line = before.count("\n") + 1
    column = position - (before.rfind("\n") + 1) + 1
    return line, column


def _yaml_error(exc: Exception, text: str) -> FuzzfileError:
    """Turn a PyYAML exception into a FuzzfileError naming line and column."""
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _line_col(text, exc.position)
        char = exc.character
        shown = "#x%04x" % char if isinstance(char, int) else repr(char)
        return FuzzfileError(
            "line %d, column %d: invalid YAML: unacceptable character %s: %s"
            % (line, column, shown, exc.reason)
        )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem is None:
        detail = str(exc).strip() or type(exc).__name__
    else:
        detail = problem
        if context and context.startswith("while "):
            detail = "%s (%s)" % (problem, context)
        elif context:
            detail = "%s, %s" % (context, problem)
    if "'\\t'" in detail:
        detail += "; YAML does not allow tabs for indentation"
    if mark is None:
        return FuzzfileError("invalid YAML: %s" % detail)
    return FuzzfileError(
        "line %d, column %d: invalid YAML: %s" % (mark.line + 1, mark.column + 1, detail)
    )


def _load_yaml(text: str) -> Any:
    if not HAS_YAML:
        raise FuzzfileError("the PyYAML package is required to read Fuzzfiles")
    if not isinstance(text, str):
        raise FuzzfileError("expected the Fuzzfile as text, got %s" % type(text).__name__)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text) from None
    except RecursionError:
        raise FuzzfileError("invalid YAML: the document is nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # PyYAML constructors can raise these for explicitly tagged values
        # (e.g. an impossible !!timestamp).
        raise FuzzfileError("invalid YAML value: %s" % exc) from None


# --------------------------------------------------------------------------
# small validators; each takes the value and its path and returns it normalized


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


def _string_list(value: Any, path: str, *, nonempty: bool = False) -> List[str]:
    if not isinstance(value, (list, tuple)):
        raise FuzzfileError("%s: must be a list of strings, got %s" % (path, _show(value)))
    if nonempty and not value:
        raise FuzzfileError("%s: must not be empty" % path)
    return [_string(item, "%s[%d]" % (path, index)) for index, item in enumerate(value)]


def _positive_int(value: Any, path: str, maximum: int = _INT_MAX) -> int:
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


def validate_job_name(name: Any, path: str = "jobs") -> str:
    """Check that a job name can become host names ``<name>-<rank>``."""
    if not isinstance(name, str):
        raise FuzzfileError("%s: job names must be strings, got %s" % (path, _show(name)))
    if not JOB_NAME_RE.match(name) or len(name) > JOB_NAME_MAX:
        raise FuzzfileError(
            "%s: invalid job name %r: use at most %d lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (the name becomes the ranks' "
            "host names)" % (path, name, JOB_NAME_MAX)
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


def parse_memory_size(value: Any, path: str = "memory.size") -> int:
    """Parse a memory size (``1GB``, ``512MiB``, ``0.5GiB``, ``1024``) to bytes.

    Units are case-insensitive: B; decimal K/KB, M/MB, G/GB, T/TB, P/PB,
    E/EB; binary Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB, Pi/PiB, Ei/EiB. No unit (or a
    YAML integer) means bytes. Fractions of a byte are rounded down; the
    result must be at least one byte.
    """
    if _is_int(value):
        number, unit = Fraction(value), ""
    elif isinstance(value, str) and len(value) <= 64:
        match = _SIZE_RE.match(value)
        if not match or match.group(2).lower() not in _UNITS:
            raise FuzzfileError(
                "%s: must be a size such as 1GB, 512MiB or 0.5GiB, got %s" % (path, _show(value))
            )
        number, unit = Fraction(match.group(1)), match.group(2).lower()
    else:
        raise FuzzfileError(
            "%s: must be a size such as 1GB, 512MiB or 0.5GiB, got %s" % (path, _show(value))
        )
    size = int(number * _UNITS[unit])
    if size < 1:
        raise FuzzfileError("%s: must be at least 1 byte, got %s" % (path, _show(value)))
    if size > _SIZE_MAX:
        raise FuzzfileError("%s: too large, got %s" % (path, _show(value)))
    return size


# --------------------------------------------------------------------------
# the model


@dataclasses.dataclass
class Job:
    """One job of a workflow, normalized.

    ``env`` is a list of ``(key, value)`` pairs in the Fuzzfile's order; a key
    given twice keeps its first position and its last value. A job without a
    ``multinode`` section has ``nodes == 1`` and ``implementation is None``.
    """

    name: str
    image_uri: str
    command: Optional[List[str]] = None
    script: Optional[str] = None
    args: List[str] = dataclasses.field(default_factory=list)
    env: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    cwd: Optional[str] = None
    cores: Optional[int] = None
    affinity: Optional[str] = None
    memory_bytes: Optional[int] = None
    nodes: int = 1
    implementation: Optional[str] = None
    procs_per_node: Optional[int] = None
    unsupported: List[str] = dataclasses.field(default_factory=list)

    @property
    def slots_per_node(self) -> int:
        """``procs-per-node`` when set, else ``cpu.cores``, else 1."""
        return self.procs_per_node or self.cores or 1

    @property
    def multinode(self) -> bool:
        return self.implementation is not None

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form; ``env`` becomes a list of ``[key, value]``.

        ``slots_per_node`` is included for convenience; ``from_dict`` ignores
        it (it is derived).
        """
        return {
            "name": self.name,
            "image_uri": self.image_uri,
            "command": list(self.command) if self.command is not None else None,
            "script": self.script,
            "args": list(self.args),
            "env": [[key, value] for key, value in self.env],
            "cwd": self.cwd,
            "cores": self.cores,
            "affinity": self.affinity,
            "memory_bytes": self.memory_bytes,
            "nodes": self.nodes,
            "implementation": self.implementation,
            "procs_per_node": self.procs_per_node,
            "slots_per_node": self.slots_per_node,
            "unsupported": list(self.unsupported),
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "job") -> "Job":
        """Rebuild a Job from ``to_dict()`` output, validating every field."""
        data = _mapping(data, path)
        fields = [f.name for f in dataclasses.fields(cls)]
        _check_keys(data, path, fields + ["slots_per_node"])

        def get(key: str, default: Any = None) -> Any:
            return data.get(key, default)

        name = validate_job_name(get("name"), _join(path, "name"))
        image_uri = _string(get("image_uri"), _join(path, "image_uri"), nonempty=True)
        command = get("command")
        script = get("script")
        if command is not None:
            command = _string_list(command, _join(path, "command"), nonempty=True)
        if script is not None:
            script = _string(script, _join(path, "script"), nonempty=True)
        if (command is None) == (script is None):
            raise FuzzfileError("%s: needs exactly one of command and script" % path)
        args = _string_list(get("args", []), _join(path, "args"))

        env_path = _join(path, "env")
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
            cwd = _abs_path(cwd, _join(path, "cwd"))
        cores = get("cores")
        if cores is not None:
            cores = _positive_int(cores, _join(path, "cores"))
        affinity = get("affinity")
        if affinity is not None:
            affinity = _choice(affinity, _join(path, "affinity"), AFFINITIES)
        memory_bytes = get("memory_bytes")
        if memory_bytes is not None:
            memory_bytes = _positive_int(memory_bytes, _join(path, "memory_bytes"), _SIZE_MAX)
        nodes = _positive_int(get("nodes", 1), _join(path, "nodes"))
        implementation = get("implementation")
        if implementation is not None:
            implementation = _choice(implementation, _join(path, "implementation"), IMPLEMENTATIONS)
        procs = get("procs_per_node")
        if procs is not None:
            procs = _positive_int(procs, _join(path, "procs_per_node"))
        if implementation is None and (nodes != 1 or procs is not None):
            raise FuzzfileError(
                "%s: a job without a multinode implementation runs on 1 node without "
                "procs_per_node, got nodes=%s, procs_per_node=%s" % (path, nodes, _show(procs))
            )
        unsupported = _string_list(get("unsupported", []), _join(path, "unsupported"))
        return cls(
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
        )


@dataclasses.dataclass
class Workflow:
    """A parsed Fuzzfile: its version, its jobs by name (in file order),
    the names of its services (not run yet) and notes on ignored features."""

    version: str
    jobs: Dict[str, Job]
    services: List[str] = dataclasses.field(default_factory=list)
    unsupported: List[str] = dataclasses.field(default_factory=list)
    warnings: List[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "version": self.version,
            "jobs": list(self.jobs),
            "services": list(self.services),
            "unsupported": list(self.unsupported),
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------
# parsing

TOP_KEYS = ("version", "jobs", "services", "files", "defaults", "annotations", "volumes")
JOB_KEYS = (
    "name",
    "image",
    "command",
    "script",
    "args",
    "env",
    "cwd",
    "resource",
    "multinode",
    "mounts",
    "files",
    "requires",
    "depends-on",
    "policy",
    "task-array",
    "network",
)
IMAGE_KEYS = ("uri", "secret")
RESOURCE_KEYS = ("cpu", "memory", "devices", "exclusive", "annotations")
CPU_KEYS = ("cores", "affinity", "threads", "sockets")
MEMORY_KEYS = ("size", "by-core")
MULTINODE_KEYS = ("nodes", "implementation", "procs-per-node")

_TOP_LOOSE = {
    "files": "workflow files (file:// contents) are not supported yet; ignored",
    "defaults": "workflow defaults (env, mounts, resource) are not applied yet; ignored",
    "annotations": "workflow annotations are not supported yet; ignored",
    "volumes": "volumes are not supported yet; ignored",
}
# key -> (expected type, article + type name, note)
_JOB_LOOSE = {
    "mounts": (Mapping, "a mapping", "volume mounts are not supported yet; ignored"),
    "files": (Mapping, "a mapping", "file injection is not supported yet; ignored"),
    "requires": (
        list,
        "a list",
        "job dependencies are not supported yet; ignored (the job runs on its own)",
    ),
    "depends-on": (
        list,
        "a list",
        "job dependencies are not supported yet; ignored (the job runs on its own)",
    ),
    "policy": (
        Mapping,
        "a mapping",
        "policies (timeout, retry, restart) are not supported yet; ignored",
    ),
    "task-array": (
        Mapping,
        "a mapping",
        "task arrays are not supported yet; ignored (the job runs once)",
    ),
    "network": (Mapping, "a mapping", "network settings are not supported yet; ignored"),
}
_RESOURCE_LOOSE = {
    "devices": (Mapping, "a mapping", "device requests are not supported yet; ignored"),
    "exclusive": (bool, "a boolean", "exclusive node use is not supported yet; ignored"),
    "annotations": (
        Mapping,
        "a mapping",
        "resource annotations are not supported yet; ignored",
    ),
}
_CPU_LOOSE = {
    "threads": (bool, "a boolean", "hardware threads selection is not supported yet; ignored"),
    "sockets": (int, "an integer", "socket counts are not supported yet; ignored"),
}
_MEMORY_LOOSE = {
    "by-core": (bool, "a boolean", "per-core memory is not supported yet; ignored"),
}


def _loose(
    data: Mapping[Any, Any],
    path: str,
    table: Mapping[str, Tuple[Any, str, str]],
    notes: List[str],
) -> None:
    """Type-check accepted-but-ignored keys and record a note for each."""
    for key, (kind, what, note) in table.items():
        value = data.get(key)
        if value is None:
            continue
        key_path = _join(path, key)
        ok = isinstance(value, kind)
        if kind is int:
            ok = _is_int(value)
        if not ok:
            raise FuzzfileError("%s: must be %s, got %s" % (key_path, what, _show(value)))
        notes.append("%s: %s" % (key_path, note))


def _section(data: Mapping[Any, Any], key: str, path: str) -> Optional[Mapping[Any, Any]]:
    """An optional sub-mapping; null counts as absent."""
    value = data.get(key)
    if value is None:
        return None
    return _mapping(value, _join(path, key))


def _parse_job(name: str, data: Any, path: str) -> Job:
    data = _mapping(data, path)
    _check_keys(data, path, JOB_KEYS)
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
    if image.get("secret") is not None:
        _string(image["secret"], _join(image_path, "secret"))
        notes.append(
            "%s: registry secrets are not supported yet; ignored" % _join(image_path, "secret")
        )

    command = None
    script = None
    if data.get("command") is not None:
        command = _string_list(data["command"], _join(path, "command"), nonempty=True)
    if data.get("script") is not None:
        script = _string(data["script"], _join(path, "script"), nonempty=True)
    if command is not None and script is not None:
        raise FuzzfileError("%s: has both command and script; exactly one is allowed" % path)
    if command is None and script is None:
        raise FuzzfileError("%s: needs a command or a script (exactly one)" % path)

    args: List[str] = []
    if data.get("args") is not None:
        args = _string_list(data["args"], _join(path, "args"))

    env: List[Tuple[str, str]] = []
    env_path = _join(path, "env")
    if data.get("env") is not None:
        raw_env = data["env"]
        if not isinstance(raw_env, list):
            raise FuzzfileError(
                "%s: must be a list of KEY=VALUE strings, got %s" % (env_path, _show(raw_env))
            )
        for index, item in enumerate(raw_env):
            item_path = "%s[%d]" % (env_path, index)
            key, value = _env_entry(item, item_path)
            if value.startswith("secret://"):
                notes.append(
                    "%s: %s: secret references are not resolved yet; the literal text is used"
                    % (item_path, key)
                )
            env.append((key, value))
    env = _dedupe_env(env)

    cwd = None
    if data.get("cwd") is not None:
        cwd = _abs_path(data["cwd"], _join(path, "cwd"))

    cores = affinity = memory_bytes = None
    resource_path = _join(path, "resource")
    resource = _section(data, "resource", path)
    if resource is not None:
        _check_keys(resource, resource_path, RESOURCE_KEYS)
        cpu_path = _join(resource_path, "cpu")
        cpu = _section(resource, "cpu", resource_path)
        if cpu is not None:
            _check_keys(cpu, cpu_path, CPU_KEYS)
            if cpu.get("cores") is not None:
                cores = _positive_int(cpu["cores"], _join(cpu_path, "cores"))
            if cpu.get("affinity") is not None:
                affinity = _choice(cpu["affinity"], _join(cpu_path, "affinity"), AFFINITIES)
            _loose(cpu, cpu_path, _CPU_LOOSE, notes)
        memory_path = _join(resource_path, "memory")
        memory = _section(resource, "memory", resource_path)
        if memory is not None:
            _check_keys(memory, memory_path, MEMORY_KEYS)
            if memory.get("size") is not None:
                memory_bytes = parse_memory_size(memory["size"], _join(memory_path, "size"))
            _loose(memory, memory_path, _MEMORY_LOOSE, notes)
        _loose(resource, resource_path, _RESOURCE_LOOSE, notes)

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

    _loose(data, path, _JOB_LOOSE, notes)

    return Job(
        name=name,
        image_uri=image_uri,
        command=command,
        script=script,
        args=args,
        env=env,
        cwd=cwd,
        cores=cores,
        affinity=affinity,
        memory_bytes=memory_bytes,
        nodes=nodes,
        implementation=implementation,
        procs_per_node=procs_per_node,
        unsupported=notes,
    )


def _expand_indentation_tabs(text: str) -> Tuple[str, List[int]]:
    """Expand tabs in each line's leading whitespace to 8-column tab stops, as
    an editor shows them; returns the text and the numbers of changed lines."""
    lines = text.split("\n")
    changed = []
    for number, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            lines[number] = indent.expandtabs(8) + line[len(indent):]
            changed.append(number + 1)
    return "\n".join(lines), changed


def _load_fuzzfile_yaml(text: str) -> Tuple[Any, List[str]]:
    """Load strictly; if that fails and tabs indent some lines (YAML forbids
    them there), retry with those tabs expanded, and say so. The published
    script example of generic-multinode.md has such a line."""
    try:
        return _load_yaml(text), []
    except FuzzfileError as strict_error:
        repaired, lines = _expand_indentation_tabs(text if isinstance(text, str) else "")
        if not lines:
            raise
        try:
            data = _load_yaml(repaired)
        except FuzzfileError:
            raise strict_error from None
    where = "line %s" % lines[0] if len(lines) == 1 else "lines %s" % ", ".join(map(str, lines))
    return data, [
        "%s: tabs in the indentation were read as spaces to the next multiple of 8 "
        "columns; YAML forbids tabs there and strict parsers reject this file" % where
    ]


def parse_workflow(text: str) -> Workflow:
    """Parse and validate a Fuzzfile (one YAML document)."""
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

    notes: List[str] = []
    services: List[str] = []
    if data.get("services") is not None:
        raw_services = _mapping(data["services"], "services")
        services = [str(name) for name in raw_services]
        if services:
            notes.append(
                "services: services are not supported yet; ignored (%s)" % ", ".join(services)
            )
    for key, note in _TOP_LOOSE.items():
        if data.get(key) is not None:
            _mapping(data[key], key)
            notes.append("%s: %s" % (key, note))

    if data.get("jobs") is None:
        extra = " (services are not supported yet)" if services else ""
        raise FuzzfileError("jobs: required: a mapping of job names to jobs%s" % extra)
    raw_jobs = _mapping(data["jobs"], "jobs", "a mapping of job names to jobs")
    if not raw_jobs:
        raise FuzzfileError("jobs: must contain at least one job")
    jobs: Dict[str, Job] = {}
    for name, job_data in raw_jobs.items():
        validate_job_name(name, "jobs")
        jobs[name] = _parse_job(name, job_data, _join("jobs", name))
    return Workflow(version=version, jobs=jobs, services=services, unsupported=notes,
                    warnings=warnings)


def select_job(workflow: Workflow, name: Optional[str] = None) -> Job:
    """Pick a job by name; without a name the workflow must have exactly one."""
    names = list(workflow.jobs)
    if name is None:
        if len(names) == 1:
            return workflow.jobs[names[0]]
        raise FuzzfileError(
            "jobs: the workflow has %d jobs; name the one to run: %s"
            % (len(names), ", ".join(names))
        )
    if name in workflow.jobs:
        return workflow.jobs[name]
    extra = ""
    if name in workflow.services:
        extra = " (%r is a service; services are not supported yet)" % name
    raise FuzzfileError(
        "jobs: no job named %s%s; jobs: %s" % (_show(name), extra, ", ".join(names))
    )


def require_generic(job: Job) -> Job:
    """The runner's gate: a plain job or a ``generic`` multinode job."""
    if job.implementation not in (None, "generic"):
        raise FuzzfileError(
            "jobs.%s.multinode.implementation: %r is not supported yet; only 'generic' "
            "multinode jobs (or jobs without a multinode section) can run"
            % (job.name, job.implementation)
        )
    return job
