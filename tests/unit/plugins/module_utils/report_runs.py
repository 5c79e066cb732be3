"""Recorded runs for the report's tests (test_run_report.py,
test_run_report_browser.py): run records' state.json objects in the shape
module_utils/run_record.py writes them (jobs' times to the second, ranks'
to the millisecond; depends_on and running_deps as names; a rank's `log`
its file name in the job's rank log folder, rank 0's the job log).

The workflow is a fan-out with a service: `prepare` feeds `simulate` (two
nodes, needs the `db` service RUNNING) and `sweep` (a task array of four),
both feed `collect`. `simulate` fails with a message that is markup, and
its rank 1's log has markup in its name: the page must show both as text.

`Page` is a page as a parser sees it: its elements and its text."""

import copy
import os
from html.parser import HTMLParser

HOSTILE = ("</script><script>alert(1)</script><img src=x onerror=alert(2)> "
           "\"]; n9 [label=\"x\"] & \\N \x1b[31m' <!-- --> ]]>")
HOSTILE_LOG = "rank-<b onmouseover=alert(3)>1 &amp; 'q'.log"
JOBS = ("db", "prepare", "simulate", "sweep", "collect")
EDGES = {("prepare", "simulate", "FINISHED"), ("db", "simulate", "RUNNING"), ("prepare", "sweep", "FINISHED"),
         ("simulate", "collect", "FINISHED"), ("sweep", "collect", "FINISHED")}


def _rank(rank, name, node, start, end, status=0, log=None, task_id=None, state="exited"):
    return {"rank": rank, "task_id": task_id, "name": name, "node": node, "state": state,
            "status": status if state == "exited" else None,
            "start": "2026-12-04T08:%s" % start if start else None,
            "end": "2026-12-04T08:%s" % end if end else None,
            "duration": None if not (start and end) else round(_secs(end) - _secs(start), 3),
            "log": log or ("job.log" if rank == 0 and task_id is None else
                           "task-%s.log" % task_id if task_id is not None else "rank-%d.log" % rank)}


def _secs(stamp):
    minutes, seconds = stamp.rstrip("Z").split(":")
    return int(minutes) * 60 + float(seconds)


def _job(log_dir, name, state, start, end, nodes=1, kind="job", depends_on=(), running_deps=(),
         task_array=False, message="", duration=None, hosts=("node-1",), ranks=()):
    entry = {"kind": kind, "depends_on": list(depends_on), "running_deps": list(running_deps), "nodes": nodes,
             "task_array": task_array, "form": "0" * 64, "state": state,
             "start": "2026-12-04T08:%sZ" % start if start else None,
             "end": "2026-12-04T08:%sZ" % end if end else None, "duration": duration,
             "message": message, "hosts": list(hosts), "ranks": list(ranks), "log": None, "rank_logs": None}
    if start and end:
        entry["log"] = os.path.join(log_dir, name + ".log")
        entry["rank_logs"] = os.path.join(log_dir, name)
    return entry


def finished_run(log_dir):
    """A FAILED run: `simulate` failed, so `collect` did not run."""
    jobs = {
        "db": _job(log_dir, "db", "FINISHED", "01:02", "01:40", kind="service", duration=37.5, hosts=("node-3",),
                   message="job db finished",
                   ranks=[_rank(0, "db-0", "node-3", "01:04.120Z", "01:39.800Z")]),
        "prepare": _job(log_dir, "prepare", "FINISHED", "01:02", "01:09", duration=6.2,
                        message="job prepare finished",
                        ranks=[_rank(0, "prepare-0", "node-1", "01:03.010Z", "01:08.900Z")]),
        "simulate": _job(log_dir, "simulate", "FAILED", "01:10", "01:38", nodes=2, depends_on=["prepare"],
                         running_deps=["db"], duration=26.9, message=HOSTILE, hosts=("node-1", "node-2"),
                         ranks=[_rank(0, "simulate-0", "node-1", "01:11.500Z", "01:37.100Z"),
                                _rank(1, "simulate-1", "node-2", "01:11.600Z", "01:30.250Z", status=3,
                                      log=HOSTILE_LOG)]),
        "sweep": _job(log_dir, "sweep", "FINISHED", "01:10", "01:31", depends_on=["prepare"], task_array=True,
                      duration=20.4, message="job sweep finished: 4 tasks", hosts=("node-1", "node-2"),
                      ranks=[_rank(index - 1, "sweep-%d" % index, "node-%d" % (1 + (index - 1) % 2),
                                   "01:%02d.000Z" % (11 + 2 * index), "01:%02d.500Z" % (17 + 3 * index),
                                   task_id=index) for index in range(1, 5)]),
        "collect": _job(log_dir, "collect", "NOT_RUN", None, None, depends_on=["simulate", "sweep"], hosts=(),
                        message="not run: simulate FAILED"),
    }
    jobs["db"].update(ready="2026-12-04T08:01:06Z", stopping="2026-12-04T08:01:38Z")
    return {"run": "20261204T080102Z-a1b2c3", "workflow": "fan-out", "fuzzfile": "/home/me/fan-out.yml",
            "state": "FAILED", "started": "2026-12-04T08:01:02Z", "ended": "2026-12-04T08:01:41Z",
            "user": "me", "detached": False, "resumed": [], "owner": [], "log_dir": log_dir,
            "order": ["prepare", "db", "simulate", "sweep", "collect"], "canceled_by": None, "jobs": jobs}


def running_run(log_dir):
    """The same run while `simulate` and `sweep` run: `collect` waits."""
    state = copy.deepcopy(finished_run(log_dir))
    state.update(state="RUNNING", ended=None)
    for name in ("simulate", "sweep"):
        entry = state["jobs"][name]
        entry.update(state="RUNNING", end=None, duration=None, message="")
        for rank in entry["ranks"]:
            rank.update(state=None, status=None, end=None, duration=None)
    state["jobs"]["db"].update(state="RUNNING", end=None, duration=None, stopping=None, message="")
    state["jobs"]["collect"].update(state="WAITING", message="")
    return state


def write_logs(state):
    """Every log file the record names, under its log_dir (as the run left them)."""
    for entry in state["jobs"].values():
        if not entry.get("log"):
            continue
        os.makedirs(entry["rank_logs"], exist_ok=True)
        with open(entry["log"], "w") as handle:
            handle.write("a job log\n")
        for rank in entry["ranks"]:
            if rank["log"] != "job.log" or entry["task_array"]:
                with open(os.path.join(entry["rank_logs"], rank["log"]), "w") as handle:
                    handle.write("a rank log\n")


class Page(HTMLParser):
    """Every element (tag, attributes) of a page and its text."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.elements, self.texts = [], []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.texts.append(data)

    @property
    def text(self):
        return "".join(self.texts)

    def all(self, tag):
        return [attrs for name, attrs in self.elements if name == tag]
