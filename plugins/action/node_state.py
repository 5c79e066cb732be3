# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_state: in one command over the
host's connection (no module shipped, no facts gathered), whether the node
is prepared already, what preparing it needs to know (the SSH tools it
lacks, whether systemd runs, whether the runtime's Python has boto3), the
address it reaches the others by, and how many CDI devices of each kind it
has (resource.devices: the controller places and refuses jobs by them
before any host is touched). What preparing installs is hashed here, from
the files themselves (`installed`), into the fingerprint a prepared node
carries."""

from __future__ import annotations

import hashlib
import json
import os

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    NODE_STATE_ARGUMENT_SPEC,
    RUNTIME_PATH,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.installed_files import installed_fingerprint

# The runtime's CDI reader, run as it is (it imports nothing of the
# runtime's): the node may not have the runtime yet.
CDI_READER = os.path.join(os.path.dirname(__file__), "..", "..", "files", "multinode-runtime",
                          "multinode_runtime", "cdi.py")

STAMP = "/etc/fuzz-multinode/prepared"  # written by the node role's prepare.yml

SSH_TOOLS = ("/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen")  # what preparing needs

# The node's source address: of the route to a public address, as Ansible's
# default IPv4 fact has it (no packet is sent).
ADDRESS = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("8.8.8.8", 53))
    print("address", s.getsockname()[0])
except OSError:
    print("address")
"""

# One Python for what needs one (a Python's start is the check's largest
# cost on a busy node): the CDI devices ("devices {JSON}"), whether the
# runtime's Python has boto3 (found, not imported: its import alone takes
# about 0.3 s), the address. Without that Python, any python3 tells the
# address and the devices are unknown.
NODE_FACTS = """
%(cdi_reader)s
import importlib.util
if importlib.util.find_spec("boto3") is not None:
    print("boto3")
""" + ADDRESS

# The stamp (the fingerprint, then the nodes whose host keys are pinned),
# each line after "stamp "; whether sshd runs (local mode has none); the
# SSH tools missing; whether systemd runs; then the node's facts: FACTS
# when the devices or boto3 are asked for, else ADDRESS_ONLY.
CHECK = r"""
sed 's/^/stamp /' %(stamp)s 2>/dev/null
if test %(local)s = yes ||
   test "$(cat "/proc/$(cat /run/sshd.pid 2>/dev/null)/comm" 2>/dev/null)" = sshd
then echo sshd; else echo no-sshd; fi
for tool in %(tools)s; do test -e "$tool" || echo "missing $tool"; done
test ! -d /run/systemd/system || echo systemd
%(facts)s
"""

# The facts from the runtime's Python, else the address from any python3.
# The here-document is not last: Ansible appends " && sleep 0" to the command.
FACTS = r"""
/usr/bin/python3 -I - <<'FMN_NODE_FACTS' 2>/dev/null ||
%(node_facts)s
FMN_NODE_FACTS
python3 -I -c '%(address)s' 2>/dev/null || echo address
"""

# The address alone: the source of the route to a public address, as
# ADDRESS finds it, from ip (no Python starts), else from any python3.
ADDRESS_ONLY = r"""
route=$(ip route get 8.8.8.8 2>/dev/null) && echo "address $(echo "$route" | sed -n 's/.* src \([^ ]*\).*/\1/p;q')" ||
python3 -I -c '%(address)s' 2>/dev/null || echo address
"""


def is_prepared(stamp, fingerprint, nodes):
    """Prepared: the stamp has this fingerprint and pins every node of the
    play (a node prepared for more nodes serves a job on fewer)."""
    return bool(stamp) and stamp[0] == fingerprint and set(nodes) <= set(stamp[1:])


def read_devices(lines):
    """The CDI reader's answer: {"counts": {kind: n} or None (unknown: no
    answer), "problems": [specifications passed over, and why]}."""
    for line in lines:
        if line.startswith("devices "):
            try:
                found = json.loads(line[len("devices "):])
                return {"counts": dict(found["counts"]), "problems": list(found["problems"])}
            except (ValueError, KeyError, TypeError):
                break
    return {"counts": None, "problems": []}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=NODE_STATE_ARGUMENT_SPEC)
        try:
            installed = installed_fingerprint(params["installed"])
        except OSError as exc:
            result.update(failed=True, msg="cannot read what node preparation installs, on the controller: %s" % exc)
            return result
        fingerprint = hashlib.sha256(("%s\0%s" % (params["fingerprint"], installed)).encode()).hexdigest()
        if params["facts"]:
            with open(CDI_READER) as handle:
                facts = FACTS.strip() % {"node_facts": NODE_FACTS % {"cdi_reader": handle.read()}, "address": ADDRESS}
        else:
            facts = ADDRESS_ONLY.strip() % {"address": ADDRESS}
        # Stripped: Ansible appends " && sleep 0" to the command.
        command = CHECK.strip() % {"stamp": STAMP, "local": "yes" if params["local"] else "no",
                                   "tools": " ".join(SSH_TOOLS), "facts": facts}
        done = self._low_level_execute_command(command, sudoable=True)
        lines = done.get("stdout", "").splitlines()
        sshd = [line for line in lines if line in ("sshd", "no-sshd")]
        if done.get("rc") != 0 or not sshd:
            result.update(failed=True, msg="cannot check the node: %s" % (done.get("stderr") or done.get("stdout")))
            return result
        stamp = [line[len("stamp "):] for line in lines if line.startswith("stamp ")]
        address = next((line.split()[1:] for line in lines if line.split()[:1] == ["address"]), [])
        devices = read_devices(lines)
        result.update(changed=False,
                      prepared=sshd[0] == "sshd" and is_prepared(stamp, fingerprint, params["nodes"]),
                      address=address[0] if address else "", fingerprint=fingerprint, runtime=RUNTIME_PATH,
                      missing=[line.split(" ", 1)[1] for line in lines if line.startswith("missing ")],
                      systemd="systemd" in lines, boto3="boto3" in lines,
                      devices=devices["counts"], device_problems=devices["problems"])
        return result
