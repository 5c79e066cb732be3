# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A file written whole or not at all, private to its owner: the run
record's files (run_record.py) and the run's page (run_report.py). Pure
file handling, no knowledge of what the bytes are."""

from __future__ import annotations

import contextlib
import os


def write_private(path: str, data: bytes) -> None:
    """`data` at `path`, whole or not at all (a temporary name, then a
    rename), readable by its owner only. OSError says why not; the
    temporary name is removed then."""
    temporary = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def make_private_dir(path: str) -> None:
    """`path` and its missing parents made; `path` itself 0700."""
    os.makedirs(path, 0o700, exist_ok=True)
    os.chmod(path, 0o700)
