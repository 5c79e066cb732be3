# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.same_settings: whether every host has the same value (or
none) for each of a role's settings, so that the role checks them once for
all its hosts instead of on each (see same_settings.yml)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ansible.errors import AnsibleError
from jinja2 import Undefined
from jinja2.exceptions import TemplateError

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


# What templating a host's value can raise: Ansible's errors (an undefined
# variable, a failing lookup or filter, a syntax error, a recursive
# template: AnsibleUndefinedVariable, AnsibleTemplateError and the like,
# all AnsibleError), a jinja2 error Ansible lets through (UndefinedError, a
# TemplateError, from an undefined value used inside a value), and _Unknown
# (an undefined value handed back rather than raised). Anything else is a
# bug, not a value that cannot be templated, and is not hidden.
_CANNOT_TEMPLATE = (AnsibleError, TemplateError, _Unknown)


def same_settings(hosts, hostvars, names):
    names = list(names)
    if isinstance(hosts, (str, bytes, Mapping)) or not isinstance(hosts, Iterable):
        return False  # not a list of hosts: each host's own check says what is wrong
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
    except _CANNOT_TEMPLATE:  # a value that cannot be templated here: each host's own check says why
        return False
    return True


class FilterModule:
    def filters(self):
        return {"same_settings": same_settings}
