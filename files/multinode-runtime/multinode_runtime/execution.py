"""Where a rank's command runs: inside the job's container on its node
(containers.py), or on the bare host. The launcher (a wrapper call, a
task) and the head supervisor (rank 0) start every command through here,
after everything else about the process is set (its UTS namespace, CPUs,
cgroups, environment)."""

from .containers import job_container
from .inputs import entered_cwd
from .processes import spawn_as


def rank_container(spec, rank):
    """The container the rank's commands run in, or None (bare host)."""
    container = job_container(spec.job)
    if container is not None:
        container.check_alive(rank.node)
    return container


def spawn_rank(spec, rank, user, argv, env, container, stdin, stdout, stderr):
    """Start argv for `rank` as the job user, in the job's cwd: entered
    into `container` by root (nsenter drops to the job user, who enters
    the cwd inside the image), or on the host in the cwd the job user
    opened (inputs.entered_cwd)."""
    if container is None:
        with entered_cwd(spec, rank, user) as cwd:
            return spawn_as(user, argv, env, cwd, stdin, stdout, stderr)
    return spawn_as(None, container.enter_argv(user, spec.cwd, argv), env, "/", stdin, stdout, stderr)
