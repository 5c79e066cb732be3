"""Unit tests of cgroups.py on cgroup trees made of plain directories: where
a rank's processes are placed (v1 and v2), what teardown reads, kills and
removes, and what a node without a usable cgroup says."""

import os
import signal
import subprocess

import pytest
from multinode_runtime import cgroups, registry
from multinode_runtime.spec import JobSpec

OWN = "/docker/abc"
SELF_CGROUP = "6:freezer:%s\n4:memory:%s\n0::%s\n" % (OWN, OWN, OWN)


def test_own_cgroup_reads_the_controller_line():
    text = ("12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/x\n"
            "0::/docker/abc\n")
    assert cgroups.own_cgroup(text, "memory") == "/docker/abc"
    assert cgroups.own_cgroup(text, "cpuacct") == "/x"
    assert cgroups.own_cgroup("0::/\n", "memory") == "/"  # cgroup v2 only


@pytest.fixture
def tree(tmp_path, monkeypatch, runtime_state):
    """A cgroup root of plain directories, this process's cgroup OWN in it,
    and a registered job "j" (its directory)."""
    root = tmp_path / "cgroup"
    root.mkdir()
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(cgroups, "PRIVATE_MOUNT", str(tmp_path / "private-%s"))
    monkeypatch.setattr(cgroups, "_read_self_cgroup", lambda: SELF_CGROUP)
    os.makedirs(registry.job_dir("j"))
    return root


def spec(memory=None):
    job = JobSpec.from_dict({"job": "j", "nodes": 2, "resources": {"memory_bytes": memory},
                             "ranks": [{"rank": 0, "name": "j-0", "node": "n1"}]})
    return job, job.rank_numbered(0)


def recorded():
    with open(registry.job_path("j", registry.CGROUPS_FILE)) as handle:
        return handle.read().split()


def test_v1_places_a_rank_in_the_runs_freezer_group_and_its_memory_group(tree):
    for controller in ("freezer", "memory"):
        (tree / controller / OWN.lstrip("/")).mkdir(parents=True)
    job, rank = spec(memory=1 << 20)
    placement = cgroups.place(job, rank)
    freezer = tree / "freezer" / "docker" / "abc" / "fuzz-multinode" / "j"
    memory = tree / "memory" / "docker" / "abc" / "fuzz-multinode" / rank.name
    assert placement.warnings == []
    assert placement.groups() == [str(freezer), str(memory)]
    assert (memory / "memory.limit_in_bytes").read_text() == str(1 << 20)
    assert recorded() == [str(freezer), str(memory)]
    assert placement.join() == []
    assert (freezer / "cgroup.procs").read_text() == str(os.getpid())
    # A second call of the same rank joins the same groups, listed once.
    cgroups.place(job, rank).join()
    assert recorded() == [str(freezer), str(memory)]


def test_v1_spawning_in_moves_only_this_thread_and_back(tree):
    for controller in ("freezer", "memory"):
        (tree / controller / OWN.lstrip("/")).mkdir(parents=True)
    job, rank = spec()
    placement = cgroups.place(job, rank)
    group = tree / "freezer" / "docker" / "abc" / "fuzz-multinode" / "j"
    with placement.spawning_in():
        assert (group / "tasks").read_text() == str(__import__("threading").get_native_id())
    assert (tree / "freezer" / "docker" / "abc" / "tasks").exists()  # back in its own group
    assert not (group / "cgroup.procs").exists()


def test_v2_places_a_rank_in_its_leaf_of_the_runs_group(tree):
    (tree / "cgroup.controllers").write_text("cpu memory pids\n")
    job, rank = spec()
    placement = cgroups.place(job, rank)
    run = tree / "fuzz-multinode" / "j"
    assert placement.warnings == []
    assert placement.groups() == [str(run / rank.name)]
    assert recorded() == [str(run), str(run / rank.name)]


def test_v2_without_the_memory_controller_warns_that_memory_is_not_enforced(tree):
    (tree / "cgroup.controllers").write_text("cpu pids\n")
    job, rank = spec(memory=1 << 20)
    warnings = cgroups.place(job, rank).warnings
    assert warnings == ["jobs.j.resource.memory is not enforced on this node: "
                        "the cgroup v2 memory controller is not available"]


def test_a_node_without_a_cgroup_says_what_teardown_falls_back_to(tree, monkeypatch):
    failed = subprocess.CompletedProcess([], 32, b"", b"mount: permission denied\n")
    monkeypatch.setattr(cgroups.subprocess, "run", lambda *a, **k: failed)
    job, rank = spec()
    placement = cgroups.place(job, rank)
    assert placement.groups() == []
    assert placement.warnings == [
        "no cgroup for run j on this node (no writable cgroup freezer controller "
        "(mount: permission denied)): teardown can only find its processes by host "
        "name and ancestry, and kills them in rounds"]


def test_run_cgroups_are_read_from_the_job_and_removed_deepest_first(tree):
    run = tree / "fuzz-multinode" / "j"
    leaf = run / "j-0"
    leaf.mkdir(parents=True)
    (run / "cgroup.procs").write_text("")
    (leaf / "cgroup.procs").write_text("12\n13\n")
    with open(registry.job_path("j", registry.CGROUPS_FILE), "w") as handle:
        handle.write("%s\n%s\n" % (run, leaf))
    groups = cgroups.run_cgroups("j")
    assert groups.groups == [str(leaf), str(run)]
    assert groups.pids() == {12, 13}
    assert not cgroups.run_cgroups("other")


def test_kill_freezes_the_group_kills_what_is_in_it_then_thaws(tree, monkeypatch):
    """A v1 freezer group with two processes; SIGKILL lands while the group
    is frozen (nothing in it forks meanwhile), the thaw lets them die."""
    group = tree / "freezer" / "j"
    group.mkdir(parents=True)
    (group / "freezer.state").write_text("THAWED")
    (group / "cgroup.procs").write_text("101\n102\n")
    sent = []

    def send_signal(pid, sig):
        sent.append((pid, sig, (group / "freezer.state").read_text()))
        procs = (group / "cgroup.procs").read_text().split()
        (group / "cgroup.procs").write_text("".join(p + "\n" for p in procs if p != str(pid)))
    monkeypatch.setattr(cgroups, "send_signal", send_signal)
    killed = cgroups.RunCgroups([str(group)]).kill()
    assert killed == {101, 102}
    assert sorted(sent) == [(101, signal.SIGKILL, "FROZEN"), (102, signal.SIGKILL, "FROZEN")]
    assert (group / "freezer.state").read_text() == "THAWED"


def test_a_group_a_run_before_left_is_listed_for_this_runs_teardown(tree):
    left = tree / "freezer" / "docker" / "abc" / "fuzz-multinode" / "j"
    left.mkdir(parents=True)
    job, rank = spec()
    cgroups.place(job, rank)
    cgroups.place(job, rank)
    assert recorded() == [str(left)]


def test_v1_a_call_forked_by_a_hold_that_joined_the_runs_group_is_born_in_it(tree, monkeypatch):
    """A worker's hold joins the run's freezer group once; a call it forks
    is in that group already (its /proc/self/cgroup names the group then):
    it places itself there, not in a group nested below it, and moves into
    nothing again but its memory group."""
    for controller in ("freezer", "memory"):
        (tree / controller / OWN.lstrip("/")).mkdir(parents=True)
    monkeypatch.setattr(cgroups, "_joined_run_group", None)
    job, rank = spec(memory=1 << 20)
    cgroups.join_run_group(job)
    freezer = tree / "freezer" / "docker" / "abc" / "fuzz-multinode" / "j"
    assert cgroups._joined_run_group == str(freezer)
    assert (freezer / "cgroup.procs").read_text() == str(os.getpid())
    (freezer / "cgroup.procs").write_text("")
    # What the forked call reads of itself now: the run's group.
    monkeypatch.setattr(cgroups, "_read_self_cgroup", lambda: SELF_CGROUP.replace(
        "freezer:" + OWN, "freezer:" + OWN + "/fuzz-multinode/j"))
    placement = cgroups.place(job, rank)
    memory = tree / "memory" / "docker" / "abc" / "fuzz-multinode" / rank.name
    assert placement.groups() == [str(freezer), str(memory)]
    assert placement.join() == []
    assert (freezer / "cgroup.procs").read_text() == ""  # no second move
    assert (memory / "cgroup.procs").read_text() == str(os.getpid())
    assert recorded() == [str(freezer), str(memory)]
