# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_programs: the node runtime package,
the SSH wrapper and the generic helper installed in one command over the
host's connection. The files travel as one tar archive on the command's
stdin (copying the runtime's files one by one took a module round trip
per file: half of a node's preparation); the node side, a short python3
script, replaces only what differs, each file by a rename, removes what an
older install left in the runtime directory, and compiles the runtime."""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import tarfile

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUNTIME_PATH
from ansible_collections.fuzz.multinode.plugins.plugin_utils.installed_files import tree_files

ARGUMENT_SPEC = dict(
    runtime_source=dict(type="path", required=True),
    programs=dict(type="list", elements="dict", default=[], options=dict(
        src=dict(type="path", required=True),
        dest=dict(type="path", required=True),
    )),
)

# Runs as root on the node: argv is the runtime directory and "check" or
# "install"; stdin the archive (base64), whose member names are the
# absolute paths to install. Two preparations of one node at once do the
# same work harmlessly: every file is replaced by a rename, and nothing is
# removed that the collection ships. Prints what changed, as JSON.
INSTALL = r"""
import base64, compileall, io, json, os, sys, tarfile
runtime, mode = sys.argv[1], sys.argv[2]
changed, removed, shipped = [], [], set()
with tarfile.open(fileobj=io.BytesIO(base64.b64decode(sys.stdin.buffer.read()))) as archive:
    for member in archive.getmembers():
        path, data = member.name, archive.extractfile(member).read()
        shipped.add(path)
        try:
            with open(path, "rb") as old:
                stat = os.fstat(old.fileno())
                if (old.read() == data and stat.st_mode & 0o7777 == member.mode
                        and stat.st_uid == stat.st_gid == 0):
                    continue
        except FileNotFoundError:
            pass
        changed.append(path)
        if mode != "install":
            continue
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        new = "%s.new-%d" % (path, os.getpid())
        with open(new, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), member.mode)
            os.fchown(handle.fileno(), 0, 0)
        os.replace(new, path)
stale = [runtime + ".py"] if os.path.exists(runtime + ".py") else []
for top, dirs, files in os.walk(runtime):
    for name in files:
        path = os.path.join(top, name)
        if os.path.basename(top) == "__pycache__":
            source = os.path.join(os.path.dirname(top), name.split(".")[0] + ".py")
            if source not in shipped:
                stale.append(path)
        elif path not in shipped:
            stale.append(path)
for path in stale:
    removed.append(path)
    if mode == "install":
        os.unlink(path)
if mode == "install":
    compileall.compile_dir(runtime, quiet=1)
print(json.dumps({"changed": changed, "removed": removed}))
"""


def archive(files):
    """A tar archive (base64) of (controller path, node path, mode) triples."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for source, dest, mode in files:
            with open(source, "rb") as handle:
                data = handle.read()
            member = tarfile.TarInfo(dest)
            member.size, member.mode = len(data), mode
            tar.addfile(member, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue())


def runtime_files(source):
    """The runtime package's files under `source`, as (controller path,
    node path, mode); no bytecode (the node compiles its own)."""
    return [(os.path.join(source, name), os.path.join(RUNTIME_PATH, name), 0o644) for name in tree_files(source)]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            files = runtime_files(params["runtime_source"])
            files += [(program["src"], program["dest"], 0o755) for program in params["programs"]]
            data = archive(files)
        except OSError as exc:
            raise AnsibleError("cannot read the node programs on the controller: %s" % exc) from exc
        command = "/usr/bin/python3 -I -c %s %s %s" % (
            shlex.quote(INSTALL.strip()), shlex.quote(RUNTIME_PATH), "check" if self._task.check_mode else "install")
        done = self._low_level_execute_command(command, sudoable=True, in_data=data)
        try:
            answer = json.loads(done.get("stdout", "").strip().splitlines()[-1])
        except (IndexError, ValueError):
            answer = None
        if done.get("rc") != 0 or not isinstance(answer, dict):
            result.update(failed=True, msg="cannot install the node programs: %s" % (
                (done.get("stderr") or done.get("stdout") or "python3 exited with status %s" % done.get("rc")).strip()))
            return result
        result.update(changed=bool(answer["changed"] or answer["removed"]),
                      installed=answer["changed"], removed=answer["removed"])
        return result
