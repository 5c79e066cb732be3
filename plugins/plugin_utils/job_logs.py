# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A job's logs brought home from a node's `cleanup` answer: the ranks'
logs it carries (or names, when over the runtime's inline budget) and the
job log it names, written to the controller for the playbook user only
(directories 0700, files 0600), as the job may have printed anything.
Shared by node_job (state=absent) and launch_job (the head's own cleanup)."""

from __future__ import annotations

import base64
import os


def bring_home(connection, answer, logs, job_log):
    """The cleanup `answer` with its logs written: the ranks' to the
    directory `logs` under the runtime's names (none without `logs`), the
    job log to `job_log` when both it and the answer name one; its `logs`
    becomes {rank: controller path}."""
    written = {}
    for entry in answer.pop("logs", []):
        if not logs:
            break
        dest = os.path.join(logs, entry["name"])
        os.makedirs(logs, 0o700, exist_ok=True)
        with private_file(dest) as handle:
            if "data" in entry:
                handle.write(base64.b64decode(entry["data"]))
        if "data" not in entry:
            connection.fetch_file(entry["path"], dest)  # into the 0600 file made
        written[str(entry["rank"])] = dest
    node_job_log = answer.pop("job_log", None)
    if node_job_log and job_log:
        os.makedirs(os.path.dirname(job_log) or ".", 0o700, exist_ok=True)
        private_file(job_log, truncate=False).close()
        connection.fetch_file(node_job_log["path"], job_log)
    answer["logs"] = written
    return answer


def private_file(path, truncate=True):
    """`path` opened for writing, made the playbook user's only (0600, also
    when it was there from an earlier run)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0), 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")
