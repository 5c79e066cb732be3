"""Command dispatch: the runtime's subcommands.

  prepare --node NODE   (root) register a job on this node; the job spec
                        (JSON, see docs/design.md) is read from stdin
  head JOB [--controller-timeout SECONDS]
                        (root, head node) run rank 0 and supervise the job;
                        prints the job's result as JSON
  launch                (root, sshd forced command) start one wrapper call
                        for a rank of an active job on this node
  wrapper [OPTS] HOST CMD...
                        (job user) MULTINODE_SSH_WRAPPER: run CMD on the
                        node of rank HOST, ssh's argv contract
  secrets JOB [--run RUN]
                        (root) take the values of the job's secret://
                        references (JSON {"scope/name": value} on stdin)
  task JOB INDEX        (job user, head node) run task INDEX of a task-array
                        job on its node, the way a wrapper call runs
  connect JOB REQUEST   (job user, local mode) carry a launch request to
                        the head's local launch socket, as ssh would
  cleanup JOB [--run RUN] [--everywhere]
                        (root) kill every process of JOB on this node,
                        remove the files it placed, unregister it; prints
                        JSON. --everywhere (head): on the job's other nodes
                        too, when no play will (the playbook was interrupted)

--run RUN: the run of run-job.yml the command is for; a job that another run
holds on this node is left alone (claims.py). Without it (by hand), any run.

Each command imports only the modules it needs: a wrapper call, the most
frequent, loads no supervision or teardown code.
"""

import json
import os
import sys
import time

from .errors import PROG, RuntimeFailure


def cmd_prepare(args):
    if len(args) != 2 or args[0] != "--node":
        raise RuntimeFailure("usage: prepare --node NODE < spec.json")
    from .prepare import prepare_job
    from .spec import parse_spec
    try:
        data = json.load(sys.stdin)
    except ValueError:
        raise RuntimeFailure("prepare: stdin must be the job spec as JSON") from None
    print(json.dumps(prepare_job(data, parse_spec(data), args[1])))


def cmd_head(args):
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--controller-timeout"):
        raise RuntimeFailure("usage: head JOB [--controller-timeout SECONDS]")
    from . import registry
    from .spec import load_spec
    from .supervisor import Supervisor
    from .task_array import TaskArraySupervisor
    job = args[0]
    spec = load_spec(job)
    if len(args) == 3:
        spec = spec.with_changes(controller_timeout=float(args[2]))
    supervisor = (TaskArraySupervisor if spec.task_array is not None else Supervisor)(spec)
    result = supervisor.run()
    result["ranks"] = supervisor.rank_report(time.time())
    registry.write_file(registry.job_path(job, registry.RESULT_FILE), json.dumps(result), 0o644)
    print(json.dumps(result))


def cmd_launch(args):
    from .launch import serve_launch
    return serve_launch(os.environ.get("SSH_ORIGINAL_COMMAND", ""))


def cmd_wrapper(args):
    from .wrapper import wrapper
    return wrapper(args)


def cmd_task(args):
    if len(args) != 2 or not args[1].isdigit():
        raise RuntimeFailure("usage: task JOB INDEX")
    from .wrapper import run_task
    return run_task(args[0], int(args[1]))


def cmd_connect(args):
    if len(args) != 2:
        raise RuntimeFailure("usage: connect JOB REQUEST")
    from .local_socket import connect
    return connect(args[0], args[1])


def take_run(args):
    """(the arguments without `--run RUN`, RUN or None)."""
    if "--run" not in args:
        return list(args), None
    at = args.index("--run")
    if at + 1 >= len(args):
        raise RuntimeFailure("--run needs a run id")
    return list(args[:at]) + list(args[at + 2:]), args[at + 1]


def cmd_secrets(args):
    args, run = take_run(args)
    if len(args) != 1:
        raise RuntimeFailure('usage: secrets JOB [--run RUN] < {"scope/name": "value", ...}')
    from .claims import held_run, holds
    from .inputs import store_secrets
    from .spec import load_spec
    spec = load_spec(args[0])
    if not holds(spec.job, run):
        raise RuntimeFailure("secrets: job %s on this node belongs to run %s, not to run %s"
                             % (spec.job, held_run(spec.job) or "(no id)", run))
    try:
        given = json.load(sys.stdin)
    except ValueError:
        given = None
    count = store_secrets(spec, given)
    print(json.dumps({"changed": True, "job": spec.job, "secrets": count}))


def cmd_cleanup(args):
    args, run = take_run(args)
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] != "--everywhere"):
        raise RuntimeFailure("usage: cleanup JOB [--run RUN] [--everywhere]")
    from .teardown import cleanup
    print(json.dumps(cleanup(args[0], everywhere=len(args) == 2, run=run)))


COMMANDS = {
    "prepare": cmd_prepare,
    "head": cmd_head,
    "launch": cmd_launch,
    "wrapper": cmd_wrapper,
    "task": cmd_task,
    "connect": cmd_connect,
    "secrets": cmd_secrets,
    "cleanup": cmd_cleanup,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        sys.stderr.write("usage: %s {%s} ...\n" % (argv[0], ",".join(COMMANDS)))
        return 2
    try:
        return COMMANDS[argv[1]](argv[2:]) or 0
    except RuntimeFailure as exc:
        sys.stderr.write("%s: %s\n" % (PROG if argv[1] == "wrapper" else "multinode-runtime", exc))
        return 255 if argv[1] == "wrapper" else 1
