"""The logs run-job.yml fetched for one job, as the container verifiers
read them, shared by molecule/quoting and molecule/scale."""


class JobLogs:
    """Mixin for a finished run: needs `job` (the job's name) and `logs`
    (the log_dir it was run with). A log that was not fetched reads as
    empty (job log) or None (rank log), so a test fails on its content
    rather than on opening it."""

    @property
    def log(self):
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    @property
    def lines(self):
        return self.log.splitlines()

    def labelled(self, *labels):
        """The job log's lines whose label (first word) is one of `labels`, sorted."""
        return sorted(line for line in self.lines if line.split(" ", 1)[0] in labels)

    def rank_log(self, rank):
        """The lines of rank `rank`'s log, None if there is none."""
        path = self.logs / self.job / ("rank-%d.log" % rank)
        return path.read_text().splitlines() if path.exists() else None
