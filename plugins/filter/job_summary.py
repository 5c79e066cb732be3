# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""fuzz.multinode.job_summary: a job's summary table, as a list of lines
(see job_summary.yml)."""

from __future__ import annotations

from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import summary_lines


def job_summary(result, spec, log_file):
    return summary_lines(dict(result or {}), spec, log_file)


class FilterModule:
    def filters(self):
        return {"job_summary": job_summary}
