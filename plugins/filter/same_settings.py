# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.same_settings: whether every host has the same value (or
none) for each of a role's settings, so that the role checks them once for
all its hosts instead of on each (see same_settings.yml)."""

from __future__ import annotations

from collections.abc import Mapping

from jinja2 import Undefined

_UNSET = object()


class _Unknown(Exception):
    """A value that cannot be templated here (undefined)."""


def _known(value):
    """The value, raising _Unknown where it or anything in it is undefined
    (Ansible 2.19 gives an undefined Marker, a jinja2 Undefined, rather than
    raising)."""
    if isinstance(value, Undefined):
        raise _Unknown
    if isinstance(value, Mapping):
        return {key: _known(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_known(item) for item in value]
    return value


def same_settings(hosts, hostvars, names):
    names = list(names)
    first = None
    try:
        for host in hosts:
            host_vars = hostvars[host]
            if not isinstance(host_vars, Mapping):
                return False  # not a host Ansible knows
            values = [_known(host_vars[name]) if name in host_vars else _UNSET for name in names]
            if first is None:
                first = values
            elif values != first:
                return False
    except Exception:  # noqa: BLE001 - a value that cannot be templated here: each host's own check says why
        return False
    return True


class FilterModule:
    def filters(self):
        return {"same_settings": same_settings}
