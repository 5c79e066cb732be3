# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Reading a Fuzzfile: its bytes as UTF-8 text, and the text as one YAML
document.

YAML dialect: PyYAML's safe loader with three changes that bring it closer to
the YAML 1.2 parser the vendor uses: only ``true``/``false`` (any case
variant) are booleans (``yes``, ``no``, ``on``, ``off`` stay strings), dates
are not converted (they stay strings), and a key repeated in one mapping is an
error instead of silently replacing the earlier one. Errors name the line and
column, or for text that is not UTF-8 the byte and its offset.

Numbers keep the text they were written as (``YamlInt``, ``YamlFloat``:
``yaml_text``): where the vendor takes a string and a Fuzzfile gives a bare
number (``command: [blastp, -num_threads, 8]``), the vendor's Go YAML decoder
hands over the scalar as written, and so can the model (``0x10``, ``1_000``,
``1.50`` and ``010`` stay what they are, whichever YAML version reads them)."""

from __future__ import annotations

import re
from typing import Any, List, Tuple

try:
    import yaml
except ImportError:  # pragma: no cover - reported by the modules
    yaml = None  # type: ignore[assignment]
    HAS_YAML = False
else:
    HAS_YAML = True

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError


class YamlInt(int):
    """An integer of a Fuzzfile; ``yaml_text`` is the scalar as written."""

    yaml_text = ""


class YamlFloat(float):
    """A float of a Fuzzfile; ``yaml_text`` is the scalar as written."""

    yaml_text = ""


def read_fuzzfile_text(path: str) -> str:
    """The Fuzzfile's text; FuzzfileError names the file and what is wrong."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise FuzzfileError("%s: no such file" % path) from None
    except IsADirectoryError:
        raise FuzzfileError("%s: is a directory, not a Fuzzfile" % path) from None
    except OSError as exc:
        raise FuzzfileError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FuzzfileError(
            "%s: not UTF-8 text (byte 0x%02x at offset %d)" % (path, exc.object[exc.start], exc.start)
        ) from None


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

        def construct_yaml_int(self, node: Any) -> YamlInt:
            number = YamlInt(super().construct_yaml_int(node))
            number.yaml_text = node.value
            return number

        def construct_yaml_float(self, node: Any) -> YamlFloat:
            number = YamlFloat(super().construct_yaml_float(node))
            number.yaml_text = node.value
            return number

    _Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
    _Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)

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
