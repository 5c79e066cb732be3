"""The job spec: what the controller planned for a job (rank_plan), as the
runtime reads it from the job's spec.json. Every default lives here.

The controller writes every field (plugins/module_utils/job_spec.py); the
defaults are what the runtime assumes when a field is absent, e.g. in a spec
written by an older controller.
"""

import json
import os
import re

from . import registry
from .errors import RuntimeFailure

KILL_GRACE = 10  # seconds between SIGTERM and SIGKILL at a teardown
VOLUME_ROOT = "/var/lib/fuzz-multinode/volumes"
CLAIM_LEASE = 120  # seconds a claim with nothing of its run alive stays live (claims.py)

# Every runtime call reads a spec, and a call's Python start is what a job's
# steps wait on: these records are plain classes, not dataclasses, whose
# import (dataclasses, inspect, typing) and class creation cost a call
# about as much again as the rest of reading the spec.
REQUIRED = object()  # a field's default: none, it must be given


class Factory:
    """A field's default made anew for each record (a list, a dict)."""

    def __init__(self, make):
        self.make = make


class Record:
    """A frozen record of FIELDS, (name, default) pairs in order: made with
    positional or keyword values, compared and hashed by them, changed only
    into a new record (with_changes)."""

    FIELDS = ()

    def __init__(self, *args, **kwargs):
        names = self.field_names()
        if len(args) > len(names):
            raise TypeError("%s takes %d values, %d given" % (type(self).__name__, len(names), len(args)))
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError("%s has no field %r" % (type(self).__name__, name))
            if name in values:
                raise TypeError("%s got two values for %r" % (type(self).__name__, name))
            values[name] = value
        for name, default in self.FIELDS:
            if name not in values:
                if default is REQUIRED:
                    raise TypeError("%s needs a value for %r" % (type(self).__name__, name))
                values[name] = default.make() if isinstance(default, Factory) else default
            object.__setattr__(self, name, values[name])

    @classmethod
    def field_names(cls):
        return [name for name, default in cls.FIELDS]

    def values(self):
        return tuple(getattr(self, name) for name, default in self.FIELDS)

    def with_changes(self, **changes):
        """A copy with these fields changed."""
        values = dict(zip(self.field_names(), self.values()))
        values.update(changes)
        return type(self)(**values)

    def __setattr__(self, name, value):
        raise AttributeError("%s is frozen: cannot set %r" % (type(self).__name__, name))

    def __delattr__(self, name):
        raise AttributeError("%s is frozen: cannot delete %r" % (type(self).__name__, name))

    def __eq__(self, other):
        return type(other) is type(self) and other.values() == self.values()

    def __hash__(self):
        return hash((type(self),) + self.values())

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % (name, getattr(self, name)) for name, default in self.FIELDS))


class Rank(Record):
    """One rank of a job, or one task of a task array."""

    FIELDS = (
        ("rank", REQUIRED),         # rank number, or the task's index
        ("name", ""),               # its host name, <job>-<rank or task id>
        ("node", ""),               # inventory name of its node
        ("address", ""),            # the address other nodes reach it by
        ("slots", 1),
        ("env", Factory(dict)),
        ("task_id", None),          # a task array's task: its FB_TASK_ID
        ("argv", None),             # a task's own command
        ("secret_args", None),      # and the secret_args (SecretArg) of that command
    )

    @property
    def is_task(self):
        return self.task_id is not None

    @property
    def log_name(self):
        """The file name of its log on its node (registry.log_name)."""
        return registry.log_name(self)

    def summary(self, status):
        return {"rank": self.rank, "name": self.name, "node": self.node, "status": status}


class Resources(Record):
    """resource.cpu / resource.memory / resource.devices of the Fuzzfile:
    what each rank (or task) asks of its node."""

    FIELDS = (
        ("cores", None),
        ("affinity", None),         # CORE, SOCKET or NUMA
        ("memory_bytes", None),
        ("devices", Factory(dict)),  # CDI kind: how many (devices.py)
    )


class SecretArg(Record):
    """An argument of argv that expands secret:// values: its index and its
    parts, each ("text", literal) or ("secret", scope/name)."""

    FIELDS = (("index", REQUIRED), ("parts", REQUIRED))


class JobFile(Record):
    """A file the job places on its nodes (Fuzzfile `files`)."""

    FIELDS = (("path", REQUIRED), ("contents", REQUIRED), ("name", ""))


class Mount(Record):
    """A volume the job's ranks see at `location` (volumes.py)."""

    FIELDS = (
        ("location", REQUIRED),
        ("volume", REQUIRED),
        ("store", REQUIRED),        # "ephemeral", "persistent/<name>", "user/persistent" or "account/persistent"
    )


class TaskArray(Record):
    FIELDS = (("start", REQUIRED), ("end", REQUIRED), ("concurrency", 1))


class JobSpec(Record):
    FIELDS = (
        ("job", REQUIRED),
        ("run", ""),                # the run of run-job.yml (claims.py); "": none given
        ("user", "fuzz"),
        ("mode", "command"),        # "command" or "script"
        ("argv", Factory(list)),
        ("script", None),
        ("cwd", "/"),
        ("secret_env", Factory(dict)),   # env key: secret name
        ("secret_args", Factory(list)),  # SecretArg
        ("files", Factory(list)),        # JobFile
        ("kill_grace", KILL_GRACE),
        ("claim_lease", CLAIM_LEASE),    # fuzz_multinode_claim_lease
        ("timeout", None),               # policy.timeout.execute, seconds
        ("resources", Factory(Resources)),
        ("implementation", "generic"),
        ("launcher", Factory(list)),     # rank 0's argv prefix (MPI)
        ("nodes", 1),
        ("local", False),                # every rank on this one node
        # "container": every rank in the job's image (containers.py); "host":
        # on the bare host, as a spec that names no execution (an older one).
        ("execution", "host"),
        ("image", Factory(dict)),        # {"uri": ..., "secret": ...}
        ("ranks", Factory(list)),        # Rank
        ("task_array", None),            # TaskArray
        ("mounts", Factory(list)),       # Mount
        ("volume_root", VOLUME_ROOT),
        ("volume_sharing", "auto"),      # "shared", "node-local", or "auto" (volumes.is_shared)
        # A service's: {"readiness_probe": its probe in the Fuzzfile's form (a
        # port's number) or None, "ready_timeout": seconds} (readiness.py); a
        # job's: None.
        ("service", None),
        # Names beside the ranks' in the job's /etc/hosts block: the run's
        # services as <service>.svc, each (name, address).
        ("extra_hosts", Factory(list)),
        # Set by `head --controller-timeout`, not by the controller's plan.
        ("controller_timeout", 0),
    )

    @classmethod
    def from_dict(cls, data):
        """The spec of a decoded spec.json; a malformed one is a RuntimeFailure."""
        try:
            known = set(cls.field_names())
            values = {key: value for key, value in data.items() if key in known and value is not None}
            if not values.get("cwd"):
                values.pop("cwd", None)  # no cwd: "/"
            values["ranks"] = [_rank(rank) for rank in values.get("ranks", [])]
            values["resources"] = Resources(**{k: v for k, v in (values.get("resources") or {}).items()
                                               if k in _RESOURCE_FIELDS})
            _check_devices(values["resources"].devices)
            values["secret_args"] = _secret_args(values.get("secret_args", []))
            values["files"] = [JobFile(entry["path"], entry["contents"], entry.get("name", ""))
                               for entry in values.get("files", [])]
            values["mounts"] = [Mount(entry["location"], entry["volume"], entry["store"])
                                for entry in values.get("mounts", [])]
            values["extra_hosts"] = [_host_entry(entry) for entry in values.get("extra_hosts", [])]
            if "task_array" in values:
                values["task_array"] = TaskArray(**values["task_array"])
            check_claim_lease(values.get("claim_lease", CLAIM_LEASE))
            return cls(**values)
        except (KeyError, TypeError, AttributeError) as exc:
            raise RuntimeFailure("malformed job spec (%s: %s)" % (type(exc).__name__, exc)) from None

    @property
    def head(self):
        """Rank 0 (a task array's first task): its node is the head."""
        return self.ranks[0]

    def secret_names(self):
        """The secret names (scope/name) the job references, in its env
        (secret_env) and in arguments that expand them (secret_args, a
        task's own too)."""
        names = set(self.secret_env.values())
        for item in self.secret_args + [arg for rank in self.ranks for arg in rank.secret_args or []]:
            names.update(value for kind, value in item.parts if kind == "secret")
        return names

    def nodes_except(self, node):
        """{node: its first rank} of the job's nodes other than `node`."""
        others = {}
        for rank in self.ranks:
            if rank.node != node:
                others.setdefault(rank.node, rank)
        return others

    def rank_numbered(self, number):
        for rank in self.ranks:
            if rank.rank == number:
                return rank
        return None


def _rank(data):
    rank = {k: v for k, v in data.items() if k in _RANK_FIELDS}
    if rank.get("secret_args") is not None:
        rank["secret_args"] = _secret_args(rank["secret_args"])
    return Rank(**rank)


def _secret_args(items):
    """SecretArg of each {index, parts} entry: an index and [kind, value]
    parts, kind text or secret."""
    found = []
    for item in items:
        parts = [tuple(part) for part in item["parts"]]
        if (isinstance(item["index"], bool) or not isinstance(item["index"], int)
                or any(len(part) != 2 or part[0] not in ("text", "secret") or not isinstance(part[1], str)
                       for part in parts)):
            raise RuntimeFailure("malformed job spec (secret_args: %r)" % (item,))
        found.append(SecretArg(item["index"], parts))
    return found


def _host_entry(entry):
    """(name, address) of an extra_hosts entry: one /etc/hosts line each, so
    neither may hold anything but a name's or an address's characters."""
    name, address = entry
    if not (isinstance(name, str) and _HOST_NAME.match(name) and isinstance(address, str)
            and _HOST_ADDRESS.match(address)):
        raise RuntimeFailure("malformed job spec (extra_hosts: %r)" % (entry,))
    return name, address


_HOST_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9.-]*\Z")
_HOST_ADDRESS = re.compile(r"\A[0-9A-Fa-f.:]+\Z")


# A CDI device kind, VENDOR/CLASS (the controller checks the Fuzzfile's the same way).
_DEVICE_KIND = re.compile(r"\A[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")


def _check_devices(devices):
    """resources.devices: {CDI kind: a positive count}; a kind is a podman argument."""
    if not isinstance(devices, dict) or not all(
            isinstance(kind, str) and _DEVICE_KIND.match(kind) and isinstance(count, int)
            and not isinstance(count, bool) and count >= 1 for kind, count in devices.items()):
        raise RuntimeFailure("malformed job spec (resources.devices: %r)" % (devices,))


def check_claim_lease(value):
    """A claim's lease is a positive whole number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RuntimeFailure("malformed job spec (claim_lease, the role variable "
                             "fuzz_multinode_claim_lease: must be a positive integer "
                             "of seconds, got %r)" % (value,))


_RANK_FIELDS = set(Rank.field_names())
_RESOURCE_FIELDS = set(Resources.field_names())


def load_spec(job):
    """The spec of a job registered on this node."""
    try:
        with open(os.path.join(registry.job_dir(job), registry.SPEC_FILE)) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise RuntimeFailure("job %s is not active on this node" % job) from None
    return JobSpec.from_dict(data)


def parse_spec(data):
    """The spec given to `prepare` (decoded JSON)."""
    if not isinstance(data, dict):
        raise RuntimeFailure("malformed job spec: not a JSON object")
    return JobSpec.from_dict(data)
