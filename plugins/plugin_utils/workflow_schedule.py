# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Which jobs of a workflow run when, and on which hosts: the plan of the
workflow runner (plugins/action/workflow_jobs.py), pure logic.

A job starts as soon as every job it depends on has finished and enough
hosts are free for it (`needs`). It gets the free hosts in inventory order,
so its rank 0 is the first free host; a job with `hosts` (those that
can hold its devices) only among those. A `pinned` job gets exactly the first
`needs` hosts of the inventory, as in a run of one job at a time (it mounts
a volume on storage the nodes do not share: its data must be where the
other jobs of the volume and the egress find it). With `share_hosts` the
jobs of a run may share hosts: a job then gets the hosts with the fewest
jobs of the run on them. At most `at_once` jobs run at a time (0: as many
as the hosts allow). Jobs are taken in the run's order (dependency order,
the Fuzzfile's for ties); one that does not fit now does not hold back a
later one that does.

A job that did not finish leaves its dependants NOT_RUN, and theirs in
turn, each naming the dependencies that did not finish.

Services (`service`: true) start like jobs, and are long-lived: a unit
that needs one RUNNING (`running_deps`) starts once it is ready
(`is_ready`), and is NOT_RUN when it ended first. Services hold no host
for themselves: a job may run on a host that runs a service of the run
(it takes hosts without one first), and they do not count towards
`at_once`. Which services to stop when (`to_stop`): one without
`persist` once every unit that needs it RUNNING has ended (when it has
any); all of them when the workflow's jobs are over (none runs, none can
start, none waits for a service to become ready); a workflow of services
only runs them until they end or the run is interrupted."""

from __future__ import annotations

WAITING = "WAITING"
RUNNING = "RUNNING"
FINISHED = "FINISHED"
NOT_RUN = "NOT_RUN"


class Schedule:
    """The state of a workflow's jobs in one run. `jobs`: dicts with
    `name`, `needs` (hosts), `depends_on` (names, to finish) and optionally
    `running_deps` (names of services, to be RUNNING), `pinned`, `service`,
    `persist`, `hosts` (the only ones it may run on), in the run's order; `hosts`: the hosts jobs may run on, in
    inventory order. Dependencies on jobs that are not part of the run are
    ignored (with -e job=NAME the one job runs alone)."""

    def __init__(self, jobs, hosts, at_once=0, share_hosts=False):
        self.order = [job["name"] for job in jobs]
        self.jobs = {job["name"]: job for job in jobs}
        self.hosts = list(hosts)
        self.at_once = at_once
        self.share_hosts = share_hosts
        self.status = dict.fromkeys(self.order, WAITING)
        self.messages = {}  # name: why it did not run
        self.why = {}  # name: how a unit that did not finish ended (ended's `message`)
        self.placed = {}  # name: its hosts, rank 0's first
        self.load = dict.fromkeys(self.hosts, 0)  # host: jobs of the run running there
        self.service_load = dict.fromkeys(self.hosts, 0)  # host: services of the run running there
        self.ready = set()  # services whose readiness probe passed
        self.stopping = set()  # services told to stop (to_stop)
        for name in self.order:
            needs = self.jobs[name]["needs"]
            if needs > len(self.hosts):
                self._not_run(name, "it needs %d hosts and the play has %d (%s)"
                              % (needs, len(self.hosts), ", ".join(self.hosts) or "none"))
            elif needs > len(self._candidates(self.jobs[name])):
                self._not_run(name, "it needs %d hosts with its devices and the play has %d (%s)" % (
                    needs, len(self._candidates(self.jobs[name])),
                    ", ".join(self._candidates(self.jobs[name])) or "none"))
        self._block_dependants()

    def depends_on(self, name):
        return [dep for dep in self.jobs[name].get("depends_on") or [] if dep in self.jobs]

    def running_deps(self, name):
        return [dep for dep in self.jobs[name].get("running_deps") or [] if dep in self.jobs]

    def is_service(self, name):
        return bool(self.jobs[name].get("service"))

    @property
    def running(self):
        return [name for name in self.order if self.status[name] == RUNNING]

    @property
    def running_jobs(self):
        return [name for name in self.running if not self.is_service(name)]

    @property
    def done(self):
        return all(status not in (WAITING, RUNNING) for status in self.status.values())

    def next_jobs(self):
        """[(name, hosts)] of the jobs to start now, in the run's order; each
        is RUNNING from here on, on its hosts."""
        started = []
        for name in self.order:
            service = self.is_service(name)
            if not service and self.at_once and len(self.running_jobs) >= self.at_once:
                continue
            if self.status[name] != WAITING or not self._dependencies_met(name):
                continue
            hosts = self._hosts_for(self.jobs[name])
            if hosts is None:
                continue
            self.status[name] = RUNNING
            self.placed[name] = hosts
            for host in hosts:
                (self.service_load if service else self.load)[host] += 1
            started.append((name, hosts))
        return started

    def is_ready(self, name):
        """Service `name` passed its readiness probe: the units that need it
        RUNNING may start."""
        if self.status[name] == RUNNING:
            self.ready.add(name)

    def to_stop(self):
        """[(name, why)] of the running services to stop now (each named once)."""
        stop = []
        jobs_over = self._jobs_over()
        for name in self.running:
            if not self.is_service(name) or name in self.stopping:
                continue
            needing = [unit for unit in self.order if name in self.running_deps(unit)]
            if (needing and not self.jobs[name].get("persist")
                    and all(self.status[unit] not in (WAITING, RUNNING) for unit in needing)):
                stop.append((name, "every job that needs it running has ended"))
            elif jobs_over:
                stop.append((name, "the workflow's jobs are over"))
        self.stopping.update(name for name, _unused in stop)
        return stop

    def _jobs_over(self):
        """Whether the workflow's jobs are over, so its services may stop: it
        has jobs, none runs or can start now, and none waits for a service
        to start or become ready (False for a workflow of services only)."""
        jobs = [name for name in self.order if not self.is_service(name)]
        if not jobs or self.running_jobs:
            return False
        for name in jobs:
            if self.status[name] != WAITING:
                continue
            if self._dependencies_met(name):
                return False  # it can start (once hosts are free)
            for dep in self.running_deps(name):
                if self.status[dep] == WAITING or (self.status[dep] == RUNNING and dep not in self.ready):
                    return False
        return True

    def _dependencies_met(self, name):
        return (all(self.status[dep] == FINISHED for dep in self.depends_on(name))
                and all(self.status[dep] == RUNNING and dep in self.ready for dep in self.running_deps(name)))

    def ended(self, name, status, message=""):
        """Job `name` ended with `status` (`message`: how, for its
        dependants' messages): its hosts are free again. Returns the jobs
        that will not run now (its dependants, if it did not finish, and
        theirs)."""
        if self.status[name] != RUNNING:
            raise ValueError("job %s ended while %s, not RUNNING" % (name, self.status[name]))
        was_ready = name in self.ready
        self.status[name] = status
        self.ready.discard(name)
        if self.is_service(name):
            self.why[name] = "ended (%s%s)%s" % (status, "" if was_ready else " before it was ready",
                                                 ": " + message if message else "")
        for host in self.placed[name]:
            (self.service_load if self.is_service(name) else self.load)[host] -= 1
        return self._block_dependants()

    def stop(self, reason):
        """Start nothing more (the run was interrupted): every job still
        waiting is NOT_RUN for `reason`; returns them."""
        stopped = [name for name in self.order if self.status[name] == WAITING]
        for name in stopped:
            self._not_run(name, reason)
        return stopped

    def _candidates(self, job):
        """The hosts `job` may run on, in inventory order; a pinned job's
        data is on the first hosts, devices or not."""
        if job.get("pinned") or job.get("hosts") is None:
            return self.hosts
        return [host for host in self.hosts if host in job["hosts"]]

    def _hosts_for(self, job):
        needs = job["needs"]
        if job.get("pinned"):
            chosen = self.hosts[:needs]
            return chosen if self.share_hosts or all(self.load[host] == 0 for host in chosen) else None
        candidates = self._candidates(job)
        if self.share_hosts:
            by_load = sorted(range(len(candidates)), key=lambda index: (
                self.load[candidates[index]] + self.service_load[candidates[index]], index))
            return [candidates[index] for index in sorted(by_load[:needs])]
        free = [host for host in candidates if self.load[host] == 0]
        if len(free) < needs:
            return None
        # Hosts running no service first; rank 0 on the first of those taken.
        return sorted(free, key=lambda host: self.service_load[host] > 0)[:needs]

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
                gone = [dep for dep in self.running_deps(name) if self.status[dep] not in (WAITING, RUNNING)]
                if failed:
                    self._not_run(name, "it depends on %s, which did not finish" % ", ".join(failed))
                elif gone:
                    self._not_run(name, "it needs service %s RUNNING, which %s" % (", ".join(gone), "; ".join(
                        self.why.get(dep) or "was not run" for dep in gone)))
                if failed or gone:
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
