"""Supervision: the head runs rank 0 and fails the job on the first failed
worker (a task array's supervisor is task_array.py).

`head JOB` runs the supervisor as root on the head node, detached from the
controller's module (launch_job), which polls for the result it writes in
the job's directory.
"""

import os
import signal
import time

from . import registry, volumes
from .agent import Agent
from .calls import rank_outcomes, read_call_records
from .cgroups import place, run_cgroups
from .claims import touch_claim
from .errors import PROG, RuntimeFailure
from .execution import command_shown, rank_sandbox, spawn_rank
from .inputs import forget_secrets, job_command, job_environment, job_user
from .local_socket import start_local_launcher
from .processes import (
    POLL_SECONDS,
    become_subreaper,
    command_line,
    descendants,
    enter_rank_namespace,
    exit_status,
    has_ended,
    job_processes,
    kill_in_rounds,
    kill_job_processes,
    reap_children,
    recorded_namespaces,
    send_signal,
)
from .readiness import Readiness
from .resources import bind_cpus
from .sandbox import host_reason, ran_in
from .teardown import clean_nodes, keep_handed_logs
from .transport import close_transports, open_transports
from .wire import LineRelay, write_all

# How long after the head command ended a process still showing its
# command line (a fork of it, not exec'd yet) counts as a wrapper call
# about to be made: exec_all starts each worker's call as
# `"$MULTINODE_SSH_WRAPPER" host script &`, and rank 0's shell can exit
# before that fork has exec'd the wrapper. Only briefly: a job that leaves
# background subshells of its own must not wait the whole grace for them.
SETTLE_SECONDS = 0.5
# How long the agent has to end between two steps at the teardown (it ends
# once its calls, whose clients were killed, are dropped).
AGENT_STOP_SECONDS = 1.0
# For the job's first seconds the supervisor looks for its end every few
# milliseconds rather than every POLL_SECONDS: a trivial job's end is then
# seen about 25 ms sooner, on every job start.
QUICK_POLL_SECONDS = 0.005
QUICK_POLL_FOR = 2.0


class Cancelled(Exception):
    pass


class TimedOut(Exception):
    """The job ran longer than its policy.timeout.execute."""


class Supervisor:
    """Runs rank 0 on the head and fails the job on the first failed worker."""

    def __init__(self, spec):
        self.spec = spec
        self.job = spec.job
        self.head = spec.head
        self.user = job_user(spec)
        self.grace = spec.kill_grace
        self.cancelled = None
        self.lost_nodes = set()
        self.transports = {}  # node: its open transport (transport.py)
        self.local_launcher = None  # local mode: pid of the launch socket's server (local_socket.py)
        self.agent = None  # the job's wrapper calls from this node (agent.py)
        self.rank0_output = None  # rank 0's stdout and stderr, into the job log (wire.LineRelay)
        self.rank0_call = None  # rank 0's own run, as a call record
        self.head_command = None  # rank 0's command, for its forks at its end (HeadCommand)
        self.sandbox_pid = None  # the host pid of the run's sandbox's PID 1 here
        self.remote_calls = []  # the call records of the workers' nodes
        self.torn_down = []  # worker nodes the teardown left nothing on (clean_workers)
        self.teardown_at = None  # when the job's teardown began
        self.readiness = None  # a service's (readiness.py), from rank 0's start on

    def run(self):
        started = time.time()
        result = {"job": self.job, "status": "FAILED", "rc": None,
                  "failed_rank": None, "message": "",
                  "log": registry.job_log_path(self.job)}
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        namespace = None
        log_fd = None
        try:
            log_fd = os.open(result["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o640)
            fallback = host_reason(self.job)
            if fallback is not None:
                write_all(log_fd, ("fuzz.multinode: job %s runs on the bare host: %s\n" % (
                    self.job, fallback)).encode())
            unshared = volumes.sharing_note(self.spec)
            if unshared is not None:
                write_all(log_fd, ("fuzz.multinode: %s\n" % unshared).encode())
            namespace = enter_rank_namespace(self.job, self.namespace_name())
            become_subreaper()
            self.open_connections(log_fd)
            result.update(self.execute(log_fd))
        except Cancelled as exc:
            result["status"] = "CANCELED"
            result["message"] = "job %s canceled by %s" % (self.job, exc)
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, result["message"])).encode())
        except TimedOut:
            result["message"] = "job %s timed out: it ran longer than its policy.timeout.execute (%gs)" % (
                self.job, self.spec.timeout)
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, result["message"])).encode())
        except RuntimeFailure as exc:
            result["message"] = str(exc)
            if log_fd is not None:
                write_all(log_fd, ("%s: %s\n" % (PROG, exc)).encode())
        finally:
            self.teardown_at = time.time()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if self.local_launcher is not None:
                send_signal(self.local_launcher, signal.SIGKILL)  # no new launches while the job is torn down
            if namespace is not None:
                self.tear_down(self.local_namespaces(namespace))
            if self.rank0_output is not None:
                self.rank0_output.finish()
            forget_secrets(self.job)
            lost = self.lost_call()
            if lost and result["status"] == "FINISHED":
                result.update(status="FAILED", rc=255, failed_rank=None, message=lost)
                if log_fd is not None:
                    write_all(log_fd, ("%s: %s\n" % (PROG, lost)).encode())
            if log_fd is not None:
                os.close(log_fd)
            touch_claim(self.job)  # the job is over; its play cleans up next
        result["duration"] = round(time.time() - started, 3)
        result["ran_in"] = ran_in(self.spec)
        result["torn_down"] = self.torn_down
        return result

    def lost_call(self):
        """Why the job cannot have finished: a wrapper call, on any node, that
        lost its connection while the job ran (its command's end unknown).
        None when there was none."""
        for call in read_call_records(self.job) + self.remote_calls:
            if call.get("lost") and call.get("end", 0) <= self.teardown_at:
                return "job %s %s" % (self.job, call["lost"])
        return None

    def namespace_name(self):
        """The host name of the supervisor's own namespace: rank 0's."""
        return self.head.name

    def local_namespaces(self, namespace):
        """The namespaces on the head to stop at the end: rank 0's (the
        supervisor's own), and every other one the job has here: in local
        mode all the ranks'."""
        return {namespace} | recorded_namespaces(self.job)

    def remote_nodes(self):
        """{node: a rank on it} of the nodes reached over ssh: the workers'."""
        return self.spec.nodes_except(self.head.node)

    def connect_nodes(self):
        """{node: a rank on it} of the nodes to connect to before the start."""
        return self.remote_nodes()

    def execute(self, log_fd):
        """Run rank 0 and wait for the job; returns the result's fields."""
        child = self.start_rank0(log_fd)
        status, failure = self.wait(child)
        if failure:
            if failure.get("lost"):
                self.lost_nodes.add(failure["node"])
            return failure_result(failure)
        not_ready = self.readiness.not_ready_note() if self.readiness is not None else None
        if status == 0 and not_ready is None:
            return {"rc": 0, "status": "FINISHED", "message": "job %s finished" % self.job}
        ended = "rank 0 (%s on %s) exited with status %d" % (self.head.name, self.head.node, status)
        if not_ready is not None:
            # It never served: whatever its status, its dependants must be told why.
            return {"rc": status, "status": "FAILED", "failed_rank": self.head.summary(status),
                    "message": "service %s ended before it was ready: %s; %s" % (self.job, ended, not_ready)}
        return {"rc": status, "failed_rank": self.head.summary(status), "message": ended}

    def check_stop(self, timeout_at):
        """Raise TimedOut or Cancelled when the job must stop now."""
        if timeout_at is not None and time.monotonic() > timeout_at:
            raise TimedOut()
        if self.cancelled:
            raise Cancelled(self.cancelled)
        if self.controller_gone():
            raise Cancelled("the controller: it stopped polling the job")
        reason = self.cancel_requested()
        if reason:
            raise Cancelled(reason)

    def tear_down(self, namespaces):
        """The job is over when rank 0 ends: stop what is left of it here,
        then on every worker node, over the job's holds there (spared by
        the kill here, as is the agent, asked to end between two steps:
        then the holds carry whole frames), or afresh; then the holds end,
        and last whatever of the job is still here."""
        cgroups = run_cgroups(self.job)
        holds = set().union(*(transport.pids() for transport in self.transports.values()))
        spare = holds | {self.agent.pid} if holds and self.agent is not None else holds
        kill_job_processes(namespaces, self.grace, self.user, cgroups, spare)
        whole = self.agent.stop(within=AGENT_STOP_SECONDS if holds else 0) if self.agent is not None else False
        self.clean_workers(self.transports if holds and whole else None)
        close_transports(self.transports)
        if spare:
            kill_in_rounds(lambda: job_processes(namespaces, self.user, cgroups))

    def clean_workers(self, transports=None):
        """Ask every worker node to stop what is left of the job there (over
        `transports`, its holds, where given; teardown.clean_nodes); each
        answers with the call records made there (remote_calls) and, when
        they fit, hands over its rank logs and unregisters the job there
        (kept here for the play's cleanup). The result lists the nodes left
        with nothing of the job as `torn_down`: the play's cleanup has
        nothing to do there. That is decided here alone."""
        # A node that was lost is skipped: a fresh connection would only time out.
        nodes = {node: rank for node, rank in self.remote_nodes().items()
                 if node not in self.lost_nodes}
        if not nodes:
            return
        # A worker that unregisters the job also removes the run's ephemeral
        # volumes when the run ends with the job: the head's `cleanup
        # --everywhere --run-volumes` after it no longer reaches that worker.
        records, handed = clean_nodes(self.spec, self.user, nodes, unregister=False, hand_over=True,
                                      run_volumes=self.run_ends_with_job(), transports=transports)
        self.remote_calls += records
        keep_handed_logs(self.job, handed)
        self.torn_down = sorted(handed)

    def controller_gone(self):
        """True when the controller stopped polling the job (the play was
        interrupted or lost its connection) for longer than allowed."""
        timeout = self.spec.controller_timeout
        if timeout <= 0:
            return False
        try:
            heartbeat = os.stat(registry.job_path(self.job, registry.HEARTBEAT_FILE))
            return time.time() - heartbeat.st_mtime > timeout
        except FileNotFoundError:
            return False

    def cancel_requested(self):
        """The reason written to the job's cancel file by the controller
        (fuzz.multinode.launch_job when the playbook is interrupted), if any."""
        try:
            with open(registry.job_path(self.job, registry.CANCEL_FILE), "rb") as handle:
                return handle.read().decode(errors="replace").strip() or "the controller"
        except FileNotFoundError:
            return None

    def run_ends_with_job(self):
        """Whether the controller's cancel said the run ends with the job
        (an interrupted play that runs one job at a time)."""
        return os.path.exists(registry.job_path(self.job, registry.RUN_ENDS_FILE))

    def _on_signal(self, signum, frame):
        if self.cancelled is None:
            self.cancelled = signal.Signals(signum).name

    def open_connections(self, log_fd):
        """Open the job's transport to every node it reaches (ssh: one
        multiplexed connection to every worker node, in parallel, whose
        first session is the job's lifeline to the node, a `hold` request:
        the run's claim there stays live while this process lives,
        claims.py); a node we cannot reach fails the job now, with the
        reason. Then start the agent, which makes the wrapper calls of the
        ranks here over them and writes their forwarded lines into the job
        log beside rank 0's (its output's pipe is the job log's stand-in).
        In local mode the launch socket stands in for the nodes' sshd: it
        serves this node's transport, so it is in place first."""
        if self.spec.local:
            self.local_launcher = start_local_launcher(self.spec, self.user)
        self.transports = open_transports(self.spec, self.user, self.connect_nodes(), agents=True)
        self.rank0_output = LineRelay(log_fd, self.user)
        self.agent = Agent(self.spec, self.user, self.transports, {self.rank0_output.identity})
        self.agent.start(close=self.rank0_output.fds())

    def start_rank0(self, log_fd):
        bind_cpus(self.spec, self.head)
        placement = place(self.spec, self.head)
        env = job_environment(self.spec, self.head, self.user)
        sandbox = rank_sandbox(self.spec, self.head)
        argv = job_command(self.spec, env, "rank 0 (%s)" % self.head.name, sandbox.image is not None)
        # Rank 0 writes into a pipe, relayed into the job log as whole lines:
        # its own unterminated writes never meet a forwarded line there.
        if self.rank0_output is None:
            self.rank0_output = LineRelay(log_fd, self.user)
        out = self.rank0_output.write_fd
        # Rank 0 starts in the run's cgroups; the supervisor stays out of
        # them, as teardown kills all they hold.
        with placement.spawning_in():
            child = spawn_rank(self.spec, self.head, self.user, argv, env, sandbox, out, out)
        self.head_command = HeadCommand(command_shown(argv, sandbox, self.spec.cwd))
        self.sandbox_pid = sandbox.pid
        for warning in placement.warnings:
            write_all(log_fd, ("fuzz.multinode: warning: %s\n" % warning).encode())
        self.rank0_output.start()
        self.rank0_call = {"rank": self.head.rank, "start": time.time()}
        if self.spec.service is not None:
            def spawn_probe(argv, out):
                with placement.spawning_in():
                    return spawn_rank(self.spec, self.head, self.user, argv, env, sandbox, out, out)
            self.readiness = Readiness(self.spec, self.head.address, spawn_probe, log_fd)
        return child

    def rank_report(self, ended):
        """How each rank ran (rank_outcomes): the call records of every
        node, and rank 0's own run."""
        calls = read_call_records(self.job) + self.remote_calls
        if self.rank0_call is not None:
            calls.append(self.rank0_call)
        return rank_outcomes(self.spec, calls, ended)

    def wait(self, child):
        """Wait for rank 0, then give wrapper calls still in flight up to the
        grace period to finish, so output and failures of workers dispatched
        just before the end are not lost. Returns (rank 0's exit status,
        None) or (None, the first worker failure)."""
        events = registry.job_path(self.job, registry.EVENTS_DIR)
        deadline = None
        quick_until = time.monotonic() + QUICK_POLL_FOR
        timeout_at = time.monotonic() + self.spec.timeout if self.spec.timeout else None
        while True:
            # After rank 0 ended the timeout no longer applies (the grace).
            self.check_stop(timeout_at if deadline is None else None)
            failure = first_failure(events)
            if failure:
                return None, failure
            reaped = reap_children()
            for pid, status in reaped.items():
                if pid == child.pid:
                    child.returncode = exit_status(status)
                    deadline = time.monotonic() + self.grace
                    self.rank0_call.update(end=time.time(), status=child.returncode)
                    if self.head_command is not None:
                        self.head_command.end()
            if self.readiness is not None and deadline is None:
                self.readiness.check(reaped)
            self.agent.check()
            if deadline is not None and (time.monotonic() > deadline or not self.calls_in_flight()):
                failure = first_failure(events)
                return (None, failure) if failure else (child.returncode, None)
            # A short job's end is seen at once; a long one's costs no CPU.
            time.sleep(QUICK_POLL_SECONDS if time.monotonic() < quick_until else POLL_SECONDS)

    def calls_in_flight(self):
        """Whether a wrapper call of this node is still being made: by the
        agent, or by a wrapper process of its own (the slow path), or just
        after rank 0 ended, about to be (HeadCommand.about_to_call). Rank 0's
        processes are below the supervisor while their shell lives, then
        (orphans) below the sandbox's PID 1."""
        if self.agent.calls_in_flight():
            return True
        client = os.fsencode(self.head.env.get("MULTINODE_SSH_WRAPPER", ""))
        pids = descendants(os.getpid(), *([self.sandbox_pid] if self.sandbox_pid else []))
        return any(making_call(pid, client, self.head_command) for pid in pids)


def making_call(pid, client, head_command=None):
    """Whether process pid is a wrapper call, or about to be one, judged from
    one read of its command line: a fork's exec may change it between two."""
    argv = command_line(pid)
    return is_wrapper_call(argv, client) or (head_command is not None and head_command.about_to_call(pid, argv))


def is_wrapper_call(argv, client=b""):
    """Whether the command line argv is a wrapper call of this runtime: the
    Python wrapper, or `client` (the sh wrapper's path) not yet at its agent."""
    if argv and len(argv) > 3 and argv[2].rstrip(b"/").endswith(b"/multinode-runtime") and argv[3] == b"wrapper":
        return True
    return bool(client and argv and len(argv) > 1 and argv[1] == client)


class HeadCommand:
    """Rank 0's command on the head, for the calls it may have been about to
    make when it ended: the command lines it shows (execution.command_shown),
    as a fork of it does until it execs, and when it ended."""

    def __init__(self, lines):
        self.lines = {tuple(line) + (b"",) for line in lines}  # as processes.command_line reads them
        self.ended_at = None

    def end(self):
        self.ended_at = time.monotonic()

    def about_to_call(self, pid, argv):
        """Whether process pid, showing argv, is still a fork of the command,
        while such a fork counts as a call about to be made: SETTLE_SECONDS
        after it ended; never before, or after. A process in the middle of
        its exec counts too: for some microseconds its command line reads
        empty (the fork's is gone, the wrapper's not there yet). So does one
        ending (the same, until it is a zombie): the next look finds it ended."""
        if self.ended_at is None or time.monotonic() > self.ended_at + SETTLE_SECONDS:
            return False
        if argv == [b""]:  # in its exec, or ending
            return not has_ended(pid)
        return tuple(argv or ()) in self.lines


def first_failure(events):
    """The first worker failure reported in `events` (the job user's
    directory: wrapper.report_failure), or None. What is not such a report
    is passed over (registry.read_job_record): a link, a FIFO, a file of
    someone else's, a malformed record."""
    for name in registry.list_job_records(events):
        failure = registry.read_job_record(events, name)
        if is_failure_report(failure):
            return failure
    return None


def is_failure_report(record):
    kinds = {"rank": int, "name": str, "node": str, "status": int, "message": str}
    return isinstance(record, dict) and all(
        isinstance(record.get(key), kind) and not isinstance(record.get(key), bool)
        for key, kind in kinds.items())


def failure_result(failure):
    return {"status": "FAILED", "rc": failure["status"],
            "failed_rank": {k: failure[k] for k in ("rank", "name", "node", "status")},
            "message": failure["message"]}
