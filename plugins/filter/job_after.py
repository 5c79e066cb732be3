# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.job_after: what a job waits for, as the outcome table's
`after` column shows the workflow's graph (module_utils/run_views.py)."""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.fuzz.multinode.plugins.module_utils.run_views import after


def job_after(job):
    # Not a job (bad role input, refused naming the variable by its argument
    # spec, whose check reads this filter through the row format's default).
    return after(job) if isinstance(job, Mapping) else "-"


class FilterModule:
    def filters(self):
        return {"job_after": job_after}
