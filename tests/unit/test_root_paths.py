"""Root and the job's paths (issue 12, docs/docsite/rst/guide_security.rst): removing a job's
directory never follows the job's links, records in its job-writable
directories are read only when they are what they claim to be, the
/etc/hosts lock is root's own file, the launch socket's bound, the cwd a
rank starts in is the one the job user reaches."""

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
import types
from pathlib import Path

import pytest
from multinode_runtime import calls, local_socket, registry, supervisor
from multinode_runtime.errors import RuntimeFailure


def outside(tmp_path):
    """A directory of files that a removal inside another must not touch."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "keep").write_text("keep")
    (victim / "sub" / "keep").write_text("keep")
    return victim


def test_remove_tree_removes_links_never_what_they_point_to(tmp_path):
    victim = outside(tmp_path)
    job = tmp_path / "job"
    (job / "events").mkdir(parents=True)
    (job / "calls" / "sub").mkdir(parents=True)
    os.symlink(victim, job / "events" / "d")  # a link where a directory could be
    os.symlink(victim / "keep", job / "calls" / "sub" / "keep.json")
    os.symlink(victim / "sub", job / "calls" / "sub" / "dir")
    os.mkfifo(job / "events" / "fifo.json")
    registry.remove_tree(str(job))
    assert not job.exists()
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == ["keep", "sub", "sub/keep"]


def test_remove_tree_of_a_very_deep_tree_takes_no_deep_recursion(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    fd = os.open(job, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _unused in range(3000):  # deeper than Python's recursion limit, and than PATH_MAX
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        registry.remove_tree(str(job))
        assert not job.exists()
    finally:
        # Never left for pytest's own rmtree of old temporary directories
        # (recursive: it would fail every later pytest session of the user).
        subprocess.run(["rm", "-rf", "--", str(job)], check=True)


def test_remove_tree_when_a_directory_is_swapped_for_a_link_while_it_is_removed(tmp_path, monkeypatch):
    """The job swaps a directory it owns for a link to elsewhere between
    root's listing of its parent and root's removal of what is in it."""
    victim = outside(tmp_path)
    job = tmp_path / "job"
    (job / "calls" / "d").mkdir(parents=True)
    (job / "calls" / "d" / "keep").write_text("the job's")
    listdir = os.listdir
    swapped = []

    def listdir_then_swap(target):
        names = listdir(target)
        if "d" in names and not swapped:
            swapped.append(True)
            os.rename(job / "calls" / "d", tmp_path / "moved")
            os.symlink(victim, job / "calls" / "d")
        return names

    monkeypatch.setattr(os, "listdir", listdir_then_swap)
    registry.remove_tree(str(job))
    assert swapped and not job.exists()
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == ["keep", "sub", "sub/keep"]


def test_remove_tree_of_nothing_is_nothing(tmp_path):
    registry.remove_tree(str(tmp_path / "none"))
    registry.remove_tree(str(tmp_path / "none" / "deeper"))


def record_dir(tmp_path):
    directory = tmp_path / "events"
    directory.mkdir()
    return directory


FAILURE = {"rank": 1, "name": "j-1", "node": "n2", "status": 3, "message": "rank 1 failed"}


def test_a_record_is_read_only_when_it_is_a_regular_single_link_file_of_bounded_size(tmp_path):
    directory = record_dir(tmp_path)
    (directory / "ok.json").write_text(json.dumps(FAILURE))
    (tmp_path / "root-only.json").write_text(json.dumps(dict(FAILURE, message="ROOT-ONLY")))
    os.symlink(tmp_path / "root-only.json", directory / "link.json")
    os.link(tmp_path / "root-only.json", directory / "hard.json")
    os.mkfifo(directory / "fifo.json")
    (directory / "big.json").write_text(json.dumps(dict(FAILURE, message="x" * registry.RECORD_LIMIT)))
    (directory / "dir.json").mkdir()
    (directory / "bad.json").write_text("{not json")
    found = {name: registry.read_job_record(str(directory), name) for name in registry.list_job_records(str(directory))}
    assert found == {"bad.json": None, "big.json": None, "dir.json": None, "fifo.json": None,
                     "hard.json": None, "link.json": None, "ok.json": FAILURE}


def test_a_record_of_another_user_is_not_read(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to make another user's file")
    directory = record_dir(tmp_path)
    nobody = pwd.getpwnam("nobody")
    (directory / "theirs.json").write_text(json.dumps(FAILURE))
    os.chown(directory / "theirs.json", nobody.pw_uid, nobody.pw_gid)
    assert registry.read_job_record(str(directory), "theirs.json") is None


def test_the_supervisor_passes_over_what_is_no_failure_report_and_never_blocks_on_a_fifo(tmp_path):
    directory = record_dir(tmp_path)
    os.mkfifo(directory / "0-fifo.json")
    (tmp_path / "root.json").write_text(json.dumps(dict(FAILURE, message="ROOT-ONLY")))
    os.symlink(tmp_path / "root.json", directory / "1-link.json")
    (directory / "2-shape.json").write_text(json.dumps({"rank": "1", "message": 3}))
    (directory / "3-list.json").write_text("[]")
    found = []
    reader = threading.Thread(target=lambda: found.append(supervisor.first_failure(str(directory))), daemon=True)
    reader.start()
    reader.join(5)
    assert found == [None]
    (directory / "4-real.json").write_text(json.dumps(FAILURE))
    assert supervisor.first_failure(str(directory)) == FAILURE


def test_call_records_skip_links_fifos_and_malformed_records(runtime_state):
    directory = runtime_state / "run" / "jobs" / "j" / "calls"
    directory.mkdir(parents=True)
    calls.record_call("j", {"rank": 1, "start": 5.0}, caller=7)
    os.mkfifo(directory / "0-fifo.json")
    (runtime_state / "root.json").write_text(json.dumps({"rank": 1, "start": 1.0, "lost": "ROOT-ONLY"}))
    os.symlink(runtime_state / "root.json", directory / "1-link.json")
    (directory / "2-bad.json").write_text(json.dumps({"rank": 1, "start": "soon"}))
    (directory / "3-bad.json").write_text(json.dumps({"rank": 1, "start": 1.0, "end": None}))
    assert calls.read_call_records("j") == [{"rank": 1, "start": 5.0}]


def test_the_hosts_block_is_rewritten_under_roots_own_lock_file(runtime_state, monkeypatch):
    """Another user holding a lock on /etc/hosts stalls nothing."""
    import fcntl
    with open(registry.HOSTS_FILE) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = []
        writer = threading.Thread(target=lambda: done.append(registry.write_hosts_block("j", [("127.0.0.2", "j-0")])),
                                  daemon=True)
        writer.start()
        writer.join(5)
        assert done == [None]
    assert "127.0.0.2 j-0" in open(registry.HOSTS_FILE).read()
    assert stat.S_IMODE(os.stat(registry.HOSTS_LOCK).st_mode) == 0o600


def test_the_launch_socket_serves_a_bounded_number_of_connections():
    spec = types.SimpleNamespace(ranks=[object()] * 3)
    assert local_socket.connection_limit(spec) == 32 + 4 * 3


@pytest.fixture
def open_dir():
    """A directory every user may enter (pytest's own are root's only)."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_cwd_only_root_reaches_is_refused_for_the_job_user(open_dir, runtime_state):
    """The cwd is entered by the job user inside the run's sandbox (nsenter
    drops root first): a directory whose parent only root may enter fails
    the start, naming the cwd, the user, node and rank, and nothing runs."""
    from multinode_runtime.execution import spawn_rank
    from multinode_runtime.sandbox import place_job, remove_sandbox
    from multinode_runtime.spec import JobSpec
    closed = open_dir / "closed"
    (closed / "inner").mkdir(parents=True)
    closed.chmod(0o700)
    nobody = pwd.getpwnam("nobody")
    spec = JobSpec.from_dict({"job": "j", "run": "r1", "execution": "host", "user": "nobody",
                              "cwd": str(closed / "inner"),
                              "ranks": [{"rank": 0, "name": "j-0", "node": "n1"},
                                        {"rank": 1, "name": "j-1", "node": "n1"}]})
    os.makedirs(registry.job_dir("j"))
    sandbox = place_job(spec, "n1")
    try:
        out_r, out_w = os.pipe()
        with pytest.raises(RuntimeFailure) as info:
            spawn_rank(spec, spec.ranks[1], nobody, ["pwd"], {}, sandbox, out_w, out_w)
        os.close(out_w)
        assert os.read(out_r, 100) == b""  # nothing ran
        assert str(info.value) == ("jobs.j.cwd: %s: Permission denied for user nobody on node n1 (rank 1, j-1)"
                                   % spec.cwd)
        closed.chmod(0o755)
        out_r, out_w = os.pipe()
        child = spawn_rank(spec, spec.ranks[1], nobody, ["pwd"], {}, sandbox, out_w, out_w)
        os.close(out_w)
        assert child.wait(timeout=10) == 0
        assert os.read(out_r, 100) == b"%s\n" % bytes(closed / "inner")
    finally:
        remove_sandbox("j")
