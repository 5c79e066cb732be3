"""Teardown: stopping a job's processes on a node and removing everything
it placed there (its registration, files, cgroups, secrets, host names).

The head's supervisor stops the job where it runs when rank 0 ends and asks
every worker node to do the same: a cleanup request over the job's hold
there (the job's connections outlive the kill on the head for that), or
over a fresh connection where the hold is gone. A worker whose rank logs fit in its answer hands them over
and unregisters the job there and then; the head keeps those logs for the
play's `cleanup JOB --logs` there, which brings them home with its own, so
the play cleans up only the head and the workers that did not (their logs
too large, or no answer). An interrupted playbook, which no play cleans up
after, runs `cleanup JOB --everywhere` on the head instead, with
`--run-volumes` when the run ends with the job (one job at a time in the
play): the run's ephemeral volumes go too, which the play would have
removed after its last job.
"""

import json
import secrets
import select
import subprocess
import sys
import time

from . import registry
from .calls import read_call_records
from .cgroups import run_cgroups
from .channel import TeardownAnswer
from .claims import claims_locked, held_run, holds, touch_claim
from .errors import RuntimeFailure
from .inputs import forget_secrets, job_user, rank_environment, remove_job_files
from .processes import kill_job_processes, recorded_namespaces, release_namespace, spawn_as
from .sandbox import remove_sandbox
from .spec import KILL_GRACE, load_spec
from .transport import transport_for
from .volumes import remove_run
from .wire import FRAME_STDOUT, FrameReader, read_chunk

# Seconds, beyond the job's kill grace, a node has to answer a cleanup request.
CLEANUP_ANSWER_WITHIN = 20


def cleanup_job(job, grace, user):
    """Stop every process of the job on this node and unregister it;
    returns how many processes were signalled."""
    namespaces, cgroups = recorded_namespaces(job), run_cgroups(job)
    killed = kill_job_processes(namespaces, grace, user, cgroups)
    for ns in namespaces:
        release_namespace(job, ns)
    cgroups.remove()
    remove_job_files(job, user)
    try:
        remove_sandbox(job)
    except RuntimeFailure as exc:  # the rest of the cleanup still has to happen
        sys.stderr.write("multinode-runtime: %s\n" % exc)
    registry.write_hosts_block(job, [])
    registry.remove_job_dir(job)
    return killed


def cleanup(job, everywhere, run=None, logs=False, job_log=False, run_volumes=False):
    """`cleanup JOB [--run RUN] [--everywhere] [--logs] [--job-log]
    [--run-volumes]`: the job's teardown on this node (and with
    `everywhere`, first on the job's other nodes; with `run_volumes` the
    ephemeral volumes of its run too, which its spec places); the JSON
    result, with `logs` the logs of its ranks here (control.node_logs).
    With a run, a job another run holds here is left alone."""
    with claims_locked():
        if not holds(job, run):
            return {"changed": False, "job": job, "killed": 0, "held_by": held_run(job)}
        grace, user, spec, node = KILL_GRACE, None, None, None
        try:
            spec = load_spec(job)
            grace, user, node = spec.kill_grace, job_user(spec), registry.this_node(job)
        except (RuntimeFailure, OSError):
            pass  # not registered here (any more): only the hosts block to clear
        if spec is not None and everywhere:  # (local mode: no other node)
            clean_nodes(spec, user, spec.nodes_except(node), unregister=True, run_volumes=run_volumes)
        handed = read_handed_logs(job) if logs else []
        killed = cleanup_job(job, grace, user)
        if spec is not None and run_volumes:
            remove_run_volumes(spec)
    answer = {"changed": killed > 0, "job": job, "killed": killed}
    if logs and spec is not None:
        from .control import node_logs
        answer.update(node_logs(job, spec, node, job_log))
        answer["logs"] += handed
    return answer


def stop_on_request(spec, node, unregister, hand_over=False, run_volumes=False):
    """A cleanup request from the head on a worker: stop what is left of the
    job here; returns the node's call records, for the job's summary. With
    `hand_over` (the job's teardown), {"records", "logs"}: when the logs of
    the job's ranks here all fit in the answer (control.node_logs), they
    are in it and the job is unregistered here (the play need not come);
    else "logs" is None and the play's cleanup brings them. With
    `run_volumes` (and `unregister`) the run's ephemeral volumes go too."""
    user = job_user(spec)
    kill_job_processes(recorded_namespaces(spec.job), spec.kill_grace, user, run_cgroups(spec.job))
    forget_secrets(spec.job)
    records = read_call_records(spec.job)
    touch_claim(spec.job)  # the job is over; its play cleans up next
    logs = None
    if hand_over:
        from .control import node_logs
        entries = node_logs(spec.job, spec, node, False)["logs"]
        if all("data" in entry for entry in entries):
            logs, unregister = entries, True
    if unregister:
        # Nothing is left to kill: the rest of the registration.
        with claims_locked():
            cleanup_job(spec.job, spec.kill_grace, user)
        if run_volumes:
            remove_run_volumes(spec)
    return {"records": records, "logs": logs} if hand_over else records


def remove_run_volumes(spec):
    """The ephemeral volumes of the job's run on this node, where its spec
    (not a request) places them; a failure is said, the teardown goes on."""
    if not spec.run:
        return
    try:
        remove_run(spec.volume_root, spec.run)
    except (RuntimeFailure, OSError) as exc:
        sys.stderr.write("multinode-runtime: the ephemeral volumes of run %s: %s\n" % (spec.run, exc))


def clean_nodes(spec, user, nodes, unregister, hand_over=False, run_volumes=False, transports=None):
    """Send the cleanup request to `nodes` ({node: a rank on it}) in
    parallel: over the job's holds where `transports` ({node: its open
    transport}, the head's agent stopped) has them, else (or where a hold
    is gone) over fresh ssh connections as the job user. Each node stops
    what is left of the job there, and with `unregister` also removes the
    job's registration (cleanup_job). Returns the call records the nodes
    answer with, and with `hand_over` {node: its rank logs} of the nodes
    that handed their logs over and unregistered the job (stop_on_request)."""
    request = {"job": spec.job, "run": spec.run, "cleanup": True, "unregister": unregister}
    if hand_over:
        request["hand_over"] = True
    if run_volumes:
        request["run_volumes"] = True
    deadline = time.monotonic() + spec.kill_grace + CLEANUP_ANSWER_WITHIN
    answers, gone = ask_over_holds({node: transports[node] for node in nodes if node in (transports or {})},
                                   request, deadline)
    fresh = {node: rank for node, rank in nodes.items() if node not in (transports or {}) or node in gone}
    answers.update(ask_afresh(spec, user, fresh, request, deadline))
    records, handed = [], {}
    for node, said in answers.items():
        if isinstance(said, dict):
            records += said.get("records") or []
            if said.get("logs") is not None:
                handed[node] = said["logs"]
        else:
            records += said
    return (records, handed) if hand_over else records


def ask_over_holds(transports, request, deadline):
    """The cleanup request over each node's hold (channel.py's TEARDOWN),
    in parallel, until `deadline`; returns ({node: what it answered}, the
    nodes whose hold is gone or failed: to ask afresh). A node that answers
    nothing in time is neither: a fresh connection would time out too."""
    nonce = secrets.token_hex(16)
    asked, gone, answers = {}, set(), {}
    for node, transport in transports.items():
        fd = transport.send_teardown(dict(request, nonce=nonce))
        if fd is None:
            gone.add(node)
        else:
            asked[fd] = (node, TeardownAnswer(nonce.encode()))
    while asked:
        left = deadline - time.monotonic()
        ready = select.select(list(asked), [], [], left)[0] if left > 0 else []
        if not ready:
            break
        for fd in ready:
            node, answer = asked[fd]
            data = read_chunk(fd)
            if data and not answer.feed(data):
                continue
            del asked[fd]
            said = answer_in(answer.frames)
            if said is None:
                gone.add(node)
            else:
                answers[node] = said
    return answers, gone


def ask_afresh(spec, user, nodes, request, deadline):
    """The cleanup request over a fresh ssh connection to each node, in
    parallel, until `deadline`; returns {node: what it answered}."""
    calls = {node: spawn_as(user, transport_for(spec, rank).command(request, fresh=True),
                            rank_environment(spec, spec.head, user), "/",
                            subprocess.DEVNULL, subprocess.PIPE, subprocess.DEVNULL)
             for node, rank in nodes.items()}
    answers = {}
    for node, call in calls.items():
        try:
            answer, _unused = call.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            call.kill()
            call.communicate()
            continue
        said = answer_in(FrameReader().feed(answer))
        if said is not None:
            answers[node] = said
    return answers


def answer_in(frames):
    """What a node answered to a cleanup request, in its frames (the JSON
    of its first output frame), or None."""
    for kind, payload in frames:
        if kind == FRAME_STDOUT:
            try:
                return json.loads(payload)
            except ValueError:
                continue
    return None


def keep_handed_logs(job, handed):
    """On the head: the logs the workers handed over ({node: entries}), for
    the play's cleanup (read_handed_logs). Root's only: logs may hold
    anything the job printed."""
    entries = [entry for node in sorted(handed) for entry in handed[node]]
    registry.write_file(registry.job_path(job, registry.HANDED_LOGS_FILE), json.dumps(entries), 0o600)


def read_handed_logs(job):
    try:
        with open(registry.job_path(job, registry.HANDED_LOGS_FILE)) as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return []
