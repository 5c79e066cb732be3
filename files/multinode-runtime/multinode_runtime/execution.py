"""Where a rank's command runs: inside the run's sandbox on its node
(sandbox.py: the job's container, or the bare host's namespaces). The
launcher (a wrapper call, a task) and the head supervisor (rank 0) start
every command through here, after everything else about the process is set
(its UTS namespace, CPUs, cgroups, environment)."""

import os
import re
import stat

from .errors import RuntimeFailure
from .inputs import program_shown
from .processes import run_as, spawn_as
from .sandbox import job_sandbox

SHEBANG_BYTES = 256  # what the kernel reads of a file it execs (BINPRM_BUF_SIZE)


def rank_sandbox(spec, rank):
    """The sandbox the rank's commands run in (alive)."""
    sandbox = job_sandbox(spec.job)
    if sandbox is None:
        raise RuntimeFailure("job %s has no sandbox on node %s: it was not registered there, or its "
                             "registration failed" % (spec.job, rank.node))
    sandbox.check_alive(rank.node)
    return sandbox


def spawn_rank(spec, rank, user, argv, env, sandbox, stdout, stderr):
    """Start argv for `rank` as the job user, its stdin /dev/null, entered
    into `sandbox` by root (nsenter drops to the job user, who enters the
    job's cwd there). A cwd the job user cannot enter fails the start,
    saying why."""
    report_r, report_w = os.pipe()
    try:
        child = spawn_as(None, sandbox.enter_argv(user, spec.cwd, argv), env, "/", report_w, stdout, stderr)
    finally:
        os.close(report_w)
    with os.fdopen(report_r, "rb") as report:
        reported = report.readline()  # "ok": it runs (nothing: nsenter failed, and says so)
    if reported == b"cwd\n":
        child.wait()
        raise RuntimeFailure(_cwd_failure(spec, rank, user, sandbox))
    if reported.startswith(b"exec "):
        child.wait()
        raise RuntimeFailure(_exec_failure(rank, program_shown(spec, rank, argv), reported == b"exec denied\n"))
    return child


def command_shown(argv, sandbox, cwd):
    """The command lines that the command argv shows once the shell
    entering `sandbox` has exec'd it (in `cwd` there), as does a fork of it
    until that fork execs: argv itself or, for a `#!` script, the kernel's
    rewrite of it (its interpreter, the interpreter's argument if any, the
    script's path, argv[1:]) and, for `#!/usr/bin/env NAME`, the line of
    NAME that env execs. An argv[0] with no "/" in the job's image is
    looked up there: taken as it is."""
    lines = [[os.fsencode(arg) for arg in argv]]
    if "/" not in argv[0]:
        return lines
    first = _first_line(sandbox, os.path.join(cwd, argv[0]))
    if not first.startswith(b"#!"):
        return lines
    words = re.split(rb"[ \t]+", first[2:].split(b"\n")[0].strip(b" \t"), maxsplit=1)
    if not words[0]:
        return lines
    lines.append(words + lines[0])  # the path as exec'd is argv[0]
    if len(words) == 2 and os.path.basename(words[0]) == b"env" and not re.search(rb"^-|[ \t]", words[1]):
        lines.append(words[1:] + lines[0])
    return lines


def _first_line(sandbox, path):
    """What the kernel reads of the file at path in the sandbox to tell a
    `#!` script (b"" when it is not a regular file there)."""
    try:
        fd = os.open("/proc/%d/root%s" % (sandbox.pid, path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, SHEBANG_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _exec_failure(rank, program, denied):
    """The command is not there to run (said as where it would be looked up
    on the bare host too)."""
    if "/" in program:
        return "cannot run %r: %s" % (program, "Permission denied" if denied else "No such file or directory")
    who = "task %s" % rank.name if rank.is_task else "rank %d (%s)" % (rank.rank, rank.name)
    return "%s: command not found: %s" % (who, program)


def _cwd_failure(spec, rank, user, sandbox):
    """Why the job user cannot enter the job's cwd in the sandbox (asked
    again as the job user, there: only after a start failed)."""
    def enter(emit):
        try:
            os.chdir(spec.cwd)
        except FileNotFoundError:
            emit({"why": "no such directory"})
        except OSError as exc:
            emit({"why": "%s for user %s" % (exc.strerror, user.pw_name)})
    records, failed = run_as(user, enter, enter=sandbox.enter_here)
    why = next((record["why"] for record in records if "why" in record), failed or "cannot be entered")
    where = " in image %s" % sandbox.image if sandbox.image else ""
    return "jobs.%s.cwd: %s: %s on node %s%s (rank %d, %s)" % (
        spec.job, spec.cwd, why, rank.node, where, rank.rank, rank.name)
