"""A node's Container Device Interface (CDI) specifications: the devices
they name (resource.devices' inventory of a node).

Standalone on purpose (the standard library only, no import of the
runtime's package): the controller runs this file as it is on a node that
is not prepared yet (`python3 -I - < cdi.py`, fuzz.multinode.node_state),
and prints how many devices of each kind the node has; the runtime's
devices.py imports it for allocation.

The files: JSON or YAML in /etc/cdi and /var/run/cdi (the directories
Podman reads itself; `nvidia-ctk cdi generate` writes one). A
specification names a device kind (`kind: nvidia.com/gpu`) and its
devices, each with the edits that give a container the device
(`containerEdits`: its device nodes, environment). A device named `all` is
every device at once, not a device. Names whose device nodes are the same
are one device (nvidia-ctk can name a GPU by its index and by its UUID). A
specification in /var/run/cdi replaces a device of the same kind and name
in /etc/cdi, as CDI's dynamic specifications do. YAML needs PyYAML
(python3-yaml).
"""

import json
import os
import re
import sys

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")  # later ones win, as in CDI
CDI_SUFFIXES = (".json", ".yaml", ".yml")
CDI_FILE_LIMIT = 16 << 20  # bytes read of one specification
# Names that identify a GPU wherever it is seen (nvidia-ctk's UUID names):
# preferred in the visible-devices variables over an index, which a
# container numbers anew.
_UUID_NAME = re.compile(r"(GPU|MIG)-[0-9A-Fa-f-]+\Z")
_KIND = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class CdiError(Exception):
    """A specification that cannot be read or is no CDI specification: the
    message names the file and the field."""


class Device:
    """One device of the node: its kind, its names (the first is the one
    Podman is given), the host paths of its device nodes, its env edits."""

    def __init__(self, kind, names, nodes, env):
        self.kind, self.names, self.nodes, self.env = kind, list(names), list(nodes), list(env)

    @property
    def name(self):
        return self.names[0]

    @property
    def visible_name(self):
        """Its name in CUDA_VISIBLE_DEVICES: a UUID name when it has one."""
        return next((name for name in self.names if _UUID_NAME.match(name)), self.name)

    def identity(self):
        return tuple(sorted(self.nodes)) if self.nodes else ("name", self.name)

    def to_dict(self):
        return {"names": self.names, "nodes": self.nodes, "env": self.env}

    @classmethod
    def from_dict(cls, kind, data):
        return cls(kind, data["names"], data["nodes"], data["env"])


def _load(path):
    """The decoded contents of one specification file."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(CDI_FILE_LIMIT + 1)
    except OSError as exc:
        raise CdiError("CDI specification %s: cannot be read: %s" % (path, exc.strerror)) from None
    if len(text) > CDI_FILE_LIMIT:
        raise CdiError("CDI specification %s: larger than %d bytes" % (path, CDI_FILE_LIMIT))
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise CdiError("CDI specification %s: not valid JSON: %s" % (path, exc)) from None
    try:
        import yaml  # python3-yaml: only for YAML specifications
    except ImportError:
        raise CdiError(
            "CDI specification %s is YAML, and this node's Python has no YAML parser: install "
            "python3-yaml, or write the specification as JSON (nvidia-ctk cdi generate "
            "--format=json --output=/etc/cdi/nvidia.json)" % path) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CdiError("CDI specification %s: not valid YAML: %s" % (
            path, " ".join(str(exc).split()))) from None


def _edits(data, path, where):
    """(device node host paths, env entries) of a containerEdits mapping."""
    if data is None:
        return [], []
    if not isinstance(data, dict):
        raise CdiError("CDI specification %s: %s: must be a mapping" % (path, where))
    nodes = []
    device_nodes = data.get("deviceNodes") or []
    if not isinstance(device_nodes, list):
        raise CdiError("CDI specification %s: %s.deviceNodes: must be a list" % (path, where))
    for index, node in enumerate(device_nodes):
        field = "%s.deviceNodes[%d]" % (where, index)
        if not isinstance(node, dict):
            raise CdiError("CDI specification %s: %s: must be a mapping" % (path, field))
        host = node.get("hostPath") or node.get("path")
        if not isinstance(host, str) or not host.startswith("/") or "\0" in host:
            raise CdiError("CDI specification %s: %s.path: must be an absolute path, got %r" % (
                path, field, node.get("path")))
        nodes.append(os.path.normpath(host))
    env = data.get("env") or []
    if not isinstance(env, list) or not all(isinstance(item, str) and _ENV.match(item) and "\0" not in item
                                            for item in env):
        raise CdiError("CDI specification %s: %s.env: must be a list of KEY=VALUE strings" % (path, where))
    return nodes, env


def parse_spec(data, path):
    """(kind, [Device], the env of its top-level containerEdits) of one
    decoded specification; `all` is not a device."""
    if not isinstance(data, dict):
        raise CdiError("CDI specification %s: not a mapping" % path)
    if not isinstance(data.get("cdiVersion"), str):
        raise CdiError("CDI specification %s: cdiVersion: must be a string" % path)
    kind = data.get("kind")
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise CdiError("CDI specification %s: kind: must be VENDOR/CLASS, such as nvidia.com/gpu, "
                       "got %r" % (path, kind))
    entries = data.get("devices")
    if not isinstance(entries, list):
        raise CdiError("CDI specification %s: devices: must be a list" % path)
    devices = []
    for index, entry in enumerate(entries):
        where = "devices[%d]" % index
        if not isinstance(entry, dict):
            raise CdiError("CDI specification %s: %s: must be a mapping" % (path, where))
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise CdiError("CDI specification %s: %s.name: must be letters, digits and - _ . :, "
                           "got %r" % (path, where, name))
        nodes, env = _edits(entry.get("containerEdits"), path, where + ".containerEdits")
        if name != "all":
            devices.append(Device(kind, [name], nodes, env))
    _unused, common = _edits(data.get("containerEdits"), path, "containerEdits")
    return kind, devices, common


def read_node_devices(dirs=None, strict=True, problems=None):
    """This node's devices: ({kind: [Device]}, {kind: the env of its
    specifications' top-level containerEdits}). A file that cannot be read,
    or is no CDI specification, fails naming the file and the field; not
    `strict`, it is passed over (and why, added to `problems` if given)."""
    by_name, common = {}, {}
    for directory in dirs or CDI_DIRS:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in names:
            path = os.path.join(directory, entry)
            if not entry.endswith(CDI_SUFFIXES) or not os.path.isfile(path):
                continue
            try:
                kind, devices, env = parse_spec(_load(path), path)
            except CdiError as exc:
                if strict:
                    raise
                if problems is not None:
                    problems.append(str(exc))
                continue
            kind_env = common.setdefault(kind, [])
            kind_env += [item for item in env if item not in kind_env]
            for device in devices:
                by_name[(kind, device.name)] = device
    merged = {}
    for (kind, _unused), device in by_name.items():
        same = next((d for d in merged.setdefault(kind, []) if d.identity() == device.identity()), None)
        if same is None:
            merged[kind].append(Device(kind, device.names, device.nodes, device.env))
        else:
            same.names += [name for name in device.names if name not in same.names]
            same.env += [item for item in device.env if item not in same.env]
    return merged, common


def device_counts(dirs=None):
    """({kind: how many devices}, [why a specification was passed over]):
    what the controller learns of a node before any job is placed on it."""
    problems = []
    devices, _unused = read_node_devices(dirs, strict=False, problems=problems)
    return {kind: len(found) for kind, found in sorted(devices.items())}, problems


if __name__ == "__main__":
    COUNTS, PROBLEMS = device_counts()
    sys.stdout.write("devices %s\n" % json.dumps({"counts": COUNTS, "problems": PROBLEMS}, sort_keys=True))
