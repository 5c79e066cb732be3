"""Make ``ansible_collections.fuzz.multinode`` importable in unit tests.

The repository root holds ``ansible_collections/fuzz/multinode``, a link back
to the root itself, so putting the root on ``sys.path`` makes the collection's
Python packages importable by their full names without installing anything.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
