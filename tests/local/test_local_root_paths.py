"""Local mode against hostile jobs (tests/fuzzfiles/local/root-paths.yml,
issue 12): root never acts on a path the job controls. Each job is the
attacker: links and FIFOs in the job user's parts of its directory, a cwd
link re-pointed at a directory only root can reach, escape sequences for
the operator's terminal, a flood of idle connections to its launch socket;
and, all through the run, another user's process holding a lock on
/etc/hosts. One run of the workflow; each test looks at one attack."""

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import local_jobs as lj

JOBS = ["rp-links", "rp-cwd", "rp-output", "rp-socket", "rp-fifo"]
ROOT_RECORD = {"rank": 1, "name": "rp-links-1", "node": "localhost", "status": 3,
               "message": "ROOT-ONLY-RECORD"}

# As another user (nobody: any user can open /etc/hosts, the job user
# too): lock /etc/hosts and hold it until killed; says "locked" once held.
HOLD_HOSTS = r"""
import fcntl, sys, time
handle = open("/etc/hosts")
fcntl.flock(handle, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def attacked(workdir):
    user = pwd.getpwnam(lj.JOB_USER)
    mine = Path(tempfile.mkdtemp(prefix="fmn-local-rp-", dir="/var/tmp"))  # the job user's
    roots = Path(tempfile.mkdtemp(prefix="fmn-local-rp-root-", dir="/var/tmp"))  # root's only
    holder = None
    try:
        (mine / "ok").mkdir()
        for path in (mine, mine / "ok"):
            os.chown(path, user.pw_uid, user.pw_gid)
            path.chmod(0o755)
        os.symlink(mine / "ok", mine / "cwd-link")
        os.lchown(mine / "cwd-link", user.pw_uid, user.pw_gid)
        roots.chmod(0o700)
        (roots / "victim").mkdir(mode=0o755)
        (roots / "victim" / "keep").write_text("root's file\n")
        (roots / "record.json").write_text(json.dumps(ROOT_RECORD))
        (roots / "closed" / "inner").mkdir(parents=True, mode=0o755)
        (roots / "closed" / "inner" / "secret.txt").write_text("ROOT-ONLY-CWD\n")
        root = workdir / "root-paths"
        root.mkdir()
        fuzzfile = lj.combine(root / "root-paths.yml", [(lj.LOCAL_FUZZFILES / "root-paths.yml", None)],
                              replace={"/fmn-local/rp-root": str(roots), "/fmn-local/rp": str(mine)})
        holder = subprocess.Popen(["/usr/bin/python3", "-I", "-c", HOLD_HOSTS], user="nobody",
                                  group="nogroup", extra_groups=[], cwd="/", stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
        assert holder.stdout.readline().strip() == "locked"
        run = lj.run_job(fuzzfile, root / "logs", timeout=300)
        seen = {"run": run, "mine": mine, "roots": roots,
                "holder_alive": holder.poll() is None,
                "victim": sorted(os.listdir(roots / "victim")),
                "node_logs": {}}
        directory = Path(lj.registry.LOG_DIR) / "rp-output"
        for path in [Path(lj.registry.LOG_DIR), Path(lj.registry.JOBS_DIR), directory,
                     directory / lj.registry.JOB_LOG_NAME]:
            seen["node_logs"][str(path)] = os.stat(path) if path.exists() else None
        seen["nobody_reads"] = subprocess.run(
            ["/usr/bin/python3", "-I", "-c", "import sys; print(open(sys.argv[1]).read())",
             str(directory / lj.registry.JOB_LOG_NAME)],
            user="nobody", group="nogroup", extra_groups=[], cwd="/", capture_output=True, text=True,
            check=False).stderr
        yield seen
    finally:
        if holder is not None:
            os.killpg(holder.pid, 9)
            holder.wait()
        lj.unregister(JOBS)
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(roots, ignore_errors=True)


def everything_shown(seen):
    """The playbook's output and every log it brought home."""
    run = seen["run"]
    texts = [run.output]
    for path in run.logs.rglob("*"):
        if path.is_file():
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def test_the_attacks_leave_nothing_behind_and_the_workflow_ends(attacked):
    """Every job unregistered (a job directory left behind, as a crashed
    cleanup left it, fails every later run of that job name at prepare);
    the playbook ended by itself, not by the tier's Ctrl-C."""
    run = attacked["run"]
    assert run.state == lj.cleaned(run.state, run.jobs), run
    assert "rp-links" not in run.failed_jobs() and "rp-output" not in run.failed_jobs(), run
    assert run.seconds < 280, run


def test_cleanup_removes_links_in_the_job_directory_never_what_they_point_to(attacked):
    assert attacked["victim"] == ["keep"]
    assert attacked["run"].lines("rp-links") == ["rp-links: links made"], attacked["run"]


def test_root_never_reads_a_record_through_the_jobs_link(attacked):
    """events/0-leak.json and calls/0-leak.json link to a root-only record:
    the supervisor neither fails the job with it nor shows its message."""
    assert "ROOT-ONLY-RECORD" not in everything_shown(attacked)


def test_a_fifo_where_root_reads_records_neither_stalls_the_supervisor_nor_its_timeout(attacked):
    failed = attacked["run"].failed_jobs()
    assert "timed out" in failed.get("rp-fifo", ""), attacked["run"]


def test_a_rank_never_starts_in_a_directory_only_root_reaches(attacked):
    """The job re-points its cwd link at a directory whose parent is
    root's (0700): the wrapper call is refused, naming cwd and the user,
    and never reads the file there."""
    shown = everything_shown(attacked)
    assert "ROOT-ONLY-CWD" not in shown
    assert "rank 1 in " not in shown
    assert ("jobs.rp-cwd.cwd: %s/cwd-link: Permission denied for user fuzz on node localhost (rank 1, rp-cwd-1)"
            % attacked["mine"]) in attacked["run"].failed_jobs().get("rp-cwd", ""), attacked["run"]


def test_escape_sequences_reach_the_terminal_written_out_and_the_log_as_bytes(attacked):
    run = attacked["run"]
    assert "[rp-output] \\x1b]0;fmn-owned\\x07\\x1b[2Jrp-output: after escapes" in run.output, run
    assert "\x1b" not in run.output and "\x07" not in run.output
    assert (run.logs / "rp-output.log").read_bytes() == (
        b"\x1b]0;fmn-owned\x07\x1b[2Jrp-output: after escapes\nrp-output: PRINTED-VALUE\n")


def test_logs_are_readable_by_root_and_the_jobs_user_only(attacked):
    fuzz = pwd.getpwnam(lj.JOB_USER)
    info = {Path(path).name: (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) if st else None
            for path, st in attacked["node_logs"].items()}
    assert info == {"fuzz-multinode": (0o711, 0, 0), "jobs": (0o755, 0, 0),
                    "rp-output": (0o2750, 0, fuzz.pw_gid), "job.log": (0o640, 0, fuzz.pw_gid)}
    assert "Permission denied" in attacked["nobody_reads"]
    run = attacked["run"]
    home = [run.logs] + list(run.logs.rglob("*"))
    assert run.logs / "rp-output.log" in home
    assert {str(path): stat.S_IMODE(path.stat().st_mode) for path in home} == {
        str(path): 0o600 if path.is_file() else 0o700 for path in home}


def test_idle_connections_to_the_launch_socket_are_held_to_a_bound(attacked):
    """200 connections that say nothing: root serves a bounded number at
    once (32 + 4 per rank), the others wait."""
    [line] = [line for line in attacked["run"].lines("rp-socket") if line.startswith("rp-socket:")]
    words = dict(word.split("=") for word in line.split()[1:])
    # The supervisor, its agent and its launch socket's server are root's too.
    assert int(words["root-processes"]) <= 32 + 4 * 2 + 3, line


def test_a_job_user_holding_a_lock_on_etc_hosts_stalls_nothing(attacked):
    """Another user held /etc/hosts locked through the whole run: every
    prepare and cleanup rewrote it all the same."""
    assert attacked["holder_alive"]
    assert lj.hosts_blocks() == {} or not set(lj.hosts_blocks()) & set(JOBS)
