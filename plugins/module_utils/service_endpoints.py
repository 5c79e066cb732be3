# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""How a job reaches the services of its run (docs/design.md, "The job
spec"): for every service RUNNING when the job starts (the ``rank_plan``
task's ``services``, ``running_services``), and for a service its own
endpoints, the variables ``FB_ENDPOINT_URL_<NAME>``
(``<protocol>://<address>:<port><path>``) and ``FB_ENDPOINT_PATH_<NAME>``
of each endpoint, as Fuzzball gives them, and the host name
``<service>.svc`` at the address of the service's rank 0 (``access``).

Pure Python (standard library only); it does not import Ansible."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    Endpoint,
    FuzzfileError,
    load_endpoints,
    validate_job_name,
)

__all__ = ["RunningService", "access", "endpoint_url", "endpoint_variables", "running_services"]

_NOT_IN_NAME = re.compile(r"[^A-Z0-9_]")


class RunningService(NamedTuple):
    """A service as a job reaches it: its ``name``, the ``address`` of its
    rank 0's node, its ``endpoints``."""

    name: str
    address: str
    endpoints: List[Endpoint]

    @property
    def host_name(self) -> str:
        """The name jobs reach it by (``<service>.svc``, as on Fuzzball)."""
        return "%s.svc" % self.name


def endpoint_url(endpoint: Endpoint, address: str) -> str:
    """``<protocol>://<address>:<port><path>``, an IPv6 address in brackets."""
    host = "[%s]" % address if ":" in address else address
    return "%s://%s:%d%s" % (endpoint.protocol, host, endpoint.port, endpoint.path)


def endpoint_variables(service: RunningService) -> Dict[str, str]:
    """``FB_ENDPOINT_URL_<NAME>`` and ``FB_ENDPOINT_PATH_<NAME>`` of each of
    the service's endpoints, NAME its name upper-cased, every character
    outside ``[A-Z0-9_]`` as ``_``."""
    variables: Dict[str, str] = {}
    for endpoint in service.endpoints:
        name = _NOT_IN_NAME.sub("_", endpoint.name.upper())
        variables["FB_ENDPOINT_URL_" + name] = endpoint_url(endpoint, service.address)
        variables["FB_ENDPOINT_PATH_" + name] = endpoint.path
    return variables


def running_services(value: Any, planned: str, path: str = "services") -> List[RunningService]:
    """The ``rank_plan`` task's ``services`` (``[{name, address,
    endpoints}]``, endpoints in their JSON form), checked: names unique and
    not ``planned`` (the job or service being planned, whose own endpoints
    come from its plan), an IP address each."""
    if not isinstance(value, (list, tuple)):
        raise FuzzfileError("%s: must be a list of services, got %s" % (path, type(value).__name__))
    services: List[RunningService] = []
    for index, item in enumerate(value):
        item_path = "%s[%d]" % (path, index)
        if not isinstance(item, Mapping) or set(item) != {"name", "address", "endpoints"}:
            raise FuzzfileError("%s: must be a mapping of name, address and endpoints, got %s"
                                % (item_path, sorted(map(str, item)) if isinstance(item, Mapping)
                                   else type(item).__name__))
        name = validate_job_name(item["name"], "%s.name" % item_path, "service")
        if name == planned:
            raise FuzzfileError("%s.name: %r is the one being planned; its own endpoints come from "
                                "its rank 0" % (item_path, name))
        if name in [service.name for service in services]:
            raise FuzzfileError("%s.name: %r is listed twice" % (item_path, name))
        address = item["address"]
        try:
            address = str(ipaddress.ip_address(address if isinstance(address, str) else ""))
        except ValueError:
            raise FuzzfileError("%s.address: must be an IP address, got %r" % (item_path, address)) from None
        services.append(RunningService(name, address, load_endpoints(item["endpoints"],
                                                                     "%s.endpoints" % item_path)))
    return services


def access(
    running: Sequence[RunningService], own: Optional[RunningService] = None, path: str = "services"
) -> Tuple[Dict[str, str], List[List[str]]]:
    """What every rank of a job gets: the endpoint variables of the
    ``running`` services (``running_services``) and, for a service, of its
    ``own`` endpoints; and the spec's ``extra_hosts``, ``[<service>.svc,
    address]`` of each, in that order. Two endpoints giving the same
    variable are refused (the parser refuses them in one workflow)."""
    variables: Dict[str, str] = {}
    owners: Dict[str, str] = {}
    services = list(running) + ([own] if own is not None else [])
    for index, service in enumerate(services):
        where = "%s[%d].endpoints" % (path, index) if index < len(running) else "%s's endpoints" % service.name
        for variable, variable_value in endpoint_variables(service).items():
            other = owners.setdefault(variable, service.name)
            if other != service.name:
                raise FuzzfileError("%s: %s is set by service %s already; endpoint names must differ "
                                    "across the run's services" % (where, variable, other))
            variables[variable] = variable_value
    return variables, [[service.host_name, service.address] for service in services]
