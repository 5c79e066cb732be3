# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.node_state: in one command over the
host's connection (no module shipped, no facts gathered), whether the node
is prepared already and the address it reaches the others by."""

from __future__ import annotations

import shlex

from ansible.plugins.action import ActionBase

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUNTIME_PATH

ARGUMENT_SPEC = dict(
    fingerprint=dict(type="str", required=True),
    local=dict(type="bool", default=False),
)

STAMP = "/etc/fuzz-multinode/prepared"  # written by the node role's prepare.yml

# Prepared: the stamp holds this fingerprint and sshd runs (local mode has
# none). The address: the source address of the route to a public address,
# as Ansible's default IPv4 fact has it (no packet is sent).
CHECK = r"""
if test "$(cat %(stamp)s 2>/dev/null)" = %(fingerprint)s &&
   { test %(local)s = yes ||
     test "$(cat "/proc/$(cat /run/sshd.pid 2>/dev/null)/comm" 2>/dev/null)" = sshd; }
then echo prepared; else echo stale; fi
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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # Stripped: Ansible appends " && sleep 0" to the command.
        command = CHECK.strip() % {"stamp": STAMP, "fingerprint": shlex.quote(params["fingerprint"]),
                           "local": "yes" if params["local"] else "no"}
        done = self._low_level_execute_command(command, sudoable=True)
        lines = [line.split() for line in done.get("stdout", "").splitlines()]
        state = [words[0] for words in lines if words in (["prepared"], ["stale"])]
        if done.get("rc") != 0 or not state:
            result.update(failed=True, msg="cannot check the node: %s" % (done.get("stderr") or done.get("stdout")))
            return result
        address = next((words[1] for words in lines if len(words) == 2 and words[0] == "address"), "")
        result.update(changed=False, prepared=state[0] == "prepared", address=address,
                      fingerprint=params["fingerprint"], runtime=RUNTIME_PATH)
        return result
