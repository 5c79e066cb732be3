# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Which jobs of a workflow run when, and on which hosts: the plan of the
workflow runner (plugins/action/workflow_jobs.py), pure logic.

A job starts as soon as every job it depends on has finished and enough
hosts are free for it (`needs`). It gets the free hosts in inventory order,
so its rank 0 is the first free host. A `pinned` job gets exactly the first
`needs` hosts of the inventory, as in a run of one job at a time (it mounts
a volume on storage the nodes do not share: its data must be where the
other jobs of the volume and the egress find it). With `share_hosts` the
jobs of a run may share hosts: a job then gets the hosts with the fewest
jobs of the run on them. At most `at_once` jobs run at a time (0: as many
as the hosts allow). Jobs are taken in the run's order (dependency order,
the Fuzzfile's for ties); one that does not fit now does not hold back a
later one that does.

A job that did not finish leaves its dependants NOT_RUN, and theirs in
turn, each naming the dependencies that did not finish."""

from __future__ import annotations

WAITING = "WAITING"
RUNNING = "RUNNING"
FINISHED = "FINISHED"
NOT_RUN = "NOT_RUN"


class Schedule:
    """The state of a workflow's jobs in one run. `jobs`: dicts with
    `name`, `needs` (hosts), `depends_on` (names) and optionally `pinned`,
    in the run's order; `hosts`: the hosts jobs may run on, in inventory
    order. Dependencies on jobs that are not part of the run are ignored
    (with -e job=NAME the one job runs alone)."""

    def __init__(self, jobs, hosts, at_once=0, share_hosts=False):
        self.order = [job["name"] for job in jobs]
        self.jobs = {job["name"]: job for job in jobs}
        self.hosts = list(hosts)
        self.at_once = at_once
        self.share_hosts = share_hosts
        self.status = dict.fromkeys(self.order, WAITING)
        self.messages = {}  # name: why it did not run
        self.placed = {}  # name: its hosts, rank 0's first
        self.load = dict.fromkeys(self.hosts, 0)  # host: jobs of the run running there
        for name in self.order:
            needs = self.jobs[name]["needs"]
            if needs > len(self.hosts):
                self._not_run(name, "it needs %d hosts and the play has %d (%s)"
                              % (needs, len(self.hosts), ", ".join(self.hosts) or "none"))
        self._block_dependants()

    def depends_on(self, name):
        return [dep for dep in self.jobs[name].get("depends_on") or [] if dep in self.jobs]

    @property
    def running(self):
        return [name for name in self.order if self.status[name] == RUNNING]

    @property
    def done(self):
        return all(status not in (WAITING, RUNNING) for status in self.status.values())

    def next_jobs(self):
        """[(name, hosts)] of the jobs to start now, in the run's order; each
        is RUNNING from here on, on its hosts."""
        started = []
        for name in self.order:
            if self.at_once and len(self.running) >= self.at_once:
                break
            if self.status[name] != WAITING or any(self.status[dep] != FINISHED for dep in self.depends_on(name)):
                continue
            hosts = self._hosts_for(self.jobs[name])
            if hosts is None:
                continue
            self.status[name] = RUNNING
            self.placed[name] = hosts
            for host in hosts:
                self.load[host] += 1
            started.append((name, hosts))
        return started

    def ended(self, name, status):
        """Job `name` ended with `status`: its hosts are free again. Returns
        the jobs that will not run now (its dependants, if it did not
        finish, and theirs)."""
        assert self.status[name] == RUNNING, (name, self.status[name])
        self.status[name] = status
        for host in self.placed[name]:
            self.load[host] -= 1
        return self._block_dependants()

    def stop(self, reason):
        """Start nothing more (the run was interrupted): every job still
        waiting is NOT_RUN for `reason`; returns them."""
        stopped = [name for name in self.order if self.status[name] == WAITING]
        for name in stopped:
            self._not_run(name, reason)
        return stopped

    def _hosts_for(self, job):
        needs = job["needs"]
        if job.get("pinned"):
            chosen = self.hosts[:needs]
            return chosen if self.share_hosts or all(self.load[host] == 0 for host in chosen) else None
        if self.share_hosts:
            by_load = sorted(range(len(self.hosts)), key=lambda index: (self.load[self.hosts[index]], index))
            return [self.hosts[index] for index in sorted(by_load[:needs])]
        free = [host for host in self.hosts if self.load[host] == 0]
        return free[:needs] if len(free) >= needs else None

    def _not_run(self, name, why):
        self.status[name] = NOT_RUN
        self.messages[name] = "job %s not run: %s" % (name, why)

    def _block_dependants(self):
        """Every waiting job with a dependency that ended without finishing
        is NOT_RUN, naming those dependencies; repeated until none is left,
        for the dependants of those. Returns them in the run's order."""
        blocked = []
        changed = True
        while changed:
            changed = False
            for name in self.order:
                if self.status[name] != WAITING:
                    continue
                failed = [dep for dep in self.depends_on(name)
                          if self.status[dep] not in (WAITING, RUNNING, FINISHED)]
                if failed:
                    self._not_run(name, "it depends on %s, which did not finish" % ", ".join(failed))
                    blocked.append(name)
                    changed = True
        return [name for name in self.order if name in blocked]


def can_overlap(jobs, host_count, share_hosts=False):
    """Whether two of `jobs` (as for Schedule) could ever run at the same
    time on `host_count` hosts: neither depends on the other, even through
    others, and they fit on the hosts together (or may share them). When
    none could, running them one at a time in order is the same run."""
    names = [job["name"] for job in jobs]
    by_name = {job["name"]: job for job in jobs}
    before = {}  # name: every job it depends on, directly or not
    for name in names:  # the run's order: dependencies come first
        found = set()
        for dep in by_name[name].get("depends_on") or []:
            if dep in by_name:
                found |= {dep} | before.get(dep, set())
        before[name] = found
    for index, first in enumerate(names):
        for second in names[index + 1:]:
            if first in before[second] or second in before[first]:
                continue
            if share_hosts:
                return True
            both_pinned = by_name[first].get("pinned") and by_name[second].get("pinned")
            if not both_pinned and by_name[first]["needs"] + by_name[second]["needs"] <= host_count:
                return True
    return False
