"""Which processes own a run (module_utils/run_processes.py): a process is
its pid, start time and boot, so a reused pid or a zombie is not it."""

import os
import subprocess
import sys
import time

from ansible_collections.fuzz.multinode.plugins.module_utils.run_processes import process_alive, process_entry


def test_a_reused_pid_is_not_the_run_s_process_nor_is_a_zombie():
    entry = process_entry("playbook", os.getpid())
    assert process_alive(entry)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    zombie = process_entry("playbook", child.pid)
    assert process_alive(zombie)
    while open("/proc/%d/stat" % child.pid).read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.05)  # dead, not reaped
    assert not process_alive(zombie)
    child.wait()
    assert not process_alive(dict(entry, start="1"))
    assert not process_alive(dict(entry, boot="another-boot"))
