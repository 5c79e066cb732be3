# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""What node preparation installs, as the controller reads it: the files
of a directory tree (bytecode a checkout's own runs left is not part of
it), and one fingerprint of their contents (node_state compares it with
the one a node was prepared with)."""

from __future__ import annotations

import hashlib
import os


def tree_files(top):
    """The paths of the files under `top`, relative to it, in a fixed order;
    no __pycache__ directory or .pyc file."""
    found = []
    for here, dirs, names in os.walk(top):
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")
        found += [os.path.relpath(os.path.join(here, name), top) for name in sorted(names)
                  if not name.endswith(".pyc")]
    return found


def installed_fingerprint(paths):
    """sha256 of the contents of `paths`, in their order: a file's bytes, a
    directory's files (tree_files) each with its path relative to it.
    Where the paths lie on the controller does not count. Raises OSError
    naming a path that cannot be read."""
    digest = hashlib.sha256()
    for index, path in enumerate(paths):
        members = [(name, os.path.join(path, name)) for name in tree_files(path)] if os.path.isdir(path) else [
            ("", path)]
        for name, full in members:
            with open(full, "rb") as handle:
                data = handle.read()
            digest.update(("%d\0%s\0%d\0" % (index, name, len(data))).encode())
            digest.update(data)
    return digest.hexdigest()
