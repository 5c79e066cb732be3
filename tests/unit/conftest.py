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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for path in (ROOT, os.path.join(ROOT, "files", "multinode-runtime")):
    if path not in sys.path:
        sys.path.insert(0, path)
