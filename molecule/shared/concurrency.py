"""What the workflow runner's lines and the jobs' logs say of a workflow
run: the task array of tests/fuzzfiles/workflow/task-array.yml as its
per-task logs tell it, how many of its tasks ran at once, when each job
ran, the hosts each was started on, the outcome table; shared by the
scenarios and tests/local."""

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
    edges = sorted([(start, 1) for start, _unused in intervals] + [(end, -1) for _unused, end in intervals])
    most = now = 0
    for _unused, step in edges:
        now += step
        most = max(most, now)
    return most


# What each job of tests/fuzzfiles/workflow/fan-out.yml and diamond.yml
# writes to its log: when it started, the run's id and its node, when it
# ended.
SPAN_LINES = re.compile(r"^start (\S+)\nrun (\S+) on (\S+)\nend (\S+)\n\Z")


def job_spans(logs, jobs):
    """{job: (start, end, run id, node)} from the job logs `<logs>/<job>.log`."""
    spans = {}
    for job in jobs:
        text = (logs / (job + ".log")).read_text()
        found = SPAN_LINES.match(text)
        assert found, "%s.log: %r" % (job, text)
        spans[job] = (float(found.group(1)), float(found.group(4)), found.group(2), found.group(3))
    return spans


def started_on(output):
    """[(job, [hosts])] of the workflow runner's `[job] started on hosts A, B`
    lines in a playbook's output, in the order it started the jobs."""
    return [(job, hosts.split(", "))
            for job, hosts in re.findall(r"^\[([^\]\s]+)\] started on hosts (.+)$", output, re.M)]


def all_overlap(spans):
    """Whether the (start, end) spans were all running at one moment."""
    return max(start for start, _unused in spans) < min(end for _unused, end in spans)


def outcome_table(output):
    """{job: (status, start, end)} of the outcome table the play shows
    (start and end HH:MM:SS, or - for a job not run)."""
    table = output[output.rfind("TASK [fuzz.multinode.workflow : Show the outcome of every job]"):]
    return {found.group(1): found.group(2, 3, 4) for found in re.finditer(
        r"^    - '?(\S+) +([A-Z_]+) +(\S+) +(\S+) +[-0-9.]+", table, re.M)}


def canceled_table(output):
    """{job: status} of the table the workflow runner writes to the
    terminal after an interrupt, below `workflow canceled: WHY`."""
    found = output.rfind("\nworkflow canceled: ")
    return {} if found < 0 else dict(re.findall(r"^(\S+) +([A-Z_]+) +\S+ +\S+ +[-0-9.]+", output[found:], re.M))
