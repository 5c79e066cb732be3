# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.workflow_jobs, the workflow runner: it
runs a workflow's jobs, several at a time, each as soon as the jobs it
depends on have finished and enough hosts are free for it (the plan:
plugins/plugin_utils/workflow_schedule.py; each job's entry in it, its
playbook's process and its outcome: plugins/plugin_utils/workflow_members.py).

Each job runs in an ansible-playbook of its own (a member of the run):
roles/workflow/files/job.yml, with the running playbook's inventory and
options (plugins/plugin_utils/child_playbook.py) and an extra-vars file of
this plugin's (the job, its hosts, the run's id, the job role's settings).
The member owns its job's life exactly as a run of one job does (the job
role: registration on every host at once, launch_job, teardown). Its output
(plugins/callback/workflow_job.py: `[job] ...` lines only) is shown here as
it comes, line by line, never part of a line; its outcome comes from the
file its callback writes.

Stopping: on Ctrl-C or SIGTERM, or when the workflow's ansible-playbook
process dies, every member gets SIGINT (as a terminal's Ctrl-C: each
cancels its job on every host and unregisters it); this process waits for
them, runs roles/workflow/files/interrupted.yml (what no member owned at
that moment, and the run's ephemeral volumes), writes the outcome table to
the workflow playbook's output (Ansible shows nothing of a worker's after
Ctrl-C), and ends as Ansible's own handler would have ended it.

Answers `fallback` without running anything when no two jobs could run at
once (one at a time in the play is the same run, without a playbook per
job), or when the running ansible-playbook's options cannot be given to
another (a password it asked the terminal for)."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils import run_views as views
from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import WORKFLOW_JOBS_ARGUMENT_SPEC
from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RuntimeRefused
from ansible_collections.fuzz.multinode.plugins.plugin_utils.child_playbook import NotPassable, child_command
from ansible_collections.fuzz.multinode.plugins.plugin_utils.interrupts import Signals
from ansible_collections.fuzz.multinode.plugins.plugin_utils.node_runtime_call import call_runtime
from ansible_collections.fuzz.multinode.plugins.plugin_utils.record_writer import RecordWriter
from ansible_collections.fuzz.multinode.plugins.plugin_utils.workflow_members import (
    Member,
    outcome,
    plan_entry,
    reported,
)
from ansible_collections.fuzz.multinode.plugins.plugin_utils.workflow_schedule import (
    FINISHED,
    NOT_RUN,
    Schedule,
    can_overlap,
)

display = Display()

PLAYBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "roles", "workflow", "files")
# Seconds between looks at signals and the playbook process while no member
# prints anything.
TICK = 0.2
# After an interrupt: seconds a member gets, beyond three kill graces, to
# cancel its job (launch_job: the cancel request, the job's teardown, the
# unregistration everywhere, each bounded), and the clean-up playbook.
CANCEL_WAIT = 120
CLEANUP_WAIT = 120
# Seconds a member's output may stay open after its process ended (a
# process it started holding the pipe).
AFTER_EXIT = 2


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=WORKFLOW_JOBS_ARGUMENT_SPEC)
        self.args = args
        self.record = RecordWriter(args["record"], args["run"])  # the jobs' states, as they change
        self.units = {job["name"]: job for job in args["jobs"]}
        self.addresses = {node["node"]: node["address"] for node in args["nodes"]}
        hosts = [node["node"] for node in args["nodes"]]
        share = args["share_hosts"] or args["local"]
        pinned = self._volumes_pinned(args, hosts)
        node_devices = [(host, args["node_devices"].get(host)) for host in hosts]
        plan = [plan_entry(job, node_devices, args["local"], pinned) for job in args["jobs"]]
        services = [entry["name"] for entry in plan if entry["service"]]
        if not services and not can_overlap(plan, len(hosts), share):
            result.update(changed=False, fallback="")  # one at a time in the play is the same run
            return result
        self.work = tempfile.mkdtemp(prefix="fmn-workflow-")
        try:
            try:
                child_command(os.path.join(PLAYBOOKS, "job.yml"), "-", vault_identities=C.DEFAULT_VAULT_IDENTITY_LIST)
            except NotPassable as exc:
                if services:  # a service lives beside other jobs: only the runner can run it
                    result.update(failed=True, msg="the workflow's services (%s) cannot run: each runs in an "
                                  "ansible-playbook of its own, and %s" % (", ".join(services), exc))
                    return result
                display.display("The workflow's jobs run one at a time: they cannot run in playbooks of their own, "
                                "because %s." % exc)
                result.update(changed=False, fallback=str(exc))
                return result
            schedule = Schedule(plan, hosts, at_once=args["at_once"], share_hosts=share)
            display.display("workflow run %s: %d jobs on %s, %s" % (
                args["run"], len(plan), "this machine" if args["local"] else "hosts " + ", ".join(hosts),
                "at most %d at once" % args["at_once"] if args["at_once"] else "as many at once as they allow"))
            signals = Signals()
            result.update(self._run(schedule, signals))
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
        if signals.received is not None:
            signals.end_as_ansible_would()
        return result

    def _volumes_pinned(self, args, hosts):
        """Whether jobs that mount a volume must keep to the first hosts: the
        volume root is each node's own storage (the first host says, when
        fuzz_multinode_volume_sharing is auto)."""
        if args["local"] or len(hosts) < 2 or not any(job.get("volumes") for job in args["jobs"]):
            return False
        if args["volume_sharing"] != "auto":
            return args["volume_sharing"] != "shared"
        try:
            answer = call_runtime(self, ["volume-sharing", args["volume_root"], "auto"])
        except (RuntimeRefused, AnsibleConnectionFailure) as exc:
            display.warning("Cannot tell whether %s is shared storage (%s): jobs with volumes run on the first "
                            "hosts, as if it were not." % (args["volume_root"], exc))
            return True
        return not answer.get("shared")

    # -- running the members ---------------------------------------------------------

    def _run(self, schedule, signals):
        """Run the members to their end, or until an interrupt; then the
        result. After a signal, the caller ends as Ansible would."""
        args = self.args
        self.outcomes = {}
        self.members = {}
        self.started_on = {}  # host: names of the jobs started there
        self.quiet = False
        self.playbook_pid = os.getppid()
        selector = selectors.DefaultSelector()
        signals.install()
        interrupted = None
        try:
            for name in schedule.order:  # not run from the start (too large for the play)
                if schedule.status[name] == NOT_RUN:
                    self._not_run(name, schedule.messages[name])
            deadline = None
            while not schedule.done and (deadline is None or time.monotonic() < deadline):
                if interrupted is None:
                    if signals.received is not None:
                        interrupted = "the playbook was interrupted (%s)" % signal.Signals(signals.received).name
                    elif os.getppid() != self.playbook_pid:
                        interrupted = "the playbook process ended"
                    if interrupted is not None:
                        signals.ignore()  # a second Ctrl-C must not cut the cancel short
                        self.quiet = True  # Ansible shows nothing of a worker's after Ctrl-C
                        for name in schedule.stop(interrupted):
                            self._not_run(name, schedule.messages[name])
                        for member in self.members.values():
                            member.stopped = interrupted
                            member.stop()
                        grace = int(args["settings"].get("fuzz_multinode_kill_grace") or 10)
                        deadline = time.monotonic() + 3 * grace + CANCEL_WAIT
                if interrupted is None:
                    for name, placed in schedule.next_jobs():
                        try:
                            member = self._start(name, placed, schedule)
                        except (OSError, NotPassable) as exc:
                            self._failed_to_start(name, exc, schedule)
                            continue
                        selector.register(member.process.stdout, selectors.EVENT_READ, member)
                    if not schedule.running and not schedule.done:
                        # Nothing runs and nothing can start: the plan is stuck
                        # (it must not be); end the run rather than wait forever.
                        for name in schedule.stop("no hosts could be given to it"):
                            self._not_run(name, schedule.messages[name])
                self._pump(selector)
                for member in [member for member in self.members.values() if self._ended(member, selector)]:
                    self._finish(member, schedule)
                if interrupted is None:
                    self._services(schedule)
            if interrupted is not None:
                self._after_interrupt(interrupted, schedule)  # signals still ignored
        finally:
            signals.restore()
            selector.close()
        if interrupted is None:
            return {"changed": True, "outcomes": self.outcomes}
        return {"failed": True, "outcomes": self.outcomes, "msg": "workflow canceled: %s" % interrupted}

    def _services(self, schedule):
        """Services that became ready let their dependants start (the next
        round of next_jobs); those the workflow no longer needs are stopped."""
        for name in schedule.running:
            member = self.members.get(name)
            if member is not None and name not in schedule.ready and member.is_ready():
                schedule.is_ready(name)
                self.record.event(name, "ready")
        for name, why in schedule.to_stop():
            self._show(["%sstopping the service: %s" % (self.members[name].prefix, why)])
            self.members[name].stop_service(why)
            self.record.event(name, "stopping")

    def _running_services(self, schedule):
        """The services of the run that run now, as a job that starts now
        reaches them (rank_plan's `services`): each with its rank 0's
        address and its endpoints."""
        return [{"name": name, "address": self.addresses[schedule.placed[name][0]],
                 "endpoints": self.units[name].get("endpoints") or []}
                for name in schedule.running if schedule.is_service(name)]

    def _start(self, name, placed, schedule):
        args = self.args
        job = self.units[name]
        wanted = set((job.get("files") or {}).values())
        variables = {key: value for key, value in args["settings"].items() if value is not None}
        variables.update(
            fuzz_multinode_run_id=args["run"],
            fuzz_multinode_local=args["local"],
            fuzz_multinode_workflow_files={key: value for key, value in args["files"].items() if key in wanted},
            fuzz_multinode_member={"job": job, "nodes": [{"node": host, "address": self.addresses[host]}
                                                         for host in placed]},
            fuzz_multinode_running_services=[service for service in self._running_services(schedule)
                                             if service["name"] != name])
        service_files = {}
        if schedule.is_service(name):
            service_files = {"ready_file": os.path.join(self.work, "%s.ready" % name),
                             "stop_file": os.path.join(self.work, "%s.stop" % name)}
            variables.update(fuzz_multinode_ready_file=service_files["ready_file"],
                             fuzz_multinode_stop_file=service_files["stop_file"])
        member_file = os.path.join(self.work, "%s.json" % name)
        report = os.path.join(self.work, "%s.report.json" % name)
        process = self._spawn("job.yml", variables, member_file, name, report)
        member = Member(name, placed, process, report, **service_files)
        self.members[name] = member
        for host in placed:
            self.started_on.setdefault(host, []).append(name)
        self._show(["%sstarted on hosts %s" % (member.prefix, ", ".join(placed))])
        self.record.started(name, placed)
        return member

    def _spawn(self, playbook, variables, member_file, name, report, output=subprocess.PIPE):
        with open(os.open(member_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            json.dump(variables, handle)
        command = child_command(os.path.join(PLAYBOOKS, playbook), member_file,
                                vault_identities=C.DEFAULT_VAULT_IDENTITY_LIST)
        env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_FORCE_COLOR"}
        env.update(ANSIBLE_STDOUT_CALLBACK="fuzz.multinode.workflow_job", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_RETRY_FILES_ENABLED="0", FUZZ_MULTINODE_WORKFLOW_JOB=name,
                   # The workflow's playbook warned about its inventory already.
                   ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_LOCALHOST_WARNING="0",
                   FUZZ_MULTINODE_WORKFLOW_REPORT=report)
        # A process group of its own: signalled on its own, as a terminal would.
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                env=env, cwd=os.getcwd(), start_new_session=True, close_fds=True)

    def _pump(self, selector):
        """Show what the members printed, waiting up to TICK for it."""
        if not selector.get_map():
            time.sleep(TICK)
            return
        for key, _unused in selector.select(TICK):
            member = key.data
            try:
                data = os.read(key.fileobj.fileno(), 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                selector.unregister(key.fileobj)
                member.output_open = False
            self._show(member.lines(data))

    def _ended(self, member, selector):
        """Whether a member has ended: its process exited and its output is
        all shown (or stayed open too long after the exit)."""
        if member.ended is not None:
            return False
        if member.process.poll() is None:
            return False
        member.exited_at = member.exited_at or time.monotonic()
        if member.output_open and time.monotonic() - member.exited_at < AFTER_EXIT:
            return False
        if member.output_open:
            selector.unregister(member.process.stdout)
            member.output_open = False
            self._show(member.lines(b""))
        member.process.stdout.close()
        member.ended = time.time()
        return True

    def _finish(self, member, schedule):
        status, message, duration = reported(member.name, member.report(), member.process.returncode)
        if member.stopped is not None and not member.report().get("launch"):
            status, message = "CANCELED", "job %s canceled: %s" % (member.name, member.stopped)
        elif member.no_longer_needed is not None and status == "CANCELED":
            # Stopped because it had done its part: the workflow's success.
            status, message = FINISHED, "service %s stopped: %s" % (member.name, member.no_longer_needed)
        self.outcomes[member.name] = outcome(member.name, status, message, member.started, member.ended, duration,
                                             self.args["row_format"], self._after(member.name))
        self.record.ended(member.name, self.outcomes[member.name], (member.report().get("launch") or {}).get("ranks"),
                          duration)
        for name in schedule.ended(member.name, status, message):
            self._not_run(name, schedule.messages[name])

    def _failed_to_start(self, name, exc, schedule):
        message = "job %s did not start: its ansible-playbook cannot run: %s" % (name, exc)
        self._show(["[%s] %s" % (name, message)])
        now = time.time()
        self.outcomes[name] = outcome(name, "FAILED", message, now, now, None, self.args["row_format"],
                                      self._after(name))
        self.record.ended(name, self.outcomes[name])
        for blocked in schedule.ended(name, "FAILED"):
            self._not_run(blocked, schedule.messages[blocked])

    def _not_run(self, name, message):
        self.outcomes[name] = outcome(name, NOT_RUN, message, row_format=self.args["row_format"],
                                      waits_for=self._after(name))
        self.record.ended(name, self.outcomes[name])
        self._show(["[%s] %s" % (name, message)])

    def _show(self, lines):
        if lines and not self.quiet:
            display.display("\n".join(lines))

    def _after(self, name):
        """What the job waits for, in the outcome table (the workflow's graph)."""
        return views.after(self.units[name])

    # -- after an interrupt ----------------------------------------------------------

    def _after_interrupt(self, interrupted, schedule):
        """Every member has canceled its job (or had its time): leave nothing
        of the run on its hosts, and tell the terminal what became of each
        job."""
        for name, member in self.members.items():
            if name not in self.outcomes:  # it did not end in time: it still cancels on its own
                self.outcomes[name] = outcome(name, "CANCELED", "job %s canceled: %s" % (name, interrupted),
                                              member.started, None, None, self.args["row_format"],
                                              self._after(name))
        header = self.args["row_format"] % ("job", "status", "start", "end", "seconds", "after", "details")
        rows = [header.strip()] + [self.outcomes[name]["row"] for name in schedule.order if name in self.outcomes]
        self.record.canceled(interrupted)
        self._tell_terminal(["", "workflow canceled: %s" % interrupted] + rows + self._clean_up())

    def _clean_up(self):
        """Run interrupted.yml on the run's hosts; what the terminal must be
        told when it did not finish (its output is then kept)."""
        ephemeral = any("ephemeral" in (job.get("volumes") or {}).values() for job in self.args["jobs"])
        hosts = self.args["nodes"] if ephemeral else [node for node in self.args["nodes"]
                                                      if node["node"] in self.started_on]
        if not hosts:
            return []
        variables = {key: value for key, value in self.args["settings"].items() if value is not None}
        variables.update(fuzz_multinode_run_id=self.args["run"], fuzz_multinode_local=self.args["local"],
                         fuzz_multinode_member={"nodes": hosts, "started": self.started_on,
                                                "ephemeral_volumes": ephemeral})
        output = os.path.join(self.work, "interrupted.out")
        try:
            with open(output, "wb") as out:
                cleanup = self._spawn("interrupted.yml", variables, os.path.join(self.work, "interrupted.json"),
                                      "interrupted", os.path.join(self.work, "interrupted.report.json"), output=out)
            status = cleanup.wait(CLEANUP_WAIT)
        except subprocess.TimeoutExpired:
            status = "still running after %d s" % CLEANUP_WAIT
        except (OSError, NotPassable) as exc:
            return ["the clean-up of the run's hosts did not run: %s" % exc]
        if status == 0:
            return []
        kept = os.path.join(self.args["settings"].get("fuzz_multinode_log_dir") or os.getcwd(),
                            "interrupted-%s.log" % self.args["run"])
        try:
            os.makedirs(os.path.dirname(kept), 0o700, exist_ok=True)
            shutil.copyfile(output, kept)
            os.chmod(kept, 0o600)
        except OSError:
            kept = "(not kept)"
        return ["the clean-up of the run's hosts (registrations, ephemeral volumes) did not finish (%s); its "
                "output: %s" % (status if isinstance(status, str) else "status %d" % status, kept)]

    def _tell_terminal(self, lines):
        """Write to the workflow playbook's own output, which a worker's
        Display no longer reaches once the play was interrupted (a
        controller without /proc, or a playbook already gone, gets nothing)."""
        if os.getppid() != self.playbook_pid:
            return
        try:
            fd = os.open("/proc/%d/fd/1" % self.playbook_pid, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return
        try:
            os.write(fd, ("\n".join(lines) + "\n").encode())
        except OSError:
            pass
        finally:
            os.close(fd)
