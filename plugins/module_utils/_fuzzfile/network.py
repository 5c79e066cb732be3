# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A job's or service's ``network`` section and a service's
``readiness-probe`` (validated; neither is executed yet). A probe is kept in
its Fuzzfile form, normalized (``_parse_probe``): the one handler and the
timings given, ``http-get.scheme`` upper-case (``http`` in the vendor's own
files), ``HTTP`` when not given (Kubernetes' default, which the vendor's
probes follow), ``exec.command`` as an argv of strings."""

from __future__ import annotations

from typing import Any, Dict, List, Union

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    HTTP_SCHEMES,
    NETWORK_KEYS,
    PROBE_HANDLER_KEYS,
    PROBE_HANDLERS,
    PROBE_TIMINGS,
    SERVICE_NETWORK_KEYS,
    SERVICE_PORT_KEYS,
    SERVICE_PORT_PROTOCOLS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _argument_list,
    _bool,
    _check_keys,
    _int_at_least,
    _join,
    _list,
    _mapping,
    _port,
    _ports,
    _show,
    _string,
)


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


def _probe_port(value: Any, path: str, named: bool) -> Union[int, str]:
    if value is None:
        raise FuzzfileError("%s: required" % path)
    if named and isinstance(value, str) and value:
        return value
    return _port(value, path)


def _http_scheme(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.isascii() or value.upper() not in HTTP_SCHEMES:
        raise FuzzfileError(
            "%s: must be HTTP or HTTPS (any case), got %s" % (path, _show(value))
        )
    return value.upper()


def _parse_probe(value: Any, path: str) -> Dict[str, Any]:
    """A Kubernetes-style readiness probe: exactly one handler, timings; the
    probe normalized (see the module's docstring). The JSON form's
    ``readiness_probe`` is read back with it too."""
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
    action: Dict[str, Any] = {}
    if handler == "exec":
        if data.get("command") is None:
            raise FuzzfileError("%s: required (a list of strings)" % _join(handler_path, "command"))
        action["command"] = _argument_list(
            data["command"], _join(handler_path, "command"), nonempty=True
        )
    else:
        action["port"] = _probe_port(data.get("port"), _join(handler_path, "port"), handler != "grpc")
        for key in ("path", "host", "service"):
            if data.get(key) is not None:
                action[key] = _string(data[key], _join(handler_path, key))
        if handler == "http-get":
            action["scheme"] = "HTTP"
            if data.get("scheme") is not None:
                action["scheme"] = _http_scheme(data["scheme"], _join(handler_path, "scheme"))
        if data.get("http-headers") is not None:
            headers_path = _join(handler_path, "http-headers")
            headers: List[Dict[str, str]] = []
            for index, item in enumerate(_list(data["http-headers"], headers_path)):
                item_path = "%s[%d]" % (headers_path, index)
                header = _mapping(item, item_path, "a mapping with 'name' and 'value'")
                _check_keys(header, item_path, ("name", "value"))
                for key in ("name", "value"):
                    if header.get(key) is None:
                        raise FuzzfileError("%s: required" % _join(item_path, key))
                headers.append({
                    key: _string(header[key], _join(item_path, key), nonempty=key == "name")
                    for key in ("name", "value")
                })
            action["http-headers"] = headers
    normalized: Dict[str, Any] = {handler: action}
    for key, minimum in PROBE_TIMINGS.items():
        if probe.get(key) is not None:
            normalized[key] = _int_at_least(probe[key], _join(path, key), minimum)
    return normalized
