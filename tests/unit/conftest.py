"""Make ``ansible_collections.fuzz.multinode`` and the node runtime's package
(``multinode_runtime``) importable in unit tests.

The repository root holds ``ansible_collections/fuzz/multinode``, a link back
to the root itself, so putting the root on ``sys.path`` makes the collection's
Python packages importable by their full names without installing anything.
The node runtime is the directory files/multinode-runtime, which Python runs
with that directory first on ``sys.path``; the tests import it the same way.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for path in (ROOT, os.path.join(ROOT, "files", "multinode-runtime")):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture
def runtime_state(tmp_path, monkeypatch):
    """The node runtime's state, logs and /etc/hosts in a temporary directory
    (its registry's paths pointed there); returns that directory."""
    from multinode_runtime import image_registry, registry

    state = tmp_path / "run"
    monkeypatch.setattr(image_registry, "CREDENTIALED_FILE", str(tmp_path / "credentialed-images"))
    monkeypatch.setattr(registry, "STATE_DIR", str(state))
    monkeypatch.setattr(registry, "JOBS_DIR", str(state / "jobs"))
    monkeypatch.setattr(registry, "CONTROL_DIR", str(state / "ssh"))
    monkeypatch.setattr(registry, "HOSTS_LOCK", str(state / "hosts.lock"))
    monkeypatch.setattr(registry, "LOG_DIR", str(tmp_path / "log"))
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    monkeypatch.setattr(registry, "HOSTS_FILE", str(hosts))
    key = tmp_path / "cluster_ed25519"  # as the node role installs it
    key.write_text("a test cluster key\n")
    monkeypatch.setattr(registry, "CLUSTER_KEY", str(key))
    yield tmp_path
    # The sandboxes the test's registrations made (their PID 1s live on).
    from multinode_runtime.errors import RuntimeFailure
    from multinode_runtime.sandbox import remove_sandbox
    for job in os.listdir(registry.JOBS_DIR) if os.path.isdir(registry.JOBS_DIR) else []:
        try:
            remove_sandbox(job)
        except RuntimeFailure:
            pass  # a stand-in container the test made up
