# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""The run record's time stamps: UTC to the second for runs and jobs, to
the millisecond for a job's ranks; written by run_record.py, read by it and
by the report (report_style.py). Pure logic."""

from __future__ import annotations

import datetime
import time
from typing import Any, Optional

LAYOUT = "%Y-%m-%dT%H:%M:%SZ"  # 2026-12-04T08:01:02Z
PRECISE_LAYOUT = "%Y-%m-%dT%H:%M:%S.%fZ"  # 2026-12-04T08:01:02.345Z


def utc(when: Optional[float] = None) -> str:
    """The stamp of `when` (epoch seconds; now when None), to the second."""
    return time.strftime(LAYOUT, time.gmtime(time.time() if when is None else when))


def utc_precise(when: float) -> str:
    """The stamp of `when`, to the millisecond (rounded down)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + ".%03dZ" % (int(when * 1000) % 1000)


def seconds_of(stamp: Any) -> Optional[float]:
    """Epoch seconds of a stamp of either kind; None for none or anything else."""
    if not isinstance(stamp, str):
        return None
    for layout in (LAYOUT, PRECISE_LAYOUT):
        try:
            return datetime.datetime.strptime(stamp, layout).replace(tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            continue
    return None
