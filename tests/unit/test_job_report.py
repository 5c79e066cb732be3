"""Unit tests of what the controller shows of a job: the live log
(plugin_utils/job_report.py LiveLog: the controller's copy of the job log
and the `[job] line` display), the summary table (summary_lines), and the
runtime's per-rank outcomes from its call records (rank_outcomes in
files/multinode-runtime/multinode_runtime/calls.py), which the table shows. Their use on real
clusters is checked by molecule/failure."""

import os
import re
import stat

from hypothesis import given
from hypothesis import strategies as st
from multinode_runtime import registry
from multinode_runtime.calls import rank_outcomes, read_call_records, record_call
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import (
    LiveLog,
    shown_on_terminal,
    summary_lines,
)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def live_log(tmp_path, every=30):
    shown, clock = [], Clock()
    log = LiveLog("job", str(tmp_path / "logs" / "job.log"), shown.append, every, clock)
    return log, shown, clock


# -- the live log -------------------------------------------------------------------

def test_live_log_writes_every_byte_and_shows_only_complete_lines(tmp_path):
    log, shown, _unused = live_log(tmp_path)
    log.add(b"first line\nsecond ", 30)
    assert shown == ["[job] first line"]
    log.add(b"half\nthird\nfourth\nlast, unterminated", 30 + 40)
    assert shown[1:] == ["[job] second half\n[job] third\n[job] fourth"]
    log.finish()
    assert shown[2:] == ["[job] last, unterminated"]
    assert (tmp_path / "logs" / "job.log").read_bytes() == (
        b"first line\nsecond half\nthird\nfourth\nlast, unterminated")


def test_live_log_offset_is_what_the_controller_holds(tmp_path):
    """The next poll asks for the log from the controller file's size on:
    a piece never appended twice, the head's size tells whether more is
    to come."""
    log, _unused, _unused = live_log(tmp_path)
    assert log.offset == 0 and not log.behind
    log.add(b"abc\n", 10)
    assert log.offset == 4 and log.behind
    log.add(b"defghi", 10)
    assert log.offset == 10 and not log.behind
    log.close()
    assert log.offset == 10 and not log.behind  # still known once the file is closed


def test_live_log_truncates_a_previous_run_of_the_job(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "job.log").write_text("an older run\n")
    log, _unused, _unused = live_log(tmp_path)
    log.add(b"new\n", 4)
    log.finish()
    assert (tmp_path / "logs" / "job.log").read_text() == "new\n"


def test_live_log_keeps_bytes_and_shows_text(tmp_path):
    """Bytes that are no UTF-8 arrive unchanged in the file; the terminal
    gets a replacement character."""
    log, shown, _unused = live_log(tmp_path)
    log.add(b"caf\xe9\n", 5)
    log.finish()
    assert (tmp_path / "logs" / "job.log").read_bytes() == b"caf\xe9\n"
    assert shown == ["[job] caf\ufffd"]


@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_live_log_shows_each_line_once_however_the_log_is_cut(tmp_path_factory, data, cuts):
    tmp_path = tmp_path_factory.mktemp("live")
    log, shown, _unused = live_log(tmp_path)
    bounds = [0] + sorted(cuts) + [len(data)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        log.add(data[start:end], len(data))
    log.finish()
    assert (tmp_path / "logs" / "job.log").read_bytes() == data
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    expected = ["[job] " + shown_on_terminal(line.decode(errors="replace")) for line in lines]
    assert [line for piece in shown for line in piece.split("\n")] == expected


def test_live_log_shows_control_sequences_written_out_and_keeps_their_bytes(tmp_path):
    """A job's escape sequences never reach the operator's terminal (issue
    12): no clearing the screen, retitling the window, or a CR hiding what
    came before on the line; the saved log is byte-exact."""
    log, shown, _unused = live_log(tmp_path)
    data = b"\x1b[2J\x1b]0;owned\x07ok\rfake line\t|\xc2\x9b31m\x7f\r\ncrlf\r\n"
    log.add(data, len(data))
    log.finish()
    assert (tmp_path / "logs" / "job.log").read_bytes() == data
    assert shown == ["[job] \\x1b[2J\\x1b]0;owned\\x07ok\\x0dfake line\t|\\x9b31m\\x7f\n[job] crlf"]
    assert stat.S_IMODE(os.stat(tmp_path / "logs" / "job.log").st_mode) == 0o600


def test_still_running_after_a_silence(tmp_path):
    """`[job] still running, ELAPSED` after `progress_every` seconds without
    a line shown, counted from the last line or the last such notice."""
    log, shown, clock = live_log(tmp_path, every=30)
    clock.now += 29
    log.tick()
    assert shown == []
    clock.now += 1
    log.tick()
    assert shown == ["[job] still running, 30.0 s"]
    clock.now += 20
    log.add(b"output\n", 7)
    clock.now += 29
    log.tick()
    assert shown[1:] == ["[job] output"]
    clock.now += 31
    log.tick()
    assert shown[2:] == ["[job] still running, 1m50s"]


def test_no_progress_notice_when_disabled(tmp_path):
    log, shown, clock = live_log(tmp_path, every=0)
    clock.now += 3600
    log.tick()
    assert shown == []


def test_quiet_live_log_still_writes_the_file(tmp_path):
    """After Ctrl-C nothing is shown (the play no longer reads the display),
    but the log is still completed."""
    log, shown, _unused = live_log(tmp_path)
    log.quiet = True
    log.add(b"canceled line\n", 14)
    log.finish()
    assert shown == []
    assert (tmp_path / "logs" / "job.log").read_text() == "canceled line\n"


def test_live_log_without_a_file_only_shows(tmp_path):
    shown = []
    log = LiveLog("job", None, shown.append, 30, Clock())
    log.add(b"a\nb", 3)
    assert log.offset == 3 and not log.behind
    log.finish()
    assert shown == ["[job] a", "[job] b"]


# -- per-rank outcomes from call records (the runtime) -------------------------------

def spec(ranks=3, task_array=False):
    entries = []
    for r in range(ranks):
        entry = {"rank": r, "name": "j-%d" % r, "node": "node-%d" % (r + 1)}
        if task_array:
            entry.update(task_id=r + 1, name="j-%d" % (r + 1), log="task-%d.log" % (r + 1))
        entries.append(entry)
    return {"job": "j", "ranks": entries, "task_array": {"start": 1, "end": ranks} if task_array else None}


def test_each_rank_ends_its_own_way():
    """Rank 0 (the supervisor's own record) still ran at the teardown:
    killed, until the job's end. Rank 1's calls all exited 0; rank 2's first
    failure is its status even though a later call failed too; rank 3 never
    got a call."""
    calls = [
        {"rank": 0, "start": 100.0},
        {"rank": 1, "start": 100.5, "end": 101.0, "status": 0},
        {"rank": 1, "start": 101.5, "end": 103.0, "status": 0},
        {"rank": 2, "start": 100.5, "end": 105.0, "status": 7},
        {"rank": 2, "start": 100.6, "end": 104.0, "status": 5},
    ]
    outcomes = rank_outcomes(JobSpec.from_dict(spec(4)), calls, ended=110.0)
    assert [(o["rank"], o["state"], o["status"], o["duration"], o["calls"]) for o in outcomes] == [
        (0, "killed", None, 10.0, 1),
        (1, "exited", 0, 2.5, 2),
        (2, "exited", 5, 4.5, 2),
        (3, "not started", None, None, 0),
    ]
    assert [o["log"] for o in outcomes] == ["job.log", "rank-1.log", "rank-2.log", "rank-3.log"]
    assert [(o["name"], o["node"]) for o in outcomes] == [("j-%d" % r, "node-%d" % (r + 1)) for r in range(4)]


def test_a_failed_rank_with_a_call_killed_at_teardown_keeps_its_status():
    calls = [{"rank": 1, "start": 10.0, "end": 12.0, "status": 3}, {"rank": 1, "start": 11.0}]
    (outcome,) = [o for o in rank_outcomes(JobSpec.from_dict(spec(2)), calls, ended=20.0) if o["rank"] == 1]
    assert (outcome["state"], outcome["status"], outcome["end"], outcome["duration"]) == ("exited", 3, 20.0, 10.0)


def test_task_array_outcomes_name_tasks_and_their_logs():
    calls = [{"rank": 0, "start": 1.0, "end": 2.0, "status": 0}, {"rank": 1, "start": 1.0, "end": 3.0, "status": 4}]
    outcomes = rank_outcomes(JobSpec.from_dict(spec(3, task_array=True)), calls, ended=9.0)
    assert [(o["task_id"], o["log"], o["state"], o["status"]) for o in outcomes] == [
        (1, "task-1.log", "exited", 0), (2, "task-2.log", "exited", 4), (3, "task-3.log", "not started", None)]


def test_call_records_are_written_and_read_back(tmp_path, monkeypatch):
    """A call's record is rewritten in place when it returns; a record being
    rewritten (a temporary file) is not read."""
    monkeypatch.setattr(registry, "JOBS_DIR", str(tmp_path))
    (tmp_path / "j" / "calls").mkdir(parents=True)
    record = {"rank": 1, "start": 5.0}
    record_call("j", record)
    assert read_call_records("j") == [record]
    record_call("j", dict(record, end=6.0, status=0))
    (tmp_path / "j" / "calls" / "x.json.tmp").write_text("{")
    assert read_call_records("j") == [{"rank": 1, "start": 5.0, "end": 6.0, "status": 0}]
    assert read_call_records("no-such-job") == []


# -- the summary table ---------------------------------------------------------------

def columns(line):
    """Start offsets of the columns of a table line."""
    return [m.start() for m in re.finditer(r"(?:(?<=  )|^)\S", line)]


def test_summary_has_a_row_per_rank_in_fixed_width_columns(tmp_path):
    logs = tmp_path / "fuzz-logs"
    (logs / "j").mkdir(parents=True)
    for name in ("j.log", "j/rank-1.log", "j/rank-2.log"):
        (logs / name).write_text("x\n")
    result = {"status": "FAILED", "duration": 12.34, "message": "rank 2 (j-2 on node-3) exited with status 5",
              "ranks": rank_outcomes(JobSpec.from_dict(spec(4)), [
                  {"rank": 0, "start": 0.0},
                  {"rank": 1, "start": 0.0, "end": 1.0, "status": 0},
                  {"rank": 2, "start": 0.0, "end": 75.0, "status": 5}], ended=80.0)}
    lines = summary_lines(result, spec(4), str(logs / "j.log"))
    assert lines[0] == "job j FAILED after 12.3 s"
    assert [line.split() for line in lines[1:]] == [
        ["rank", "host", "name", "inventory", "host", "exit", "status", "duration", "log"],
        ["0", "j-0", "node-1", "killed", "1m20s", str(logs / "j.log")],
        ["1", "j-1", "node-2", "0", "1.0", "s", str(logs / "j" / "rank-1.log")],
        ["2", "j-2", "node-3", "5", "1m15s", str(logs / "j" / "rank-2.log")],
        ["3", "j-3", "node-4", "not", "started", "-", "-"],
    ]
    assert len({tuple(columns(line)) for line in lines[1:]}) == 1, "\n".join(lines)
    assert all(line == line.rstrip() for line in lines)


def test_summary_of_a_job_that_never_ran_lists_its_ranks():
    """Refused by a node before it started: no outcomes, no logs."""
    lines = summary_lines({"status": "FAILED", "message": "refused"}, spec(2), "/nowhere/j.log")
    assert lines[0] == "job j FAILED"
    assert [line.split() for line in lines[2:]] == [["0", "j-0", "node-1", "-", "-", "-"],
                                                    ["1", "j-1", "node-2", "-", "-", "-"]]


def test_summary_of_a_task_array_has_a_row_per_task(tmp_path):
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "task-2.log").write_text("")
    result = {"status": "FINISHED", "duration": 3, "ranks": rank_outcomes(
        JobSpec.from_dict(spec(2, task_array=True)), [{"rank": 0, "start": 0.0, "end": 1.0, "status": 0},
                                                      {"rank": 1, "start": 0.0, "end": 2.0, "status": 0}],
        ended=3.0)}
    lines = summary_lines(result, spec(2, task_array=True), str(tmp_path / "j.log"))
    assert lines[0] == "job j FINISHED after 3.0 s"
    ran = summary_lines(dict(result, ran_in="in image docker://x/y:1"), spec(2, task_array=True),
                        str(tmp_path / "j.log"))
    assert ran[0] == "job j FINISHED after 3.0 s, in image docker://x/y:1"
    assert lines[1].split()[0] == "task"
    assert [line.split()[:4] for line in lines[2:]] == [["1", "j-1", "node-1", "0"], ["2", "j-2", "node-2", "0"]]
    assert lines[2].endswith("  -") and lines[3].endswith(os.path.join(str(tmp_path), "j", "task-2.log"))
