# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Fuzzfile model: parse, validate and normalize a Fuzzball workflow.

Pure Python (standard library and PyYAML); it does not import Ansible, so unit
tests use it directly and modules import it as module_utils.

Entry points:

- ``parse_workflow(text)`` -> ``Workflow``: one YAML document, validated
  strictly (unknown keys are errors, as in the vendor's API) and normalized:
  defaults merged into every job and service, dependencies checked (no
  dangling names, no cycles);
- ``Workflow.order`` / ``Workflow.waves``: the dependency DAG in execution
  order (see ``dependency_order``);
- ``select_job(workflow, name)`` -> ``Job``;
- ``require_runnable(job)``: the runner's gate (every implementation but
  ``gasnet`` runs);
- ``Job.to_dict()`` / ``Job.from_dict()`` and ``Workflow.to_dict()`` /
  ``Workflow.from_dict()``: the JSON forms passed between modules;
- ``parse_go_duration`` and ``parse_memory_size``: the value syntaxes.

Every bad input raises ``FuzzfileError`` whose message starts with the path of
the offending field (``jobs.solve.multinode.nodes: must be an integer >= 1,
got 0``) or, for YAML errors, with the position (``line 4, column 3: ...``).
A dependency cycle is reported as ``jobs: dependency cycle: a -> b -> a``.

Normalization (the reference's section 4 and 5):

- ``env``: ``defaults.env`` (v4), then ``defaults.job.env`` (for a service
  ``defaults.service.env``, v4), then the job's own ``env``; per key, a later
  value wins and the key keeps the position of its first use;
- ``resource``, ``policy`` and ``mounts`` merge the same way, per key and
  deeply (``cpu.cores`` can come from the defaults and ``memory.size`` from
  the job; ``devices`` and ``annotations`` merge per name); ``policy`` exists
  for jobs only (``defaults.job.policy``);
- both mount forms (v1 ``{volume: {location: /path}}``, v4
  ``{/path: {volume: name}}``) become ``{/path: volume}``; each Fuzzfile
  uses its version's form;
- ``requires`` (deprecated) is read as ``depends-on`` with status
  ``FINISHED``, and is ignored when ``depends-on`` is set; both cases add a
  warning. Statuses are case-insensitive and stored upper-case.
- ``policy.timeout.execute`` becomes ``Job.timeout_seconds``; a zero
  duration means no timeout.

Features the reference documents but this collection does not execute yet
are validated like the rest and recorded as short notes in
``Job.unsupported`` (features of a job) or ``Workflow.unsupported`` (images,
services, volumes, annotations, and features set in ``defaults``) so that
callers can warn; nothing is dropped silently. Dependencies, timeouts, task
arrays, ``cpu.cores``/``affinity``, ``memory``, ``secret://`` env values
(listed in ``Job.secret_env``), job ``files`` and ``cwd`` are part of the
model for the runner and are not notes.

YAML dialect: PyYAML's safe loader with three changes that bring it closer to
the YAML 1.2 parser the vendor uses: only ``true``/``false`` (any case
variant) are booleans (``yes``, ``no``, ``on``, ``off`` stay strings), dates
are not converted (they stay strings), and a key repeated in one mapping is an
error instead of silently replacing the earlier one.
"""

from __future__ import annotations

import dataclasses
import difflib
import heapq
import math
import re
from fractions import Fraction
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
)

try:
    import yaml
except ImportError:  # pragma: no cover - reported by the modules
    yaml = None  # type: ignore[assignment]
    HAS_YAML = False
else:
    HAS_YAML = True

__all__ = [
    "AFFINITIES",
    "DEPENDENCY_STATUSES",
    "Dependency",
    "FuzzfileError",
    "HAS_YAML",
    "IMPLEMENTATIONS",
    "Job",
    "RESTART_POLICIES",
    "TASK_ARRAY_MAX_CONCURRENCY",
    "TaskArray",
    "VERSIONS",
    "not_executed_yet",
    "Workflow",
    "dependency_order",
    "parse_go_duration",
    "parse_memory_size",
    "parse_workflow",
    "require_runnable",
    "select_job",
    "select_run",
    "validate_job_name",
]

VERSIONS = ("v1", "v4")
IMPLEMENTATIONS = ("ompi", "openmpi", "mpich", "gasnet", "generic")
AFFINITIES = ("NUMA", "SOCKET", "CORE")
DEPENDENCY_STATUSES = ("FINISHED", "RUNNING")
RESTART_POLICIES = ("on-node-fault", "never")
TASK_ARRAY_MAX_CONCURRENCY = 200
PORT_MAX = 65535
KINDS = ("job", "service")

JOB_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
JOB_NAME_MAX = 63  # one DNS label
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SECRET_PREFIX = "secret://"
FILE_PREFIX = "file://"
VOLUME_PREFIX = "volume://"

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

# Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ or "0"
_DURATION_UNITS = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # MICRO SIGN
    "\u03bcs": 10**3,  # GREEK SMALL LETTER MU
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_DURATION_PART_RE = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
_DURATION_MAX_NS = 2**63 - 1
_DURATION_HINT = "must be a duration such as 2h, 10m0s, 90s or 1h30m"


class FuzzfileError(ValueError):
    """A Fuzzfile (or a job passed between modules) is invalid.

    The message names the field path and the problem.
    """


# --------------------------------------------------------------------------
# YAML loading


if HAS_YAML:

    class _Loader(yaml.SafeLoader):
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



def parse_go_duration(value: Any, path: str = "duration") -> int:
    """Parse a Go duration (``time.ParseDuration``) to nanoseconds.

    A duration is a sequence of decimal numbers, each with an optional
    fraction and a required unit (``ns``, ``us`` or ``µs``, ``ms``, ``s``,
    ``m``, ``h``): ``2h``, ``10m0s``, ``90s``, ``1h30m``, ``1.5h``, ``300ms``.
    A bare ``0`` (also a YAML integer 0) is zero. Negative durations are
    rejected (a timeout cannot be negative); like Go, fractions of a
    nanosecond are dropped and the total must fit an int64.
    """

    def bad(reason: str) -> FuzzfileError:
        return FuzzfileError(
            "%s: %s, got %s (%s)" % (path, _DURATION_HINT, _show(value), reason)
        )

    if _is_int(value):
        if value == 0:
            return 0
        raise bad("missing unit; units are ns, us, ms, s, m, h")
    if not isinstance(value, str):
        raise FuzzfileError("%s: %s, got %s" % (path, _DURATION_HINT, _show(value)))
    text = value
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise bad("no number")
    total = 0
    position = 0
    while position < len(text):
        match = _DURATION_PART_RE.match(text, position)
        assert match is not None  # the pattern matches the empty string
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction:
            raise bad("expected a number at %r" % text[position:][:20])
        if not unit:
            raise bad("missing unit after %r; units are ns, us, ms, s, m, h" % match.group(0))
        if unit not in _DURATION_UNITS:
            raise bad("unknown unit %r; units are ns, us, ms, s, m, h" % unit[:20])
        whole = whole.lstrip("0")
        if len(whole) > 20:
            raise bad("too large")
        scale = _DURATION_UNITS[unit]
        part = int(whole or "0") * scale
        if fraction:
            digits = fraction[:30]
            part += int(digits) * scale // 10 ** len(digits)
        total += part
        if total > _DURATION_MAX_NS + 1:
            raise bad("too large")
        position = match.end()
    if negative and total:
        raise bad("must not be negative")
    if total > _DURATION_MAX_NS:
        raise bad("too large")
    return total


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise FuzzfileError("%s: must be a boolean, got %s" % (path, _show(value)))
    return value


def _int_at_least(value: Any, path: str, minimum: int, maximum: int = _INT_MAX) -> int:
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


# --------------------------------------------------------------------------
# the model


class TaskArray(NamedTuple):
    """``task-array``: tasks ``start`` to ``end`` (inclusive), at most
    ``concurrency`` at a time (``None``: not limited by the Fuzzfile)."""

    start: int
    end: int
    concurrency: Optional[int] = None

    @property
    def tasks(self) -> int:
        return self.end - self.start + 1


class Dependency(NamedTuple):
    """One ``depends-on`` entry: the job or service ``name`` must reach
    ``status`` (``FINISHED``, or ``RUNNING`` for a service)."""

    name: str
    status: str = "FINISHED"


# Job.to_dict() keys computed from other fields; from_dict() ignores them.
DERIVED_JOB_KEYS = ("slots_per_node", "total_slots", "tasks", "max_hosts", "secret_env")


@dataclasses.dataclass
class Job:
    """One job (or service) of a workflow, normalized: defaults merged.

    ``env`` is a list of ``(key, value)`` pairs in the Fuzzfile's order; a key
    given twice keeps its first position and its last value. A job without a
    ``multinode`` section has ``nodes == 1`` and ``implementation is None``.
    ``nodes`` is the number of ranks (host names ``<name>-0`` ...).

    Fields added for workflows (all have defaults, so older job dicts still
    load): ``kind`` (``job`` or ``service``), ``depends_on`` (``Dependency``
    list), ``timeout_seconds`` (``policy.timeout.execute``; ``None``: no
    timeout), ``task_array`` (``TaskArray`` or ``None``), ``files``
    (container path -> name of a top-level ``files`` entry), ``mounts``
    (container path -> volume name), ``memory_by_core`` (``memory.size`` is
    per core), and the features recorded in ``unsupported``:
    ``image_secret``, ``cpu_threads``, ``cpu_sockets``, ``devices``,
    ``exclusive``, ``resource_annotations``, ``retry_attempts``,
    ``restart``, ``network_isolated``, ``expose_tcp``, ``expose_udp`` and, for
    services, ``persist``.
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
    kind: str = "job"
    depends_on: List[Dependency] = dataclasses.field(default_factory=list)
    timeout_seconds: Optional[float] = None
    task_array: Optional[TaskArray] = None
    files: Dict[str, str] = dataclasses.field(default_factory=dict)
    mounts: Dict[str, str] = dataclasses.field(default_factory=dict)
    memory_by_core: bool = False
    image_secret: Optional[str] = None
    cpu_threads: Optional[bool] = None
    cpu_sockets: Optional[int] = None
    devices: Dict[str, int] = dataclasses.field(default_factory=dict)
    exclusive: bool = False
    resource_annotations: Dict[str, str] = dataclasses.field(default_factory=dict)
    retry_attempts: Optional[int] = None
    restart: Optional[str] = None
    network_isolated: bool = False
    expose_tcp: List[int] = dataclasses.field(default_factory=list)
    expose_udp: List[int] = dataclasses.field(default_factory=list)
    persist: Optional[bool] = None

    @property
    def slots_per_node(self) -> int:
        """``procs-per-node`` when set, else ``cpu.cores``, else 1."""
        return self.procs_per_node or self.cores or 1

    @property
    def total_slots(self) -> int:
        """``nodes`` x ``slots_per_node`` (``MULTINODE_TOTAL_SLOTS``)."""
        return self.nodes * self.slots_per_node

    @property
    def tasks(self) -> int:
        """Number of task-array tasks; 1 for a job without a task array."""
        return self.task_array.tasks if self.task_array is not None else 1

    @property
    def max_hosts(self) -> int:
        """The most hosts the job can use at once: ``nodes``, or for a task
        array its tasks (at most ``concurrency`` of them), one per host."""
        if self.task_array is None:
            return self.nodes
        return min(self.tasks, self.task_array.concurrency or self.tasks)

    @property
    def secret_env(self) -> List[str]:
        """Keys of ``env`` whose value is a ``secret://`` reference."""
        return [key for key, value in self.env if value.startswith(SECRET_PREFIX)]

    @property
    def multinode(self) -> bool:
        return self.implementation is not None

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form; ``env`` becomes a list of ``[key, value]``,
        ``depends_on`` a list of ``{name, status}``, ``task_array`` a
        ``{start, end, concurrency}`` mapping.

        ``slots_per_node``, ``total_slots``, ``tasks`` and ``secret_env`` are
        included for convenience; ``from_dict`` ignores them (they are
        derived).
        """
        task_array = None
        if self.task_array is not None:
            task_array = {
                "start": self.task_array.start,
                "end": self.task_array.end,
                "concurrency": self.task_array.concurrency,
            }
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
            "kind": self.kind,
            "depends_on": [{"name": d.name, "status": d.status} for d in self.depends_on],
            "timeout_seconds": self.timeout_seconds,
            "task_array": task_array,
            "files": dict(self.files),
            "mounts": dict(self.mounts),
            "memory_by_core": self.memory_by_core,
            "image_secret": self.image_secret,
            "cpu_threads": self.cpu_threads,
            "cpu_sockets": self.cpu_sockets,
            "devices": dict(self.devices),
            "exclusive": self.exclusive,
            "resource_annotations": dict(self.resource_annotations),
            "retry_attempts": self.retry_attempts,
            "restart": self.restart,
            "network_isolated": self.network_isolated,
            "expose_tcp": list(self.expose_tcp),
            "expose_udp": list(self.expose_udp),
            "persist": self.persist,
            "total_slots": self.total_slots,
            "tasks": self.tasks,
            "max_hosts": self.max_hosts,
            "secret_env": self.secret_env,
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "job") -> "Job":
        """Rebuild a Job from ``to_dict()`` output, validating every field.

        Keys missing from ``data`` take their defaults, so dicts written
        before a field existed still load.
        """
        data = _mapping(data, path)
        fields = [f.name for f in dataclasses.fields(cls)]
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
            memory_bytes = _positive_int(memory_bytes, sub("memory_bytes"), _SIZE_MAX)
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
    seen = set()
    for index, dependency in enumerate(depends_on):
        if dependency.name in seen:
            raise FuzzfileError(
                "%s[%d].name: %r is listed twice" % (path, index, dependency.name)
            )
        seen.add(dependency.name)


def _task_array(start: Any, end: Any, concurrency: Any, path: str) -> TaskArray:
    if start is None:
        raise FuzzfileError("%s: required (an integer >= 0)" % _join(path, "start"))
    if end is None:
        raise FuzzfileError("%s: required (an integer >= start)" % _join(path, "end"))
    start = _int_at_least(start, _join(path, "start"), 0)
    end = _int_at_least(end, _join(path, "end"), 0)
    if end < start:
        raise FuzzfileError(
            "%s: must not be less than start (%d), got %d" % (_join(path, "end"), start, end)
        )
    if concurrency is not None:
        concurrency = _positive_int(
            concurrency, _join(path, "concurrency"), TASK_ARRAY_MAX_CONCURRENCY
        )
    return TaskArray(start, end, concurrency)


def _path_map(value: Any, path: str) -> Dict[str, str]:
    """A mapping of absolute container paths to names (from_dict)."""
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


def _devices(value: Any, path: str) -> Dict[str, int]:
    data = _mapping(value, path)
    result: Dict[str, int] = {}
    for key, count in data.items():
        if not isinstance(key, str) or not key:
            raise FuzzfileError(
                "%s: device names must be non-empty strings, got %s" % (path, _show(key))
            )
        result[key] = _positive_int(count, _join(path, key))
    return result


def _ports(value: Any, path: str) -> List[int]:
    items = _list(value, path, "a list of port numbers")
    return [_port(item, "%s[%d]" % (path, index)) for index, item in enumerate(items)]


@dataclasses.dataclass
class Workflow:
    """A parsed Fuzzfile: its version, its jobs and services by name (in file
    order, normalized), the top-level ``files`` (name -> contents), notes on
    ignored features and warnings."""

    version: str
    jobs: Dict[str, Job]
    service_defs: Dict[str, Job] = dataclasses.field(default_factory=dict)
    files: Dict[str, str] = dataclasses.field(default_factory=dict)
    unsupported: List[str] = dataclasses.field(default_factory=list)
    warnings: List[str] = dataclasses.field(default_factory=list)

    @property
    def services(self) -> List[str]:
        """Names of the services, in file order (they are not run yet)."""
        return list(self.service_defs)

    @property
    def units(self) -> Dict[str, Job]:
        """Jobs then services, in file order: the nodes of the DAG."""
        units = dict(self.jobs)
        units.update(self.service_defs)
        return units

    @property
    def order(self) -> List[str]:
        """Every job and service in a dependency order (see dependency_order)."""
        return dependency_order(_graph(self.units))[0]

    @property
    def waves(self) -> List[List[str]]:
        """Jobs and services by wave: each may start once the earlier waves
        have reached the statuses it depends on."""
        return dependency_order(_graph(self.units))[1]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-serializable form. ``jobs`` and ``services`` list the names;
        ``job_defs`` and ``service_defs`` hold each one's ``Job.to_dict()``;
        ``order`` and ``waves`` are derived (``from_dict`` ignores them)."""
        order, waves = dependency_order(_graph(self.units))
        return {
            "version": self.version,
            "jobs": list(self.jobs),
            "services": self.services,
            "unsupported": list(self.unsupported),
            "warnings": list(self.warnings),
            "files": dict(self.files),
            "order": order,
            "waves": waves,
            "job_defs": {name: job.to_dict() for name, job in self.jobs.items()},
            "service_defs": {name: svc.to_dict() for name, svc in self.service_defs.items()},
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "workflow") -> "Workflow":
        """Rebuild a Workflow from ``to_dict()`` output, validating every
        field and the dependencies again."""
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
                unit = Job.from_dict(item, item_path)
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
        workflow = cls(
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


# --------------------------------------------------------------------------
# the dependency graph


def _graph(units: Mapping[str, Job]) -> Dict[str, List[str]]:
    return {name: [d.name for d in unit.depends_on] for name, unit in units.items()}


def dependency_order(
    graph: Mapping[str, Sequence[str]], path: str = "jobs"
) -> Tuple[List[str], List[List[str]]]:
    """Order a dependency graph: ``graph`` maps each name to the names it
    depends on; the mapping's order (the Fuzzfile's) breaks ties.

    Returns ``(order, waves)``. ``order`` is the topological order that
    always takes the earliest ready name in file order. ``waves`` groups the
    names by level: wave 0 holds the names without dependencies, wave k the
    names whose deepest dependency is in wave k-1; each wave is in file
    order. Everything in a wave can run concurrently.

    A cycle raises ``FuzzfileError("jobs: dependency cycle: a -> b -> a")``
    (each name depends on the next), starting at the cycle's earliest name.
    A dependency on a name that is not in ``graph`` raises too.
    """
    position = {name: index for index, name in enumerate(graph)}
    waiting: Dict[str, Set[str]] = {}
    dependants: Dict[str, List[str]] = {name: [] for name in graph}
    for name, deps in graph.items():
        for dep in deps:
            if dep not in position:
                raise FuzzfileError(
                    "%s.%s: depends on %r, which is not a job or service" % (path, name, dep)
                )
        waiting[name] = set(deps)
        for dep in waiting[name]:
            dependants[dep].append(name)
    ready = [(position[name], name) for name in graph if not waiting[name]]
    heapq.heapify(ready)
    order: List[str] = []
    level: Dict[str, int] = {}
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        level[name] = max((level[dep] + 1 for dep in graph[name]), default=0)
        for dependant in dependants[name]:
            waiting[dependant].discard(name)
            if not waiting[dependant]:
                heapq.heappush(ready, (position[dependant], dependant))
    if len(order) < len(graph):
        raise FuzzfileError(
            "%s: dependency cycle: %s" % (path, " -> ".join(_find_cycle(graph, level, position)))
        )
    waves: List[List[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for name in graph:
        waves[level[name]].append(name)
    return order, waves


def _find_cycle(
    graph: Mapping[str, Sequence[str]], done: Mapping[str, int], position: Mapping[str, int]
) -> List[str]:
    """A cycle among the names not ordered: each of them depends on at least
    one other of them. Walk from the earliest, always to the earliest
    unordered dependency, until a name repeats."""
    remaining = [name for name in graph if name not in done]
    current = remaining[0]
    seen: Dict[str, int] = {}
    walk: List[str] = []
    while current not in seen:
        seen[current] = len(walk)
        walk.append(current)
        current = min(
            (dep for dep in graph[current] if dep not in done), key=position.__getitem__
        )
    cycle = walk[seen[current]:]
    first = min(range(len(cycle)), key=lambda index: position[cycle[index]])
    cycle = cycle[first:] + cycle[:first]
    return cycle + [cycle[0]]


def _check_dependencies(
    units: Mapping[str, Job], paths: Mapping[str, Sequence[Tuple[str, str]]]
) -> None:
    """Every dependency names a job or service; RUNNING only for services."""
    jobs = [name for name, unit in units.items() if unit.kind == "job"]
    services = [name for name, unit in units.items() if unit.kind == "service"]
    for name, unit in units.items():
        for dependency, (name_path, status_path) in zip(unit.depends_on, paths[name]):
            target = units.get(dependency.name)
            if target is None:
                known = "jobs: %s" % ", ".join(jobs)
                if services:
                    known += "; services: %s" % ", ".join(services)
                raise FuzzfileError(
                    "%s: no job or service named %s (%s)"
                    % (name_path, _show(dependency.name), known)
                )
            if dependency.status == "RUNNING" and target.kind != "service":
                raise FuzzfileError(
                    "%s: RUNNING is only for services, and %r is a job; use FINISHED"
                    % (status_path, dependency.name)
                )


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
SERVICE_KEYS = tuple(key for key in JOB_KEYS if key != "policy") + ("persist", "readiness-probe")
IMAGE_KEYS = ("uri", "secret")
RESOURCE_KEYS = ("cpu", "memory", "devices", "exclusive", "annotations")
CPU_KEYS = ("cores", "affinity", "threads", "sockets")
MEMORY_KEYS = ("size", "by-core")
MULTINODE_KEYS = ("nodes", "implementation", "procs-per-node")
POLICY_KEYS = ("timeout", "retry", "restart")
TIMEOUT_KEYS = ("execute",)
RETRY_KEYS = ("attempts",)
TASK_ARRAY_KEYS = ("start", "end", "concurrency")
DEPENDENCY_KEYS = ("name", "status", "description")
NETWORK_KEYS = ("isolated", "expose-tcp", "expose-udp")
SERVICE_NETWORK_KEYS = NETWORK_KEYS + ("ports", "endpoints", "host")
SERVICE_PORT_KEYS = ("name", "port", "protocol")
SERVICE_PORT_PROTOCOLS = ("TCP", "UDP")
PROBE_HANDLERS = ("exec", "http-get", "tcp-socket", "grpc")
PROBE_TIMINGS = {  # name -> minimum
    "initial-delay-seconds": 0,
    "period-seconds": 1,
    "timeout-seconds": 1,
    "success-threshold": 1,
    "failure-threshold": 1,
}
PROBE_HANDLER_KEYS = {
    "exec": ("command",),
    "http-get": ("path", "port", "host", "scheme", "http-headers"),
    "tcp-socket": ("port", "host"),
    "grpc": ("port", "service"),
}
HTTP_SCHEMES = ("HTTP", "HTTPS")
DEFAULTS_KEYS = ("job", "service", "env", "mounts", "resource")
DEFAULTS_V4_KEYS = ("service", "env", "mounts", "resource")
DEFAULTS_JOB_KEYS = ("env", "mounts", "policy", "resource")
DEFAULTS_SERVICE_KEYS = ("env", "mounts", "resource")
VOLUME_KEYS = ("reference", "ingress", "egress", "use", "size", "name", "annotations")
VOLUME_V4_KEYS = ("use", "size", "name", "annotations")
TRANSFER_KEYS = ("source", "destination", "policy")
TRANSFER_POLICY_KEYS = ("timeout", "retry")
LOCATION_KEYS = ("uri", "secret")

NOTE = {
    "image": "images are not pulled yet; jobs run with the software installed on the nodes",
    "image.secret": "registry secrets are not supported yet; ignored",
    "cpu.threads": "hardware threads selection is not supported yet; ignored",
    "cpu.sockets": "socket counts are not supported yet; ignored",
    "devices": "device requests are not supported yet; ignored",
    "exclusive": "exclusive node use is not supported yet; ignored",
    "resource.annotations": "resource annotations are not supported yet; ignored",
    "mounts": "volume mounts are not supported yet; ignored",
    "retry": "retries are not supported yet (Fuzzball ignores them too); ignored",
    "restart": "restart policies are not supported yet; ignored",
    "network": "network settings are not supported yet; ignored",
    "annotations": "workflow annotations are not supported yet; ignored",
    "volumes": "volumes are not supported yet; ignored",
    "services": "services are not supported yet; ignored",
}


@dataclasses.dataclass
class _Context:
    """What parsing a job needs from the rest of the document."""

    version: str
    files: Dict[str, str]
    volumes: List[str]
    warnings: List[str]


@dataclasses.dataclass
class _Settings:
    """The mergeable settings of a job, a service or a defaults section,
    each only as far as given: ``env`` pairs, ``mounts`` by the form's key
    (``(path, volume, field path)``), ``resource`` and ``policy`` by field."""

    env: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    mounts: Dict[str, Tuple[str, str, str]] = dataclasses.field(default_factory=dict)
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


def _parse_mounts(value: Any, path: str, ctx: _Context) -> Dict[str, Tuple[str, str, str]]:
    """Mounts in the Fuzzfile version's form, keyed like the Fuzzfile."""
    data = _mapping(value, path)
    mounts: Dict[str, Tuple[str, str, str]] = {}
    for key, entry in data.items():
        item_path = _join(path, key)
        if ctx.version == "v1":
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
            location = _abs_path(entry["location"], _join(item_path, "location"))
            _check_volume(key, item_path, ctx)
            mounts[key] = (location, key, item_path)
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
                    "%s: must be a mapping with 'volume', got %s%s"
                    % (item_path, _show(entry), hint)
                )
            _check_keys(entry, item_path, ("volume",))
            volume_path = _join(item_path, "volume")
            volume = _string(entry["volume"], volume_path, nonempty=True)
            _check_volume(volume, volume_path, ctx)
            mounts[key] = (key, volume, item_path)
    return mounts


def _mount_points(mounts: Mapping[str, Tuple[str, str, str]]) -> Dict[str, str]:
    """Merged mounts as container path -> volume; a path used twice is an
    error (only possible with the v1 form)."""
    result: Dict[str, str] = {}
    for location, volume, item_path in mounts.values():
        if location in result:
            raise FuzzfileError(
                "%s.location: %r is already the mount point of volume %r"
                % (item_path, location, result[location])
            )
        result[location] = volume
    return result


def _parse_resource(value: Any, path: str, notes: List[str]) -> Dict[str, Any]:
    data = _mapping(value, path)
    _check_keys(data, path, RESOURCE_KEYS)
    resource: Dict[str, Any] = {}
    cpu_path = _join(path, "cpu")
    cpu = _section(data, "cpu", path)
    if cpu is not None:
        _check_keys(cpu, cpu_path, CPU_KEYS)
        if cpu.get("cores") is not None:
            resource["cores"] = _positive_int(cpu["cores"], _join(cpu_path, "cores"))
        if cpu.get("affinity") is not None:
            resource["affinity"] = _choice(
                cpu["affinity"], _join(cpu_path, "affinity"), AFFINITIES
            )
        if cpu.get("threads") is not None:
            resource["threads"] = _bool(cpu["threads"], _join(cpu_path, "threads"))
            notes.append("%s: %s" % (_join(cpu_path, "threads"), NOTE["cpu.threads"]))
        if cpu.get("sockets") is not None:
            resource["sockets"] = _positive_int(cpu["sockets"], _join(cpu_path, "sockets"))
            notes.append("%s: %s" % (_join(cpu_path, "sockets"), NOTE["cpu.sockets"]))
    memory_path = _join(path, "memory")
    memory = _section(data, "memory", path)
    if memory is not None:
        _check_keys(memory, memory_path, MEMORY_KEYS)
        if memory.get("size") is not None:
            resource["memory_bytes"] = parse_memory_size(
                memory["size"], _join(memory_path, "size")
            )
        if memory.get("by-core") is not None:
            resource["by_core"] = _bool(memory["by-core"], _join(memory_path, "by-core"))
    if data.get("devices") is not None:
        devices_path = _join(path, "devices")
        resource["devices"] = _devices(data["devices"], devices_path)
        if resource["devices"]:
            notes.append("%s: %s" % (devices_path, NOTE["devices"]))
    if data.get("exclusive") is not None:
        resource["exclusive"] = _bool(data["exclusive"], _join(path, "exclusive"))
        if resource["exclusive"]:
            notes.append("%s: %s" % (_join(path, "exclusive"), NOTE["exclusive"]))
    if data.get("annotations") is not None:
        annotations_path = _join(path, "annotations")
        resource["annotations"] = _string_map(data["annotations"], annotations_path)
        if resource["annotations"]:
            notes.append("%s: %s" % (annotations_path, NOTE["resource.annotations"]))
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
        if settings.mounts:
            notes.append("%s: %s" % (mounts_path, NOTE["mounts"]))
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


def _parse_volumes(value: Any, ctx: _Context, notes: List[str]) -> List[str]:
    data = _mapping(value, "volumes")
    names: List[str] = []
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
                "%s: required (volume://user/ephemeral or volume://user/persistent/NAME)"
                % _join(path, "reference")
            )
        for key in ("use", "name"):
            if volume.get(key) is not None:
                _string(volume[key], _join(path, key), nonempty=True)
        if volume.get("size") is not None:
            parse_memory_size(volume["size"], _join(path, "size"))
        if volume.get("annotations") is not None:
            _string_map(volume["annotations"], _join(path, "annotations"))
        for direction in ("ingress", "egress"):
            if volume.get(direction) is not None:
                transfers_path = _join(path, direction)
                transfers = _list(volume[direction], transfers_path)
                for index, transfer in enumerate(transfers):
                    _parse_transfer(
                        transfer, "%s[%d]" % (transfers_path, index), direction, ctx, notes
                    )
        names.append(name)
    if names:
        notes.append("volumes: %s" % NOTE["volumes"])
    return names


def _parse_transfer(
    value: Any, path: str, direction: str, ctx: _Context, notes: List[str]
) -> None:
    transfer = _mapping(value, path, "a mapping with 'source' and 'destination'")
    _check_keys(transfer, path, TRANSFER_KEYS)
    for end in ("source", "destination"):
        end_path = _join(path, end)
        if transfer.get(end) is None:
            raise FuzzfileError("%s: required (a mapping with 'uri')" % end_path)
        location = _mapping(transfer[end], end_path, "a mapping with 'uri'")
        _check_keys(location, end_path, LOCATION_KEYS)
        uri_path = _join(end_path, "uri")
        if location.get("uri") is None:
            raise FuzzfileError("%s: required" % uri_path)
        uri = _string(location["uri"], uri_path, nonempty=True)
        if direction == "ingress" and end == "source" and uri.startswith(FILE_PREFIX):
            _file_reference(uri, uri_path, ctx)
        if location.get("secret") is not None:
            _string(location["secret"], _join(end_path, "secret"), nonempty=True)
    if transfer.get("policy") is not None:
        policy_path = _join(path, "policy")
        policy = _mapping(transfer["policy"], policy_path)
        _check_keys(policy, policy_path, TRANSFER_POLICY_KEYS)
        _parse_timeout_retry(policy, policy_path, [])


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


def _parse_network(value: Any, path: str, kind: str) -> Dict[str, Any]:
    data = _mapping(value, path)
    _check_keys(data, path, NETWORK_KEYS if kind == "job" else SERVICE_NETWORK_KEYS)
    network: Dict[str, Any] = {}
    if data.get("isolated") is not None:
        network["isolated"] = _bool(data["isolated"], _join(path, "isolated"))
    for key in ("expose-tcp", "expose-udp"):
        if data.get(key) is not None:
            network[key] = _ports(data[key], _join(path, key))
    if data.get("host") is not None:
        _bool(data["host"], _join(path, "host"))
    if data.get("ports") is not None:
        ports_path = _join(path, "ports")
        for index, item in enumerate(_list(data["ports"], ports_path)):
            item_path = "%s[%d]" % (ports_path, index)
            port = _mapping(item, item_path, "a mapping with 'port'")
            _check_keys(port, item_path, SERVICE_PORT_KEYS)
            if port.get("port") is None:
                raise FuzzfileError("%s: required" % _join(item_path, "port"))
            _port(port["port"], _join(item_path, "port"))
            if port.get("name") is not None:
                _string(port["name"], _join(item_path, "name"), nonempty=True)
            protocol = port.get("protocol")
            if protocol is not None and (
                not isinstance(protocol, str)
                or not protocol.isascii()
                or protocol.upper() not in SERVICE_PORT_PROTOCOLS
            ):
                raise FuzzfileError(
                    "%s: must be TCP or UDP (any case), got %s"
                    % (_join(item_path, "protocol"), _show(protocol))
                )
    if data.get("endpoints") is not None:
        endpoints_path = _join(path, "endpoints")
        for index, item in enumerate(_list(data["endpoints"], endpoints_path)):
            _mapping(item, "%s[%d]" % (endpoints_path, index))
    return network


def _probe_port(value: Any, path: str, named: bool) -> None:
    if value is None:
        raise FuzzfileError("%s: required" % path)
    if named and isinstance(value, str) and value:
        return
    _port(value, path)


def _parse_probe(value: Any, path: str) -> None:
    """A Kubernetes-style readiness probe: exactly one handler, timings."""
    probe = _mapping(value, path)
    _check_keys(probe, path, PROBE_HANDLERS + tuple(PROBE_TIMINGS))
    handlers = [key for key in PROBE_HANDLERS if probe.get(key) is not None]
    if len(handlers) != 1:
        raise FuzzfileError(
            "%s: needs exactly one of %s, got %s"
            % (path, ", ".join(PROBE_HANDLERS), " and ".join(handlers) or "none")
        )
    handler = handlers[0]
    handler_path = _join(path, handler)
    data = _mapping(probe[handler], handler_path)
    _check_keys(data, handler_path, PROBE_HANDLER_KEYS[handler])
    if handler == "exec":
        if data.get("command") is None:
            raise FuzzfileError("%s: required (a list of strings)" % _join(handler_path, "command"))
        _string_list(data["command"], _join(handler_path, "command"), nonempty=True)
    else:
        _probe_port(data.get("port"), _join(handler_path, "port"), handler != "grpc")
        for key in ("path", "host", "service"):
            if data.get(key) is not None:
                _string(data[key], _join(handler_path, key))
        if data.get("scheme") is not None:
            scheme_path = _join(handler_path, "scheme")
            _choice(data["scheme"], scheme_path, HTTP_SCHEMES)
        if data.get("http-headers") is not None:
            headers_path = _join(handler_path, "http-headers")
            for index, item in enumerate(_list(data["http-headers"], headers_path)):
                item_path = "%s[%d]" % (headers_path, index)
                header = _mapping(item, item_path, "a mapping with 'name' and 'value'")
                _check_keys(header, item_path, ("name", "value"))
                for key in ("name", "value"):
                    if header.get(key) is None:
                        raise FuzzfileError("%s: required" % _join(item_path, key))
                    _string(header[key], _join(item_path, key), nonempty=key == "name")
    for key, minimum in PROBE_TIMINGS.items():
        if probe.get(key) is not None:
            _int_at_least(probe[key], _join(path, key), minimum)


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
        image_secret = _string(image["secret"], _join(image_path, "secret"))
        notes.append("%s: %s" % (_join(image_path, "secret"), NOTE["image.secret"]))

    command = None
    script = None
    if data.get("command") is not None:
        command = _string_list(data["command"], _join(path, "command"), nonempty=True)
    if data.get("script") is not None:
        script = _string(data["script"], _join(path, "script"), nonempty=True)
    if command is not None and script is not None:
        raise FuzzfileError("%s: has both command and script; exactly one is allowed" % path)
    if command is None and script is None and kind == "job":
        raise FuzzfileError("%s: needs a command or a script (exactly one)" % path)

    args: List[str] = []
    if data.get("args") is not None:
        args = _string_list(data["args"], _join(path, "args"))

    own = _parse_settings(data, path, ctx, notes, ("env", "mounts", "resource", "policy"))
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
            files[target] = _file_reference(reference, item_path, ctx)

    depends_on, dependency_paths = _parse_dependencies(data, path, ctx)

    task_array = None
    task_path = _join(path, "task-array")
    raw_task = _section(data, "task-array", path)
    if raw_task is not None:
        _check_keys(raw_task, task_path, TASK_ARRAY_KEYS)
        task_array = _task_array(
            raw_task.get("start"), raw_task.get("end"), raw_task.get("concurrency"), task_path
        )

    network: Dict[str, Any] = {}
    if data.get("network") is not None:
        network_path = _join(path, "network")
        network = _parse_network(data["network"], network_path, kind)
        notes.append("%s: %s" % (network_path, NOTE["network"]))

    persist = None
    if kind == "service":
        if data.get("persist") is not None:
            persist = _bool(data["persist"], _join(path, "persist"))
        if data.get("readiness-probe") is not None:
            _parse_probe(data["readiness-probe"], _join(path, "readiness-probe"))

    resource = settings.resource
    policy = settings.policy
    timeout_ns = policy.get("timeout_ns")
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
        mounts=_mount_points(settings.mounts),
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
    )
    return job, dependency_paths


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

    if data.get("jobs") is None:
        extra = " (services are not supported yet)" if raw_services else ""
        raise FuzzfileError("jobs: required: a mapping of job names to jobs%s" % extra)
    raw_jobs = _mapping(data["jobs"], "jobs", "a mapping of job names to jobs")
    if not raw_jobs:
        raise FuzzfileError("jobs: must contain at least one job")

    notes: List[str] = []
    ctx = _Context(version=version, files={}, volumes=[], warnings=warnings)
    if data.get("files") is not None:
        ctx.files = _parse_files(data["files"])
    if data.get("annotations") is not None:
        if _string_map(data["annotations"], "annotations"):
            notes.append("annotations: %s" % NOTE["annotations"])
    if data.get("volumes") is not None:
        ctx.volumes = _parse_volumes(data["volumes"], ctx, notes)
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
    if services:
        notes.insert(0, "services: %s (%s)" % (NOTE["services"], ", ".join(services)))
    notes.append("jobs.*.image.uri: %s" % NOTE["image"])

    workflow = Workflow(
        version=version,
        jobs=jobs,
        service_defs=services,
        files=ctx.files,
        unsupported=notes,
        warnings=ctx.warnings,
    )
    _check_dependencies(workflow.units, dependency_paths)
    dependency_order(_graph(workflow.units))
    return workflow


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


def select_run(workflow: Workflow, name: Optional[str] = None) -> List[Job]:
    """The jobs run-job.yml runs, in dependency order: the one named, or
    without a name every job of the workflow. Services are not run, so a job
    that depends on one cannot run either; that is refused up front rather
    than discovered halfway through a workflow."""
    if name is not None:
        jobs = [select_job(workflow, name)]
    else:
        jobs = [workflow.jobs[unit] for unit in workflow.order if unit in workflow.jobs]
    for job in jobs:
        for dep in job.depends_on if name is None else []:
            if dep.name in workflow.service_defs:
                raise FuzzfileError(
                    "jobs.%s.depends-on: %s is a service, and services are not run by this "
                    "collection yet, so %s cannot run; run the other jobs one by one with "
                    "-e job=NAME" % (job.name, dep.name, job.name)
                )
    return jobs


def not_executed_yet(job: Job, whole_workflow: bool = False) -> List[str]:
    """Notes on what this job asks for that run-job.yml validates but does
    not carry out yet, so that a user is told instead of silently surprised.
    ``whole_workflow``: the job runs as part of its whole workflow, so its
    dependencies do run first."""
    path = "jobs.%s" % job.name
    notes = []
    if job.depends_on and not whole_workflow:
        notes.append("%s.depends-on: %s not run first; -e job=%s runs this one job only" % (
            path, ", ".join(dep.name for dep in job.depends_on), job.name))
    return notes


def require_runnable(job: Job) -> Job:
    """The runner's gate: every job runs except a ``gasnet`` multinode job
    and a task array of multinode jobs (whose task host names ``<job>-<task>``
    and rank host names ``<job>-<rank>`` would clash).

    Plain and ``generic`` jobs run their command as given; ``openmpi``,
    ``ompi`` and ``mpich`` jobs run it under the MPI launcher (see
    rank_env.launcher). GASNet is not packaged for the test nodes' OS, so
    Fuzzball's GASNet launch cannot be reproduced and tested here; the
    message says how to run such a program as a ``generic`` job instead,
    with GASNet's own ssh spawner going through the wrapper."""
    if job.implementation == "gasnet":
        raise FuzzfileError(
            "jobs.%s.multinode.implementation: 'gasnet' is not supported: fuzz.multinode "
            "has no GASNet launcher (GASNet is not packaged in Debian, the OS its tests run "
            "on, so one could not be tested); use implementation 'generic' and let GASNet's "
            "ssh spawner start the processes through the wrapper: run the program with "
            "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER, "
            "GASNET_SSH_SERVERS=$MULTINODE_HOSTLIST_NOSLOTS and GASNET_SPAWNFN=S "
            "(udp conduit; other conduits: GASNET_<CONDUIT>_SPAWNER=ssh)" % job.name
        )
    if job.task_array is not None and job.multinode:
        raise FuzzfileError(
            "jobs.%s: a task array of multinode jobs cannot run: task host names "
            "%s-<task> and rank host names %s-<rank> would be the same names; use a "
            "task array of single-node jobs, or one multinode job" % (job.name, job.name, job.name)
        )
    return job
