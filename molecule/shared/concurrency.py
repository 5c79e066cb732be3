"""The task array of tests/fuzzfiles/workflow/task-array.yml as its per-task
logs tell it, and how many of its tasks ran at once, shared by
molecule/workflow and tests/local/test_local_basics.py."""

import re

# What each task writes to its log task-<id>.log: its id, host name,
# HOSTNAME, node, and when it started and ended (seconds since the epoch).
TASK_LINE = re.compile(r"^task (\d+) is (\S+) HOSTNAME=(\S+) on (\S+)\nstart (\S+)\nend (\S+)\n\Z")


def task_records(task_logs):
    """{task id: (host name, HOSTNAME, node, start, end)} from the per-task
    logs in the directory `task_logs`; each log must be one task's record,
    named after its id."""
    records = {}
    for path in sorted(task_logs.iterdir()):
        found = TASK_LINE.match(path.read_text())
        # Messages spelled out: pytest does not rewrite asserts outside test modules.
        assert found, "%s: %r" % (path.name, path.read_text())
        assert path.name == "task-%s.log" % found.group(1), (path.name, found.group(1))
        records[int(found.group(1))] = (found.group(2), found.group(3), found.group(4),
                                        float(found.group(5)), float(found.group(6)))
    return records


def most_at_once(intervals):
    """The largest number of (start, end) intervals that overlap. At equal
    times an end (-1) sorts before a start (+1): a task that starts as
    another ends did not run beside it."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most
