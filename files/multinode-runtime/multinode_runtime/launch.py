"""The launch server: a launch request on its target node.

sshd runs `launch` as the cluster key's forced command (in local mode the
head's launch socket serves it instead, local_socket.py). The request comes
as the ssh command; stdin is the lifeline (when it closes, everything the
call started is stopped); stdout carries the frames back to the wrapper.
A request is one of three: a call (rank_call.py runs it), the head
supervisor's `hold` session, or a cleanup (teardown.py). The hold is the
job's channel to this node: the head's agent sends its calls over it, each
run in a forked child of the hold (channel.py, rank_call.serve_call).
"""

import json

from . import registry, run_token
from .cgroups import join_run_group, leave_run_group
from .channel import ForkedCalls, serve_channel
from .claims import touch_claim
from .errors import RuntimeFailure
from .inputs import job_user
from .processes import enter_rank_namespace, release_namespace
from .rank_call import check_request_run, serve_call
from .spec import load_spec
from .teardown import stop_on_request
from .wire import FRAME_ERROR, FRAME_EXIT, FRAME_STDOUT, READY, parse_launch_request, send_frame, widen_pipe
from .worker_agent import WorkerAgent


def serve_launch(original, over_ssh=False):
    """Carry out one launch request (the ssh command, or the first line on
    the local launch socket); stdin is the lifeline, stdout the frames. One
    over ssh must carry its run's token (run_token.py)."""
    out = 1
    try:
        request = parse_launch_request(original)
        spec = load_spec(request["job"])
        node = registry.this_node(spec.job)
        if over_ssh:
            run_token.check(spec, request, node)
        check_request_run(spec, request, node)
        if request.get("hold"):
            return hold(spec, node, out, bool(request.get("agent")))
        if request.get("cleanup"):
            answer = stop_on_request(spec, node, bool(request.get("unregister")),
                                     hand_over=bool(request.get("hand_over")),
                                     run_volumes=request.get("run_volumes") is True)
            send_frame(out, FRAME_STDOUT, json.dumps(answer).encode())
            send_frame(out, FRAME_EXIT, b"0")
            return 0
    except RuntimeFailure as exc:
        send_frame(out, FRAME_ERROR, str(exc).encode())
        send_frame(out, FRAME_EXIT, b"255")
        return 0
    return serve_call(spec, node, request, out)


def hold(spec, node, out, with_agent=False):
    """The head supervisor's lifeline to this node: a process of the job for
    as long as the supervisor's connection is open, so the run's claim here
    stays live while the job runs (claims.py), also when no wrapper call is
    running on this node. Answers READY once in place, then carries the
    job's wrapper calls to this node (channel.py) until the connection
    closes, or the head asks it for the job's teardown (teardown_here). The head's hold (`with_agent`)
    on another node also runs that node's agent (worker_agent.py): the
    job's processes there make their wrapper calls through it, as there is
    no key in their sandbox (and no runtime in an image)."""
    namespace = enter_rank_namespace(spec.job, spec.job)
    join_run_group(spec)  # the calls it forks are born in the run's cgroup
    user = job_user(spec)  # once for every call
    widen_pipe(out)  # forwarded output of the calls moves in large chunks
    agent = None
    if with_agent and node != spec.head.node:  # the head's agent is the supervisor's (a task array's hold there)
        agent = WorkerAgent(spec, user, node)
        agent.start()
    try:
        send_frame(out, FRAME_STDOUT, READY)
        calls = ForkedCalls(lambda request: serve_call(spec, node, request, 1, user))
        serve_channel(calls, 0, out, lambda request: teardown_here(spec, node, request))
    finally:
        if agent is not None:
            agent.stop()
        touch_claim(spec.job)  # the run's play cleans up next: keep its claim
        release_namespace(spec.job, namespace)
    send_frame(out, FRAME_EXIT, b"0")
    return 0


def teardown_here(spec, node, request):
    """The job's teardown on this node asked over the hold (channel.py's
    TEARDOWN), as a cleanup request over a connection of its own would ask
    it; returns the answer's frames."""
    # The teardown empties the run's cgroup: this process may not be in it.
    if not leave_run_group():
        return [(FRAME_ERROR, b"the hold could not leave the run's cgroup"), (FRAME_EXIT, b"255")]
    try:
        answer = stop_on_request(spec, node, bool(request.get("unregister")),
                                 hand_over=bool(request.get("hand_over")),
                                 run_volumes=request.get("run_volumes") is True)
    except RuntimeFailure as exc:
        return [(FRAME_ERROR, str(exc).encode()), (FRAME_EXIT, b"255")]
    return [(FRAME_STDOUT, json.dumps(answer).encode()), (FRAME_EXIT, b"0")]
