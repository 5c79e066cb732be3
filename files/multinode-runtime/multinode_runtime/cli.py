"""Command dispatch: the runtime's subcommands.

  prepare --node NODE [--secrets]
                        (root) register a job on this node and pull its
                        image; the job spec (JSON, see docs/design.md) is
                        read from stdin. With --secrets stdin is {"spec":
                        SPEC, "secrets": {...}}: the job's env secret values
                        are kept as `secrets` does, before the pull, and its
                        image.secret's registry credentials go to the pull
  start JOB [--run RUN] [--controller-timeout S] [--wait S] [--log-offset N]
                        (root, head node) start the head supervisor
                        detached (it runs `head`), then answer as status
  status JOB [--run RUN] [--wait S] [--log-offset N]
                        (root, head node) whether the job has ended, its
                        result once it has, and the job log from byte N on
                        (the part the controller has not shown yet); a
                        heartbeat. Waits up to S seconds for the job's end
  cancel JOB [--run RUN] [--run-volumes] REASON
                        (root, head node) ask the supervisor to cancel the
                        job; --run-volumes: the run ends with it, and its
                        teardown removes the run's ephemeral volumes on the
                        worker nodes it unregisters the job on
  head JOB [--controller-timeout SECONDS]
                        (root, head node) run rank 0 and supervise the job;
                        prints the job's result as JSON
  launch                (root, sshd forced command) start one wrapper call
                        for a rank of an active job on this node
  wrapper [OPTS] HOST CMD...
                        (job user) MULTINODE_SSH_WRAPPER: run CMD on the
                        node of rank HOST, ssh's argv contract
  secrets JOB [--run RUN]
                        (root) take the values of the job's secret:// env
                        references (JSON {"scope/name": value} on stdin);
                        the image was pulled already (prepare --secrets
                        gives its image.secret)
  task JOB INDEX        (job user, head node) run task INDEX of a task-array
                        job on its node, the way a wrapper call runs
  connect JOB REQUEST   (job user, local mode) carry a launch request to
                        the head's local launch socket, as ssh would
  remove-volumes RUN VOLUME_ROOT
                        (root) remove the ephemeral volumes of RUN here
                        (the run ended); prints JSON
  volume-sharing VOLUME_ROOT SHARING
                        whether VOLUME_ROOT is storage the nodes share, as
                        SHARING (auto, shared, node-local) decides it here;
                        prints JSON
  transfer              (root; the copy as the job user) one ingress or
                        egress item of a volume; the request (JSON, with the
                        item's credentials) is read from stdin; prints
                        progress lines, then JSON
  volume-read           (root; the read as the job user) a piece of a file
                        in a volume, for the controller (a file:// egress
                        destination); the request (JSON) on stdin
  cleanup JOB [--run RUN] [--everywhere] [--logs] [--job-log] [--run-volumes]
                        (root) kill every process of JOB on this node,
                        remove the files it placed, unregister it; prints
                        JSON. --everywhere (head): on the job's other nodes
                        too, when no play will (the playbook was interrupted).
                        --logs: the answer carries the logs of the job's
                        ranks here (control.node_logs), --job-log also the
                        job log's path. --run-volumes: the ephemeral volumes
                        of the job's run too (the run ends with the job)
  show [JOB]            (root) what this node holds of JOB, as JSON: its
                        run, whether it is registered, its secrets are kept
                        or its host names listed, and its logs; without JOB
                        the jobs registered here (for tests and by hand)

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
    with_secrets = "--secrets" in args
    args = [arg for arg in args if arg != "--secrets"]
    if len(args) != 2 or args[0] != "--node":
        raise RuntimeFailure("usage: prepare --node NODE [--secrets] < spec.json")
    from .prepare import prepare_job
    from .spec import parse_spec
    try:
        data = json.load(sys.stdin)
    except ValueError:
        raise RuntimeFailure("prepare: stdin must be the job spec as JSON") from None
    secrets = None
    if with_secrets:
        if not isinstance(data, dict):
            raise RuntimeFailure('prepare: stdin must be {"spec": SPEC, "secrets": {...}}')
        data, secrets = data.get("spec"), data.get("secrets")
    spec = parse_spec(data)
    print(json.dumps(prepare_job(data, spec, args[1], secrets)))


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
    registry.write_file(registry.job_path(job, registry.RESULT_FILE), json.dumps(result), 0o600)
    print(json.dumps(result))


def cmd_launch(args):
    from .launch import serve_launch
    return serve_launch(os.environ.get("SSH_ORIGINAL_COMMAND", ""), over_ssh=True)


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


def take_options(args, names):
    """(the arguments without `--NAME VALUE` for each of `names`,
    {NAME: VALUE}); flags (`--everywhere`) stay in the arguments."""
    rest, values = [], {}
    args = list(args)
    while args:
        arg = args.pop(0)
        if arg.startswith("--") and arg[2:] in names:
            if not args:
                raise RuntimeFailure("%s needs a value" % arg)
            values[arg[2:]] = args.pop(0)
        else:
            rest.append(arg)
    return rest, values


def number(values, name, default, kind=float):
    try:
        return kind(values.get(name, default))
    except ValueError:
        raise RuntimeFailure("--%s must be a number, got %r" % (name, values[name])) from None


CONTROL_OPTIONS = ("run", "controller-timeout", "wait", "log-offset")


def cmd_start(args):
    args, values = take_options(args, CONTROL_OPTIONS)
    if len(args) != 1:
        raise RuntimeFailure("usage: start JOB [--run RUN] [--controller-timeout S] [--wait S] [--log-offset N]")
    from .control import start
    print(json.dumps(start(args[0], values.get("run"), number(values, "controller-timeout", 0),
                           number(values, "wait", 0), number(values, "log-offset", 0, int))))


def cmd_status(args):
    args, values = take_options(args, CONTROL_OPTIONS)
    if len(args) != 1:
        raise RuntimeFailure("usage: status JOB [--run RUN] [--wait S] [--log-offset N]")
    from .control import status
    print(json.dumps(status(args[0], values.get("run"), number(values, "wait", 0),
                            number(values, "log-offset", 0, int))))


def cmd_cancel(args):
    args, values = take_options(args, ("run",))
    run_volumes = "--run-volumes" in args
    args = [arg for arg in args if arg != "--run-volumes"]
    if len(args) != 2:
        raise RuntimeFailure("usage: cancel JOB [--run RUN] [--run-volumes] REASON")
    from .control import cancel
    print(json.dumps(cancel(args[0], values.get("run"), args[1], run_volumes)))


def cmd_show(args):
    if len(args) > 1:
        raise RuntimeFailure("usage: show [JOB]")
    from .control import show
    print(json.dumps(show(*args)))


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
    flags = set(args[1:])
    if not args or len(flags) != len(args) - 1 or not flags <= {"--everywhere", "--logs", "--job-log",
                                                                "--run-volumes"}:
        raise RuntimeFailure("usage: cleanup JOB [--run RUN] [--everywhere] [--logs] [--job-log] [--run-volumes]")
    from .teardown import cleanup
    print(json.dumps(cleanup(args[0], everywhere="--everywhere" in flags, run=run, logs="--logs" in flags,
                             job_log="--job-log" in flags, run_volumes="--run-volumes" in flags)))


def cmd_remove_volumes(args):
    if len(args) != 2:
        raise RuntimeFailure("usage: remove-volumes RUN VOLUME_ROOT")
    from .volumes import remove_run
    print(json.dumps({"changed": remove_run(root=args[1], run=args[0])}))


def cmd_volume_sharing(args):
    if len(args) != 2:
        raise RuntimeFailure("usage: volume-sharing VOLUME_ROOT SHARING")
    from .volumes import is_shared
    print(json.dumps({"shared": is_shared(args[0], args[1])}))


def read_request(name):
    try:
        return json.load(sys.stdin)
    except ValueError:
        raise RuntimeFailure("%s: stdin must be the request as JSON" % name) from None


def cmd_transfer(args):
    if args:
        raise RuntimeFailure("usage: transfer < request.json")
    from .transfers import transfer

    def say(line):
        print(line, flush=True)

    print(json.dumps(transfer(read_request("transfer"), say)))


def cmd_volume_read(args):
    if args:
        raise RuntimeFailure("usage: volume-read < request.json")
    from .transfers import read_piece
    print(json.dumps(read_piece(read_request("volume-read"))))


COMMANDS = {
    "prepare": cmd_prepare,
    "start": cmd_start,
    "status": cmd_status,
    "cancel": cmd_cancel,
    "head": cmd_head,
    "launch": cmd_launch,
    "wrapper": cmd_wrapper,
    "task": cmd_task,
    "connect": cmd_connect,
    "secrets": cmd_secrets,
    "cleanup": cmd_cleanup,
    "show": cmd_show,
    "remove-volumes": cmd_remove_volumes,
    "volume-sharing": cmd_volume_sharing,
    "transfer": cmd_transfer,
    "volume-read": cmd_volume_read,
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
