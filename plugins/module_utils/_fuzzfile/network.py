# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A job's or service's ``network`` section and a service's
``readiness-probe``. A service's ``network.ports`` and ``network.endpoints``
become ``Port`` and ``Endpoint`` lists (``_parse_network``: an endpoint's
port resolved from ``port-name``, ``port`` or the service's only port); the
rest of a ``network`` section is validated and noted, not carried out. A
probe is kept in its Fuzzfile form, normalized (``_parse_probe``): the one
handler and the timings given, ``http-get.scheme`` upper-case (``http`` in
the vendor's own files), ``HTTP`` when not given (Kubernetes' default, which
the vendor's probes follow), ``exec.command`` as an argv of strings, a port
given by name replaced by its number (``_resolve_probe_port``). The JSON
forms are read back by the same functions (``_parse_ports``,
``_parse_probe``), endpoints by ``load_endpoints``."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    ENDPOINT_KEYS,
    ENDPOINT_NAME_MAX,
    ENDPOINT_NAME_RE,
    ENDPOINT_PROTOCOLS,
    HTTP_SCHEMES,
    NETWORK_KEYS,
    NOTE,
    PROBE_HANDLER_KEYS,
    PROBE_HANDLERS,
    PROBE_TIMINGS,
    SERVICE_NETWORK_KEYS,
    SERVICE_PORT_KEYS,
    SERVICE_PORT_PROTOCOLS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Endpoint, Port
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _argument_list,
    _bool,
    _check_keys,
    _int_at_least,
    _join,
    _list,
    _mapping,
    _names,
    _port,
    _ports,
    _show,
    _string,
)


def _parse_network(value: Any, path: str, kind: str, notes: List[str]) -> Dict[str, Any]:
    """The ``network`` section: ``isolated``, ``expose-tcp`` and
    ``expose-udp`` (noted: not carried out) and, for a service, ``ports``
    and ``endpoints`` (``Port`` and ``Endpoint`` lists). Services run on
    their nodes' own network here, as Fuzzball's ``host: true``."""
    data = _mapping(value, path)
    _check_keys(data, path, NETWORK_KEYS if kind == "job" else SERVICE_NETWORK_KEYS)
    network: Dict[str, Any] = {}
    if data.get("isolated") is not None:
        network["isolated"] = _bool(data["isolated"], _join(path, "isolated"))
    for key in ("expose-tcp", "expose-udp"):
        if data.get(key) is not None:
            network[key] = _ports(data[key], _join(path, key))
    if kind == "job":
        notes.append("%s: %s" % (path, NOTE["network"]))
    else:
        notes.extend("%s: %s" % (_join(path, key), NOTE["network"])
                     for key in NETWORK_KEYS if data.get(key) is not None)
    if data.get("host") is not None and not _bool(data["host"], _join(path, "host")):
        notes.append("%s: %s" % (_join(path, "host"), NOTE["network.host"]))
    ports_path = _join(path, "ports")
    network["ports"] = _parse_ports(data["ports"], ports_path) if data.get("ports") is not None else []
    network["endpoints"] = []
    if data.get("endpoints") is not None:
        network["endpoints"] = _parse_endpoints(
            data["endpoints"], _join(path, "endpoints"), network["ports"], ports_path, notes)
    return network


def _parse_ports(value: Any, path: str) -> List[Port]:
    """``network.ports`` (or their JSON form): each ``{port, name,
    protocol}``, ``name`` optional and unique, ``protocol`` TCP or UDP in
    any case (TCP when not given), stored upper-case."""
    ports: List[Port] = []
    for index, item in enumerate(_list(value, path)):
        item_path = "%s[%d]" % (path, index)
        data = _mapping(item, item_path, "a mapping with 'port'")
        _check_keys(data, item_path, SERVICE_PORT_KEYS)
        if data.get("port") is None:
            raise FuzzfileError("%s: required" % _join(item_path, "port"))
        number = _port(data["port"], _join(item_path, "port"))
        name = None
        if data.get("name") is not None:
            name = _string(data["name"], _join(item_path, "name"), nonempty=True)
            for other, port in enumerate(ports):
                if port.name == name:
                    raise FuzzfileError("%s: %r is the name of %s[%d] too; port names must differ"
                                        % (_join(item_path, "name"), name, path, other))
        protocol = data.get("protocol", "TCP")
        if (
            not isinstance(protocol, str)
            or not protocol.isascii()
            or protocol.upper() not in SERVICE_PORT_PROTOCOLS
        ):
            raise FuzzfileError(
                "%s: must be TCP or UDP (any case), got %s"
                % (_join(item_path, "protocol"), _show(protocol))
            )
        ports.append(Port(name, number, protocol.upper()))
    return ports


def _named_port(name: str, ports: Sequence[Port], path: str, ports_path: str) -> int:
    """The number of the port called ``name``; the message names the field
    (``path``) and the ports there are."""
    for port in ports:
        if port.name == name:
            return port.port
    raise FuzzfileError("%s: no port named %s in %s (%s)" % (
        path, _show(name), ports_path, _names([p.name for p in ports if p.name is not None], "none")))


def _endpoint_name(value: Any, path: str) -> str:
    if value is None:
        raise FuzzfileError("%s: required (a name such as web)" % path)
    name = _string(value, path, nonempty=True)
    if len(name) > ENDPOINT_NAME_MAX or not ENDPOINT_NAME_RE.match(name):
        raise FuzzfileError(
            "%s: must be letters, digits and '-', starting and ending with a letter or digit, "
            "at most %d characters (it names the variables FB_ENDPOINT_URL_<NAME> and "
            "FB_ENDPOINT_PATH_<NAME>), got %s" % (path, ENDPOINT_NAME_MAX, _show(name)))
    return name


def _endpoint_protocol(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.isascii() or value.lower() not in ENDPOINT_PROTOCOLS:
        raise FuzzfileError("%s: must be one of %s (any case), got %s"
                            % (path, ", ".join(ENDPOINT_PROTOCOLS), _show(value)))
    return value.lower()


def _endpoint_path(value: Any, path: str) -> str:
    """An absolute URL path: ``/`` and then printable ASCII without white
    space, ``?`` or ``#`` (the path part of a URL, nothing after it)."""
    text = _string(value, path)
    if not text.startswith("/") or any(not "!" <= c <= "~" or c in "?#" for c in text):
        raise FuzzfileError(
            "%s: must be an absolute URL path (/ and then printable ASCII without spaces, "
            "'?' or '#'), got %s" % (path, _show(text)))
    return text


def _check_endpoint_names(endpoints: Sequence[Endpoint], path: str) -> None:
    """Endpoint names are unique (in any case: each names variables)."""
    seen: Dict[str, int] = {}
    for index, endpoint in enumerate(endpoints):
        other = seen.setdefault(endpoint.name.lower(), index)
        if other != index:
            raise FuzzfileError("%s[%d].name: %r is the name of %s[%d] too; endpoint names must "
                                "differ (in any case)" % (path, index, endpoint.name, path, other))


def _parse_endpoints(
    value: Any, path: str, ports: Sequence[Port], ports_path: str, notes: List[str]
) -> List[Endpoint]:
    """``network.endpoints`` in the Fuzzfile's form (our reading, see
    docs/design.md): ``name``, the port as ``port-name`` (a ``ports[].name``)
    or ``port``, else the service's only port; ``protocol`` (any case,
    ``http`` when not given), ``path`` (``/`` when not given), ``type``
    (Fuzzball's ingress kind: noted and ignored), ``scope`` (any non-empty
    string, e.g. ``user``, ``public`` or a templated value: kept, noted as
    not enforced)."""
    endpoints: List[Endpoint] = []
    for index, item in enumerate(_list(value, path)):
        item_path = "%s[%d]" % (path, index)
        data = _mapping(item, item_path, "a mapping with 'name'")
        _check_keys(data, item_path, ENDPOINT_KEYS)
        name = _endpoint_name(data.get("name"), _join(item_path, "name"))
        if data.get("port-name") is not None and data.get("port") is not None:
            raise FuzzfileError("%s: has both port-name and port; give one" % item_path)
        if data.get("port-name") is not None:
            port_name_path = _join(item_path, "port-name")
            port = _named_port(_string(data["port-name"], port_name_path, nonempty=True),
                               ports, port_name_path, ports_path)
        elif data.get("port") is not None:
            port = _port(data["port"], _join(item_path, "port"))
        elif len(ports) == 1:
            port = ports[0].port
        else:
            raise FuzzfileError(
                "%s: needs port-name or port: %s has %s" % (
                    _join(item_path, "port-name"), ports_path,
                    "no ports" if not ports else "%d ports, not one" % len(ports)))
        protocol = "http"
        if data.get("protocol") is not None:
            protocol = _endpoint_protocol(data["protocol"], _join(item_path, "protocol"))
        endpoint_path = "/"
        if data.get("path") is not None:
            endpoint_path = _endpoint_path(data["path"], _join(item_path, "path"))
        if data.get("type") is not None:
            _string(data["type"], _join(item_path, "type"))
            notes.append("%s: %s" % (_join(item_path, "type"), NOTE["endpoint.type"]))
        scope = None
        if data.get("scope") is not None:
            scope = _string(data["scope"], _join(item_path, "scope"), nonempty=True)
            notes.append("%s: %s" % (_join(item_path, "scope"), NOTE["endpoint.scope"]))
        endpoints.append(Endpoint(name, port, protocol, endpoint_path, scope))
    _check_endpoint_names(endpoints, path)
    return endpoints


def load_endpoints(value: Any, path: str) -> List[Endpoint]:
    """Endpoints in their JSON form (``Endpoint.to_dict``): every key
    given but ``scope`` (null or absent: none), each checked as in the
    Fuzzfile; names unique."""
    endpoints: List[Endpoint] = []
    for index, item in enumerate(_list(value, path)):
        item_path = "%s[%d]" % (path, index)
        data = _mapping(item, item_path, "a mapping with name, port, protocol and path")
        _check_keys(data, item_path, Endpoint._fields)
        for key in Endpoint._fields:
            if data.get(key) is None and key != "scope":
                raise FuzzfileError("%s: required" % _join(item_path, key))
        scope = data.get("scope")
        endpoints.append(Endpoint(
            _endpoint_name(data["name"], _join(item_path, "name")),
            _port(data["port"], _join(item_path, "port")),
            _endpoint_protocol(data["protocol"], _join(item_path, "protocol")),
            _endpoint_path(data["path"], _join(item_path, "path")),
            None if scope is None else _string(scope, _join(item_path, "scope"), nonempty=True),
        ))
    _check_endpoint_names(endpoints, path)
    return endpoints


def _check_workflow_endpoints(services: Mapping[str, Any]) -> None:
    """No two services of a workflow have an endpoint of the same name (in
    any case): its variables are the same names in every job."""
    seen: Dict[str, Tuple[str, int]] = {}
    for service_name, service in services.items():
        for index, endpoint in enumerate(service.endpoints):
            other = seen.setdefault(endpoint.name.lower(), (service_name, index))
            if other[0] != service_name:
                raise FuzzfileError(
                    "services.%s.network.endpoints[%d].name: %r is the name of "
                    "services.%s.network.endpoints[%d] too; a workflow's endpoint names must differ "
                    "(in any case): each names the variables FB_ENDPOINT_URL_<NAME> and "
                    "FB_ENDPOINT_PATH_<NAME>" % (service_name, index, endpoint.name, other[0], other[1]))


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


def _resolve_probe_port(
    probe: Optional[Dict[str, Any]], ports: Sequence[Port], path: str, ports_path: str
) -> Optional[Dict[str, Any]]:
    """The probe (``_parse_probe``'s) with a port given by name (Kubernetes
    style: a ``network.ports[].name``) replaced by its number."""
    if probe is None:
        return None
    for handler, action in probe.items():
        if isinstance(action, dict) and isinstance(action.get("port"), str):
            port_path = _join(_join(path, handler), "port")
            return dict(probe, **{handler: dict(action, port=_named_port(action["port"], ports, port_path,
                                                                         ports_path))})
    return probe
