# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_state: in one command over the
host's connection (no module shipped, no facts gathered), whether the node
is prepared already, what preparing it needs to know (the SSH tools it
lacks, whether systemd runs, whether the runtime's Python has boto3) and
the address it reaches the others by."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUNTIME_PATH

ARGUMENT_SPEC = dict(
    fingerprint=dict(type="str", required=True),
    nodes=dict(type="list", elements="str", default=[]),
    local=dict(type="bool", default=False),
)

STAMP = "/etc/fuzz-multinode/prepared"  # written by the node role's prepare.yml

SSH_TOOLS = ("/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen")  # what preparing needs

# The stamp (the fingerprint, then the nodes whose host keys are pinned),
# each line after "stamp "; whether sshd runs (local mode has none); the
# SSH tools missing; whether systemd runs; the address: the source address
# of the route to a public address, as Ansible's default IPv4 fact has it
# (no packet is sent).
CHECK = r"""
sed 's/^/stamp /' %(stamp)s 2>/dev/null
if test %(local)s = yes ||
   test "$(cat "/proc/$(cat /run/sshd.pid 2>/dev/null)/comm" 2>/dev/null)" = sshd
then echo sshd; else echo no-sshd; fi
for tool in %(tools)s; do test -e "$tool" || echo "missing $tool"; done
test ! -d /run/systemd/system || echo systemd
/usr/bin/python3 -I -c 'import boto3' 2>/dev/null && echo boto3
python3 -I -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("8.8.8.8", 53))
    print("address", s.getsockname()[0])
except OSError:
    print("address")
' 2>/dev/null || echo address
"""


def is_prepared(stamp, fingerprint, nodes):
    """Prepared: the stamp has this fingerprint and pins every node of the
    play (a node prepared for more nodes serves a job on fewer)."""
    return bool(stamp) and stamp[0] == fingerprint and set(nodes) <= set(stamp[1:])


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # Stripped: Ansible appends " && sleep 0" to the command.
        command = CHECK.strip() % {"stamp": STAMP, "local": "yes" if params["local"] else "no",
                                   "tools": " ".join(SSH_TOOLS)}
        done = self._low_level_execute_command(command, sudoable=True)
        lines = done.get("stdout", "").splitlines()
        sshd = [line for line in lines if line in ("sshd", "no-sshd")]
        if done.get("rc") != 0 or not sshd:
            result.update(failed=True, msg="cannot check the node: %s" % (done.get("stderr") or done.get("stdout")))
            return result
        stamp = [line[len("stamp "):] for line in lines if line.startswith("stamp ")]
        address = next((line.split()[1:] for line in lines if line.split()[:1] == ["address"]), [])
        result.update(changed=False,
                      prepared=sshd[0] == "sshd" and is_prepared(stamp, params["fingerprint"], params["nodes"]),
                      address=address[0] if address else "", fingerprint=params["fingerprint"], runtime=RUNTIME_PATH,
                      missing=[line.split(" ", 1)[1] for line in lines if line.startswith("missing ")],
                      systemd="systemd" in lines, boto3="boto3" in lines)
        return result
