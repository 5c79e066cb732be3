# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The value syntaxes of sizes (``memory.size``: ``1GB``, ``512MiB``) and
durations (``policy.timeout.execute``: Go's ``2h``, ``10m0s``)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import SIZE_MAX
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import _is_int, _show

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
    if size > SIZE_MAX:
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
        if match is None:  # cannot happen: the pattern matches the empty string
            raise bad("unreadable at %r" % text[position:][:20])
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
