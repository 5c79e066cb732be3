"""Unit tests of the node runtime's pure parts: line-intact writing, the
frame protocol between launcher and wrapper, launch requests, the /etc/hosts
block, host lookup. The runtime's process handling is tested on real
container clusters by the Molecule scenarios."""

import base64
import os
import pwd
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multinode_runtime import processes, registry, resources, wire, wrapper
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.spec import JobSpec, Rank


def written(chunks, tmp_path, flags=os.O_APPEND):
    """Feed chunks to a LineWriter on a file; return (file contents after
    each feed, contents after flush)."""
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags)
    writer = wire.LineWriter(fd)
    seen = []
    for chunk in chunks:
        writer.feed(chunk)
        seen.append(path.read_bytes())
    writer.flush()
    os.close(fd)
    return seen, path.read_bytes()


def test_line_writer_writes_only_whole_lines(tmp_path):
    seen, final = written([b"ab", b"c\nde", b"f\n\ng", b"h"], tmp_path)
    assert seen == [b"", b"abc\n", b"abc\ndef\n\n", b"abc\ndef\n\n"]
    assert final == b"abc\ndef\n\ngh\n"  # a log: the unterminated tail as a line of its own


def test_line_writer_passes_an_unterminated_tail_as_it_is_to_a_pipe(tmp_path):
    """Not a log (a pipe, a file opened without O_APPEND): the bytes ssh
    would deliver."""
    seen, final = written([b"ab\ncd"], tmp_path, flags=os.O_TRUNC)
    assert final == b"ab\ncd"
    reader, writer = os.pipe()
    line_writer = wire.LineWriter(writer)
    line_writer.feed(b"ab\ncd")
    line_writer.flush()
    os.close(writer)
    assert os.read(reader, 100) == b"ab\ncd"
    os.close(reader)


def test_line_writer_keeps_a_long_line_whole(tmp_path):
    line = b"x" * (1 << 20)
    seen, final = written([line[:1000], line[1000:], b"\n"], tmp_path)
    assert seen[:2] == [b"", b""]
    assert final == line + b"\n"


@settings(max_examples=100)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_frames_round_trip(chunks):
    stream = b"".join(wire.HEADER.pack(wire.FRAME_STDOUT, len(c)) + c for c in chunks)
    reader = wire.FrameReader()
    got = []
    # Any split of the byte stream decodes to the same frames.
    for i in range(0, len(stream), 7):
        got += [payload for _unused, payload in reader.feed(stream[i:i + 7])]
    assert got == chunks


@pytest.mark.parametrize("request_", [
    {"job": "j", "rank": 1, "command": "echo 'a b' \"$X\"", "forward": True},
    {"job": "j", "cleanup": True},
])
def test_launch_request_round_trip(request_):
    assert wire.parse_launch_request(wire.encode_request(request_)) == request_


@pytest.mark.parametrize("original", [
    "", "sh", "launch", "launch x y", "rm -rf /", "launch !!!",
    "launch " + base64.b64encode(b'{"job": 1, "rank": 1, "command": "x"}').decode(),
    "launch " + base64.b64encode(b'{"job": "j", "rank": "1", "command": "x"}').decode(),
    "launch " + base64.b64encode(b'{"job": "j", "cleanup": 1}').decode(),
])
def test_launch_request_refuses_anything_else(original):
    with pytest.raises(RuntimeFailure):
        wire.parse_launch_request(original)


@pytest.mark.parametrize("job", ["hello\n", "hello\nx", "Hello", "-hello", "hello-", "he/llo", "..", ""])
def test_the_node_refuses_a_job_name_that_is_not_one_to_its_end(job):
    """Job names name root's directories on the node: a trailing newline
    ("$" would match before it) is refused like any other bad name."""
    with pytest.raises(RuntimeFailure, match="invalid job name"):
        registry.job_dir(job)


def test_the_node_takes_a_job_name():
    assert registry.job_dir("hello-2") == os.path.join(registry.JOBS_DIR, "hello-2")


def test_tree_levels_put_every_parent_before_its_children_whatever_their_pids():
    # 9: a rank's script, 4: the shell it started (a trap), 3 and 12 that
    # shell's children (pids wrapped around), 20: another tree's top.
    parents = {9: 1, 4: 9, 3: 4, 12: 4, 20: 7}
    assert processes.tree_levels(set(parents), parents.get) == [[9, 20], [4], [3, 12]]


def test_tree_levels_end_on_a_parent_loop():
    # Pids reused between two reads of /proc can make a loop.
    assert sorted(sum(processes.tree_levels({5, 6}, {5: 6, 6: 5}.get), [])) == [5, 6]


def test_a_shell_below_the_top_runs_its_trap_when_the_job_is_killed(tmp_path):
    """Three levels, as a rank's script that starts a shell with a TERM
    trap, which waits for its sleep: the trap runs, and the shell does not
    go on past its wait."""
    trapped, after = tmp_path / "trapped", tmp_path / "after"
    inner = "trap 'echo trapped >%s; exit 143' TERM; sleep 60 & wait $!; echo after >%s" % (trapped, after)
    top = subprocess.Popen(["/bin/sh", "-c", "/bin/sh -c \"$0\" & wait", inner])
    try:
        deadline = time.monotonic() + 10
        while len(processes.descendants(os.getpid())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(processes.descendants(os.getpid())) >= 3
        processes.kill_job_processes([], 5, pwd.getpwuid(os.getuid()))
    finally:
        top.kill()
        top.wait()
    assert trapped.read_text() == "trapped\n" and not after.exists()


def test_hosts_block_is_replaced_in_place(tmp_path, monkeypatch):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.9 other")
    inode = hosts.stat().st_ino
    monkeypatch.setattr(registry, "HOSTS_FILE", str(hosts))
    registry.write_hosts_block("j", [("10.0.0.1", "j-0"), ("10.0.0.2", "j-1")])
    registry.write_hosts_block("k", [("10.0.0.3", "k-0")])
    registry.write_hosts_block("j", [("10.0.0.5", "j-0")])
    assert hosts.read_text() == (
        "127.0.0.1 localhost\n10.0.0.9 other\n"
        "# BEGIN fuzz.multinode job k\n10.0.0.3 k-0\n# END fuzz.multinode job k\n"
        "# BEGIN fuzz.multinode job j\n10.0.0.5 j-0\n# END fuzz.multinode job j\n")
    registry.write_hosts_block("j", [])
    registry.write_hosts_block("k", [])
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.0.9 other\n"
    assert hosts.stat().st_ino == inode  # bind-mounted files cannot be renamed over


def test_find_rank_by_name_node_or_address():
    spec = {"job": "j", "ranks": [
        {"rank": 0, "name": "j-0", "node": "n1", "address": "10.0.0.1"},
        {"rank": 1, "name": "j-1", "node": "n2", "address": "10.0.0.2"}]}
    assert wrapper.find_rank(JobSpec.from_dict(spec), "j-1").rank == 1
    assert wrapper.find_rank(JobSpec.from_dict(spec), "n2").rank == 1
    assert wrapper.find_rank(JobSpec.from_dict(spec), "10.0.0.1").rank == 0
    with pytest.raises(RuntimeFailure, match="unknown host 'j-7': job j has ranks j-0, j-1"):
        wrapper.find_rank(JobSpec.from_dict(spec), "j-7")


def test_exit_status_follows_the_shell_convention():
    assert processes.exit_status(3 << 8) == 3
    assert processes.exit_status(9) == 128 + 9  # killed by SIGKILL


@pytest.mark.parametrize("argv, expected", [
    (["h", "cmd"], ("h", ["cmd"])),
    (["h", "cmd", "-x", "a b"], ("h", ["cmd", "-x", "a b"])),  # options after HOST are the command's
    (["-x", "h", "/usr/bin/hydra_pmi_proxy", "--proxy-id", "0"],  # MPICH Hydra's call
     ("h", ["/usr/bin/hydra_pmi_proxy", "--proxy-id", "0"])),
    (["-q", "-o", "BatchMode=yes", "-oLogLevel=ERROR", "-p", "22", "h", "cmd"], ("h", ["cmd"])),
    (["-xqT", "-l", "fuzz", "h", "cmd"], ("h", ["cmd"])),
    (["-tp22", "h", "cmd"], ("h", ["cmd"])),  # value attached after flags
    (["--", "-h", "cmd"], ("-h", ["cmd"])),
])
def test_wrapper_takes_ssh_argv_syntax(argv, expected):
    assert wrapper.parse_ssh_argv(argv) == expected


@pytest.mark.parametrize("argv, message", [
    (["h"], "usage"),
    ([], "usage"),
    (["-x", "h"], "usage"),
    (["-o"], "option -o needs a value"),
    (["-Z", "h", "cmd"], "unknown ssh option -Z"),
])
def test_wrapper_refuses_bad_ssh_argv(argv, message):
    with pytest.raises(RuntimeFailure, match=message):
        wrapper.parse_ssh_argv(argv)


# -- resources -----------------------------------------------------------------

def test_a_request_larger_than_the_node_is_refused_naming_field_and_node():
    cpus = len(os.sched_getaffinity(0))
    spec = {"job": "big", "resources": {"cores": cpus + 1, "memory_bytes": 1 << 60}}
    with pytest.raises(RuntimeFailure) as err:
        resources.check_resources(JobSpec.from_dict(spec), "node-1")
    assert str(err.value) == (
        "job big cannot start on node node-1: jobs.big.resource.cpu.cores: %d requested, but "
        "the node has %d CPUs; jobs.big.resource.memory: %d bytes requested, but the node has %d"
        % (cpus + 1, cpus, 1 << 60, resources.node_memory_bytes()))
    resources.check_resources(JobSpec.from_dict({"job": "fits", "resources": {"cores": cpus, "memory_bytes": 1}}), "n")
    resources.check_resources(JobSpec.from_dict({"job": "none", "resources": {"cores": None, "memory_bytes": None}}),
                              "n")


def cpus_after_binding(spec, rank):
    """The CPUs a child may run on after bind_cpus (the test process keeps its own)."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reader)
        resources.bind_cpus(JobSpec.from_dict(spec), Rank(**rank))
        os.write(writer, ",".join(map(str, sorted(os.sched_getaffinity(0)))).encode())
        os._exit(0)
    os.close(writer)
    data = os.read(reader, 4096).decode()
    os.close(reader)
    os.waitpid(child, 0)
    return [int(cpu) for cpu in data.split(",")]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="binding needs 2 CPUs to show")
def test_ranks_are_bound_to_their_cores_and_tasks_sharing_a_node_take_turns():
    cpus = sorted(os.sched_getaffinity(0))
    spec = {"job": "j", "nodes": 2, "resources": {"cores": 1}}
    assert cpus_after_binding(spec, {"rank": 0}) == cpus[:1]
    assert cpus_after_binding(spec, {"rank": 1}) == cpus[:1]  # one rank per node
    # Tasks 0 and 1 are on different nodes; tasks 0 and 2 share one: next CPU.
    assert cpus_after_binding(spec, {"rank": 2, "task_id": 2}) == cpus[1:2]
    # Without cores, or asking for every CPU, nothing changes.
    assert cpus_after_binding({"job": "j", "resources": {"cores": None}}, {"rank": 0}) == cpus
    assert cpus_after_binding({"job": "j", "resources": {"cores": len(cpus)}}, {"rank": 0}) == cpus


# -- CPU affinity ----------------------------------------------------------------

def test_parse_cpu_list():
    assert resources.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert resources.parse_cpu_list("") == set()


def test_core_affinity_takes_any_cpus_in_turn():
    cpus = [0, 1, 2, 3]
    assert resources.choose_cpus(cpus, None, 2, 0) == [0, 1]
    assert resources.choose_cpus(cpus, None, 2, 1) == [2, 3]
    assert resources.choose_cpus(cpus, None, 3, 1) == [0, 1, 3]  # wraps around


def test_socket_or_numa_affinity_keeps_the_cpus_in_one_group():
    groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
    cpus = list(range(8))
    assert resources.choose_cpus(cpus, groups, 3, 0) == [0, 1, 2]
    assert resources.choose_cpus(cpus, groups, 3, 1) == [4, 5, 6]  # next turn: next group
    assert resources.choose_cpus(cpus, groups, 4, 2) == [0, 1, 2, 3]
    assert resources.choose_cpus(cpus, groups, 5, 0) is None  # no group has 5
    assert resources.choose_cpus(cpus, [[0], [1, 2, 3]], 2, 0) == [1, 2]  # only one fits


def fake_topology(tmp_path, monkeypatch, sockets, numa):
    """sockets: {cpu: socket}; numa: {node: "cpulist"}."""
    cpu_dir, node_dir = tmp_path / "cpu", tmp_path / "node"
    for cpu, socket_id in sockets.items():
        topology = cpu_dir / ("cpu%d" % cpu) / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text("%d\n" % socket_id)
    node_dir.mkdir()
    for node, cpulist in numa.items():
        (node_dir / ("node%d" % node)).mkdir()
        (node_dir / ("node%d" % node) / "cpulist").write_text(cpulist + "\n")
    (node_dir / "possible").write_text("0-1\n")  # not a node directory
    monkeypatch.setattr(resources, "SYSFS_CPU", str(cpu_dir))
    monkeypatch.setattr(resources, "SYSFS_NODE", str(node_dir))


def test_cpu_groups_come_from_the_sysfs_topology(tmp_path, monkeypatch):
    fake_topology(tmp_path, monkeypatch, {0: 0, 1: 1, 2: 0, 3: 1}, {0: "0,2", 1: "1,3"})
    assert resources.cpu_groups("SOCKET", [0, 1, 2, 3]) == [[0, 2], [1, 3]]
    assert resources.cpu_groups("NUMA", [0, 1, 2]) == [[0, 2], [1]]  # only usable CPUs
    assert resources.cpu_groups("CORE", [0, 1]) is None
    assert resources.cpu_groups(None, [0, 1]) is None


def test_affinity_that_no_group_can_hold_is_refused_before_the_start(tmp_path, monkeypatch):
    # A node of 2 CPUs, each its own socket: 2 cores in one socket cannot be had.
    monkeypatch.setattr(resources, "node_cpus", lambda: [0, 1])
    fake_topology(tmp_path, monkeypatch, {0: 0, 1: 1}, {0: "0-1"})
    spec = {"job": "j", "resources": {"cores": 2, "affinity": "SOCKET"}}
    with pytest.raises(RuntimeFailure) as err:
        resources.check_resources(JobSpec.from_dict(spec), "node-1")
    assert str(err.value) == (
        "job j cannot start on node node-1: jobs.j.resource.cpu.affinity: SOCKET needs 2 CPUs "
        "in one socket, but the node's largest has 1")
    resources.check_resources(JobSpec.from_dict(dict(spec, resources={"cores": 2, "affinity": "CORE"})), "node-1")
