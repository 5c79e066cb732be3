# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Data movement: a volume's ``ingress`` (copied into the volume before the
run's first job) and ``egress`` (copied out after its last), one
``Transfer`` per item, and what a run's transfers need (``transfer_plan``,
``check_transfer_secrets``).

The ends a transfer may have:

- ingress: from ``https://``, ``http://``, ``s3://BUCKET/KEY`` or
  ``file://<name of a top-level files entry>``, to ``file://PATH`` in the
  volume;
- egress: from ``file://PATH`` in the volume, to ``s3://BUCKET/KEY`` or
  ``file://PATH``, a file on the controller under its egress directory
  (``fuzz_multinode_egress_dir``).

A PATH is relative, or written from the root of the volume (or of the
egress directory) with a leading ``/`` (``file:///ref.fa``, as the vendor's
files write it), without ``..``, and names a file (no trailing ``/``): it
can never leave its volume or the egress directory. The ``secret`` of
the remote end (``secret://NAME``) names its credentials in
``fuzz_multinode_secrets``: for ``s3://`` a mapping of ``access_key_id``
and ``secret_access_key`` (``S3_CREDENTIAL_KEYS`` more may be given), for
``https://``/``http://`` a mapping of ``username`` and ``password`` (basic
authentication, the registry credentials' form). A ``secret`` on the
volume's own end has nothing to open and is ignored with a warning."""

from __future__ import annotations

import posixpath
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.errors import FuzzfileError
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.keys import (
    FILE_PREFIX,
    LOCATION_KEYS,
    SECRET_PREFIX,
    TRANSFER_KEYS,
    TRANSFER_POLICY_KEYS,
)
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.model import Job, Transfer, Volume, Workflow
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.settings import _parse_timeout_retry
from ansible_collections.fuzz.multinode.plugins.module_utils._fuzzfile.values import (
    _check_keys,
    _join,
    _mapping,
    _names,
    _secret_reference,
    _show,
    _string,
)

DIRECTIONS = ("ingress", "egress")
EGRESS_DIRECTORY = "the controller's egress directory"
HTTP_PREFIXES = ("https://", "http://")
S3_PREFIX = "s3://"
# An s3:// secret's value: these two are required, the rest optional.
S3_REQUIRED_KEYS = ("access_key_id", "secret_access_key")
S3_CREDENTIAL_KEYS = S3_REQUIRED_KEYS + ("session_token", "region", "endpoint_url")
# What each end of a transfer may be, for messages.
_ENDS = {
    ("ingress", "source"): "https://, http://, s3://BUCKET/KEY or file://<name of a top-level files entry>",
    ("ingress", "destination"): "file://PATH, a path inside the volume",
    ("egress", "source"): "file://PATH, a path inside the volume",
    ("egress", "destination"): "s3://BUCKET/KEY or file://PATH (a file under the controller's egress directory)",
}


def relative_path(uri: str, path: str, inside: str = "the volume") -> str:
    """The PATH of ``file://PATH`` inside a volume (or, ``inside``, the
    controller's egress directory), normalized to a relative path: a
    leading ``/`` is the root of the volume (``file:///ref.fa`` is
    ``ref.fa``, as the vendor's files write it). FuzzfileError naming
    ``path`` when it climbs out with ``..`` or names no file."""
    text = uri[len(FILE_PREFIX):]
    where = ("a path inside %s (file://dir/name, or file:///dir/name from its root), without '..'"
             % inside)
    if text.startswith("/"):
        text = text[1:]
        if text.startswith("/"):
            raise FuzzfileError("%s: %s starts with '//'; it must be %s" % (path, _show(uri), where))
    if ".." in text.split("/"):
        raise FuzzfileError("%s: %s escapes %s with '..'; it must be %s" % (path, _show(uri), inside, where))
    normal = posixpath.normpath(text) if text else ""
    if not text or normal == "." or text.endswith("/"):
        raise FuzzfileError("%s: %s names no file; it must be %s, ending in a file name"
                            % (path, _show(uri), where))
    return normal


def s3_location(uri: str, path: str) -> Tuple[str, str]:
    """(bucket, key) of ``s3://BUCKET/KEY``; FuzzfileError naming ``path``
    when either is missing or the key names a prefix (a "directory")."""
    bucket, _unused, key = uri[len(S3_PREFIX):].partition("/")
    if not bucket or not key or key.endswith("/"):
        raise FuzzfileError("%s: %s must name an object, s3://BUCKET/KEY (a key not ending in '/')"
                            % (path, _show(uri)))
    return bucket, key


def remote_end(direction: str) -> str:
    """The end of a transfer that is not the volume: the source of an
    ingress item, the destination of an egress item."""
    return "source" if direction == "ingress" else "destination"


def check_end(uri: str, direction: str, end: str, path: str, files: Mapping[str, str]) -> None:
    """Raise FuzzfileError naming ``path`` (the uri's field) unless ``uri``
    may be this end of a transfer (the module's docstring)."""
    remote = end == remote_end(direction)
    if uri.startswith(FILE_PREFIX):
        if direction == "ingress" and remote:
            name = uri[len(FILE_PREFIX):]
            if name not in files:
                raise FuzzfileError("%s: %s names no entry of the top-level files (%s)"
                                    % (path, _show(uri), _names(files, "the workflow has none")))
        else:
            relative_path(uri, path, EGRESS_DIRECTORY if remote else "the volume")
        return
    if remote and uri.startswith(S3_PREFIX):
        s3_location(uri, path)
        return
    if remote and direction == "ingress" and uri.startswith(HTTP_PREFIXES):
        if not uri.split("://", 1)[1].split("/", 1)[0]:
            raise FuzzfileError("%s: %s names no host" % (path, _show(uri)))
        return
    raise FuzzfileError("%s: %s is not a %s this collection copies %s: use %s" % (
        path, _show(uri), "source" if end == "source" else "destination",
        "from" if end == "source" else "to", _ENDS[(direction, end)]))


def _parse_transfer(value: Any, path: str, direction: str, files: Mapping[str, str],
                    warnings: List[str]) -> Transfer:
    """One ingress or egress item of a Fuzzfile, checked."""
    transfer = _mapping(value, path, "a mapping with 'source' and 'destination'")
    _check_keys(transfer, path, TRANSFER_KEYS)
    uris: Dict[str, str] = {}
    secret = None
    for end in ("source", "destination"):
        end_path = _join(path, end)
        if transfer.get(end) is None:
            raise FuzzfileError("%s: required (a mapping with 'uri')" % end_path)
        location = _mapping(transfer[end], end_path, "a mapping with 'uri'")
        _check_keys(location, end_path, LOCATION_KEYS)
        uri_path = _join(end_path, "uri")
        if location.get("uri") is None:
            raise FuzzfileError("%s: required" % uri_path)
        uris[end] = _string(location["uri"], uri_path, nonempty=True)
        check_end(uris[end], direction, end, uri_path, files)
        if location.get("secret") is not None:
            secret_path = _join(end_path, "secret")
            reference = _secret_reference(location["secret"], secret_path)
            if end == remote_end(direction) and not uris[end].startswith(FILE_PREFIX):
                secret = reference
            else:
                warnings.append("%s: ignored: %s needs no credentials" % (secret_path, _show(uris[end])))
    policy: Dict[str, Any] = {}
    if transfer.get("policy") is not None:
        policy_path = _join(path, "policy")
        raw_policy = _mapping(transfer["policy"], policy_path)
        _check_keys(raw_policy, policy_path, TRANSFER_POLICY_KEYS)
        policy = _parse_timeout_retry(raw_policy, policy_path, [])
    timeout_ns = policy.get("timeout_ns")
    return Transfer(
        source=uris["source"],
        destination=uris["destination"],
        secret=secret,
        timeout_seconds=timeout_ns / 10**9 if timeout_ns else None,
        attempts=max(1, policy.get("retry_attempts") or 1),
    )


def parse_transfers(volume: Mapping[Any, Any], path: str, files: Mapping[str, str],
                    warnings: List[str]) -> Dict[str, List[Transfer]]:
    """A Fuzzfile volume's ``ingress`` and ``egress`` lists, checked."""
    found: Dict[str, List[Transfer]] = {}
    for direction in DIRECTIONS:
        items: List[Transfer] = []
        if volume.get(direction) is not None:
            items_path = _join(path, direction)
            if not isinstance(volume[direction], list):
                raise FuzzfileError("%s: must be a list, got %s" % (items_path, _show(volume[direction])))
            for index, item in enumerate(volume[direction]):
                items.append(_parse_transfer(item, "%s[%d]" % (items_path, index), direction, files, warnings))
        found[direction] = items
    return found


def check_volume_transfers(volume: Volume, path: str, files: Mapping[str, str]) -> None:
    """Raise FuzzfileError unless every transfer of ``volume`` (from a JSON
    form) has ends the Fuzzfile could have given it (``check_end``)."""
    for direction in DIRECTIONS:
        for index, item in enumerate(getattr(volume, direction)):
            item_path = "%s.%s[%d]" % (path, direction, index)
            for end in ("source", "destination"):
                check_end(getattr(item, end), direction, end, _join(item_path, end), files)


# -- a run's transfers --------------------------------------------------------

def secret_name(reference: Optional[str]) -> Optional[str]:
    """The name in ``fuzz_multinode_secrets`` of a ``secret://NAME``."""
    return reference[len(SECRET_PREFIX):] if reference else None


def remote_kind(item: Transfer, direction: str) -> str:
    """What the remote end is: ``s3``, ``http`` (either scheme), ``file``
    (a top-level files entry, or the controller for egress)."""
    uri = getattr(item, remote_end(direction))
    if uri.startswith(S3_PREFIX):
        return "s3"
    if uri.startswith(HTTP_PREFIXES):
        return "http"
    return "file"


def unmounted_volumes(workflow: Workflow) -> List[str]:
    """Notes on the volumes with transfers that no job (nor service)
    mounts: their transfers are not run (nothing would see them)."""
    mounted = {volume for unit in workflow.units.values() for volume in unit.volumes}
    return ["volumes.%s: no job mounts it, so its ingress and egress are not run" % name
            for name, volume in workflow.volumes.items()
            if name not in mounted and (volume.ingress or volume.egress)]


def transfer_plan(workflow: Workflow, run: Sequence[Job]) -> List[Dict[str, Any]]:
    """The transfers of a run (its jobs and services, ``run``): for each volume that one
    of them mounts and that has ingress or egress, in the Fuzzfile's order,
    ``{volume, store, hosts, s3, ingress, egress}``: ``hosts``, how many of
    the play's first hosts run a job that mounts it (every job runs on the
    first ``max_hosts`` hosts: the first host has every volume), ``s3``,
    whether an item is ``s3://``, and each item as ``{field, source,
    destination, secret (its name), timeout_seconds, attempts}``."""
    plan = []
    for name, volume in workflow.volumes.items():
        hosts = max((job.max_hosts for job in run if name in job.volumes), default=0)
        if not hosts or not (volume.ingress or volume.egress):
            continue
        entry: Dict[str, Any] = {"volume": name, "store": volume.store, "hosts": hosts, "s3": False}
        for direction in DIRECTIONS:
            entry[direction] = []
            for index, item in enumerate(getattr(volume, direction)):
                entry["s3"] = entry["s3"] or remote_kind(item, direction) == "s3"
                entry[direction].append(dict(item.to_dict(), field="volumes.%s.%s[%d]" % (name, direction, index),
                                             secret=secret_name(item.secret)))
        plan.append(entry)
    return plan


def s3_credentials(value: Any) -> bool:
    """Whether a value of ``fuzz_multinode_secrets`` is S3 credentials: a
    mapping of ``access_key_id`` and ``secret_access_key``, non-empty
    strings, and optionally ``session_token``, ``region`` and
    ``endpoint_url`` (strings). The node runtime reads the same
    (multinode_runtime/transfers.py)."""
    if not isinstance(value, Mapping) or not set(S3_REQUIRED_KEYS) <= set(value) \
            or not set(value) <= set(S3_CREDENTIAL_KEYS):
        return False
    return all(isinstance(value[key], str) and (value[key] or key not in S3_REQUIRED_KEYS) for key in value)


def s3_secret_names(secrets: Any) -> List[str]:
    """The names of the values of ``secrets`` (``fuzz_multinode_secrets``)
    that are S3 credentials (``s3_credentials``). Names only."""
    if not isinstance(secrets, Mapping):
        return []
    return sorted(name for name, value in secrets.items() if isinstance(name, str) and s3_credentials(value))


def transfer_secrets(secrets: Any, plan: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The values of the secrets a run's transfers (``transfer_plan``) use,
    by name; the others are left out."""
    names = {item.get("secret") for volume in plan for direction in DIRECTIONS
             for item in volume.get(direction, [])}
    return {name: value for name, value in (secrets or {}).items() if name in names}


def check_transfer_secrets(plan: Sequence[Mapping[str, Any]], secret_names: Optional[Iterable[Any]] = None,
                           registry_secret_names: Optional[Iterable[Any]] = None,
                           s3_names: Optional[Iterable[Any]] = None) -> None:
    """Raise FuzzfileError naming the first transfer of ``plan`` whose
    secret is not among ``secret_names`` (the names defined in
    ``fuzz_multinode_secrets``), or whose value has not the form its remote
    end takes: S3 credentials (``s3_names``, ``s3_secret_names``) for
    ``s3://``, a username and a password (``registry_secret_names``) for
    ``https://`` and ``http://``. Each list left out (None) is not checked.
    Messages name the field and the reference, never a value."""
    for volume in plan:
        for direction in DIRECTIONS:
            for item in volume.get(direction, []):
                name = item.get("secret")
                if not name:
                    continue
                field = "%s.%s.secret: %s%s" % (item["field"], remote_end(direction), SECRET_PREFIX, name)
                remote = remote_kind(Transfer(item["source"], item["destination"]), direction)
                if secret_names is not None and name not in set(secret_names):
                    raise FuzzfileError(
                        "%s is not defined in fuzz_multinode_secrets (it maps each secret name, such as %s, "
                        "to its value; keep it in a vault-encrypted vars file and pass it with -e @FILE)"
                        % (field, name))
                if remote == "s3" and s3_names is not None and name not in set(s3_names):
                    raise FuzzfileError(
                        "%s: its value in fuzz_multinode_secrets is not S3 credentials: it must be a "
                        "mapping of access_key_id and secret_access_key (non-empty strings), and optionally "
                        "session_token, region and endpoint_url" % field)
                if remote == "http" and registry_secret_names is not None and name not in set(registry_secret_names):
                    raise FuzzfileError(
                        "%s: its value in fuzz_multinode_secrets is not HTTP credentials: it must be a "
                        "mapping of username and password (basic authentication), both non-empty strings, "
                        "the user name without ':'" % field)
