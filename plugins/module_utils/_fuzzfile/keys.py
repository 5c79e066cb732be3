# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What a Fuzzfile may contain: the keys of each section, the enumerated
values and limits, the reference prefixes, and the note recorded for each
feature this collection validates but does not execute."""

from __future__ import annotations

import re

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
# An image.secret's value in fuzz_multinode_secrets: registry credentials.
REGISTRY_CREDENTIAL_KEYS = ("username", "password")
FILE_PREFIX = "file://"
VOLUME_PREFIX = "volume://"
INT_MAX = 2**31 - 1  # counts (nodes, cores, procs-per-node)
SIZE_MAX = 2**63 - 1  # bytes

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
# A service's policy: seen in the vendor's own files, though its API's
# services have none; validated as a job's and ignored (NOTE).
SERVICE_KEYS = JOB_KEYS + ("persist", "readiness-probe")
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
# network.endpoints[]: our reading of the vendor's form (docs/design.md, "The
# Fuzzfile model"); `type` is Fuzzball's ingress kind, accepted and ignored;
# `scope` (user, public, group, a templated value) who may reach it: kept
# and shown, not enforced.
ENDPOINT_KEYS = ("name", "port-name", "port", "protocol", "path", "type", "scope")
ENDPOINT_PROTOCOLS = ("http", "https", "tcp", "udp", "grpc")
ENDPOINT_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?\Z")
ENDPOINT_NAME_MAX = 63  # one DNS label
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
# v1 volumes may have a name too: the vendor's client sets it to the key.
VOLUME_V4_KEYS = ("use", "size", "annotations")
TRANSFER_KEYS = ("source", "destination", "policy")
TRANSFER_POLICY_KEYS = ("timeout", "retry")
LOCATION_KEYS = ("uri", "secret")

NOTE = {
    "cpu.threads": "hardware threads selection is not supported yet; ignored",
    "cpu.sockets": "socket counts are not supported yet; ignored",
    # resource.devices is carried out (CDI devices allocated on each node):
    # no note. exclusive and annotations are Fuzzball's scheduler's hints.
    "exclusive": "exclusive node use is not enforced (a node's devices are never shared "
    "between jobs; its CPUs may be); noted",
    "resource.annotations": "resource annotations are scheduler hints, not used here; ignored",
    "retry": "retries are not supported yet (Fuzzball ignores them too); ignored",
    "restart": "restart policies are not supported yet; ignored",
    "network": "network settings are not supported yet; ignored",
    "network.host": "false is not supported: a service runs on its nodes' own network, as "
    "with host: true; ignored",
    "endpoint.type": "ingress kinds are not supported (there is no ingress: an endpoint is "
    "reached at its service's rank 0 address); ignored",
    "endpoint.scope": "not enforced (there is no ingress): the endpoint is reached at its "
    "service's rank 0 node address and port by anyone who can reach that node; the scope is "
    "recorded and shown with the endpoint's URL",
    "annotations": "workflow annotations are not supported yet; ignored",
    "storage_class": "storage classes are not supported yet: the volume is kept under "
    "fuzz_multinode_volume_root like every other",
    # formatted with the name and the volume's key
    "ephemeral_name": "the ephemeral volume's name %s is noted only: the volume is the run's, "
    "its directory named by its key %s, as for volume://user/ephemeral",
    "service.policy": "a service has no policy in Fuzzball (its API drops it); validated as a "
    "job's and ignored",
}
