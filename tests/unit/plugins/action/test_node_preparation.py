"""The node role's action plugins node_programs and node_state, their node
side run for real on this machine (python3, sh; as root, as on a node)
with the node's paths pointed into a temporary directory."""

import json
import os
import subprocess
from unittest import mock

import pytest
from ansible.errors import AnsibleError

from ansible_collections.fuzz.multinode.plugins.action import node_programs, node_state


def run_here(command, sudoable=True, in_data=None):
    """The host's connection: this machine."""
    done = subprocess.run(["/bin/sh", "-c", command], input=in_data, capture_output=True, check=False)
    return {"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode()}


def action(cls, args, check_mode=False):
    task = mock.MagicMock(args=args, async_val=0, check_mode=check_mode)
    connection = mock.MagicMock()
    connection._shell.tmpdir = "/tmp/none"
    plugin = cls(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    plugin._low_level_execute_command = run_here
    return plugin


# -- node_programs --------------------------------------------------------------

@pytest.fixture
def node(tmp_path, monkeypatch):
    """A runtime package on the controller, programs beside it, and the
    node's runtime path under tmp_path/node."""
    source = tmp_path / "controller" / "multinode-runtime"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / "__main__.py").write_text("from pkg import main\n")
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pkg" / "main.py").write_text("VALUE = 1\n")
    (source / "pkg" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"controller bytecode")
    (tmp_path / "controller" / "wrapper").write_text("#!/bin/sh\necho wrapper\n")
    runtime = tmp_path / "node" / "opt" / "multinode-runtime"
    monkeypatch.setattr(node_programs, "RUNTIME_PATH", str(runtime))
    args = dict(runtime_source=str(source),
                programs=[dict(src=str(tmp_path / "controller" / "wrapper"),
                               dest=str(tmp_path / "node" / "multinode" / "ssh-wrapper"))])
    return source, runtime, tmp_path / "node" / "multinode" / "ssh-wrapper", args


def install(args, check_mode=False):
    return action(node_programs.ActionModule, args, check_mode).run(task_vars={})


def mode(path):
    return os.stat(path).st_mode & 0o7777


def test_installs_the_runtime_and_programs_owned_by_root_and_compiles_the_runtime(node):
    source, runtime, wrapper, args = node
    result = install(args)
    assert result["changed"] and not result.get("failed"), result
    assert sorted(result["installed"]) == sorted([
        str(runtime / "__main__.py"), str(runtime / "pkg" / "__init__.py"), str(runtime / "pkg" / "main.py"),
        str(wrapper)])
    assert (runtime / "pkg" / "main.py").read_text() == "VALUE = 1\n"
    assert mode(runtime / "pkg" / "main.py") == 0o644 and mode(wrapper) == 0o755
    assert mode(runtime / "pkg") == 0o755
    assert all(os.stat(path).st_uid == 0 for path in (runtime / "pkg" / "main.py", wrapper))
    # The node's own bytecode, not the controller's.
    compiled = list((runtime / "pkg" / "__pycache__").glob("main.*.pyc"))
    assert compiled and compiled[0].read_bytes() != b"controller bytecode"
    assert subprocess.run(["python3", "-I", str(runtime)], capture_output=True, check=False).returncode == 0


def test_a_second_install_changes_nothing(node):
    _unused, runtime, _unused, args = node
    install(args)
    before = {path: os.stat(path).st_ino for path in runtime.rglob("*")}
    result = install(args)
    assert not result["changed"] and result["installed"] == [] and result["removed"] == [], result
    assert {path: os.stat(path).st_ino for path in runtime.rglob("*")} == before


def test_replaces_what_differs_and_removes_what_an_older_install_left(node):
    source, runtime, wrapper, args = node
    install(args)
    (source / "pkg" / "main.py").write_text("VALUE = 2\n")
    os.chmod(wrapper, 0o777)
    (runtime / "pkg" / "gone.py").write_text("")
    (runtime / "pkg" / "__pycache__" / "gone.cpython-311.pyc").write_bytes(b"")
    (runtime.parent / "multinode-runtime.py").write_text("# the single-file runtime of old\n")
    result = install(args)
    assert sorted(result["installed"]) == sorted([str(runtime / "pkg" / "main.py"), str(wrapper)]), result
    assert sorted(result["removed"]) == sorted([
        str(runtime / "pkg" / "gone.py"), str(runtime / "pkg" / "__pycache__" / "gone.cpython-311.pyc"),
        str(runtime.parent / "multinode-runtime.py")]), result
    assert (runtime / "pkg" / "main.py").read_text() == "VALUE = 2\n" and mode(wrapper) == 0o755
    assert not (runtime / "pkg" / "gone.py").exists() and not (runtime.parent / "multinode-runtime.py").exists()
    # Bytecode of the files still shipped stays.
    assert list((runtime / "pkg" / "__pycache__").glob("main.*.pyc"))


def test_check_mode_says_what_would_change_and_writes_nothing(node):
    _unused, runtime, wrapper, args = node
    result = install(args, check_mode=True)
    assert result["changed"] and str(wrapper) in result["installed"], result
    assert not runtime.exists() and not wrapper.exists()


def test_a_program_missing_on_the_controller_is_named(node):
    _unused, _unused, _unused, args = node
    args["programs"].append(dict(src="/nonexistent/helper", dest="/tmp/never"))
    with pytest.raises(AnsibleError, match="/nonexistent/helper"):
        install(args)


def test_a_node_that_cannot_install_says_why(node, monkeypatch):
    _unused, _unused, _unused, args = node
    monkeypatch.setattr(node_programs, "RUNTIME_PATH", "/proc/not-writable/runtime")
    result = install(args)
    assert result["failed"] and "cannot install the node programs" in result["msg"], result
    assert "/proc/not-writable" in result["msg"], result


# -- node_state -----------------------------------------------------------------

def state(tmp_path, monkeypatch, stamp, fingerprint="f1", nodes=("a", "b"), **options):
    """node_state's result on this machine as a node; a stamp of None:
    never prepared; "F1" in a stamp stands for the fingerprint the check
    makes of `fingerprint` with nothing installed."""
    path = tmp_path / "prepared"
    if stamp is not None:
        path.write_text(stamp.replace("F1", combined("f1")))
    elif path.exists():
        path.unlink()
    monkeypatch.setattr(node_state, "STAMP", str(path))
    args = dict(dict(fingerprint=fingerprint, nodes=list(nodes), local=True), **options)
    return action(node_state.ActionModule, args).run(task_vars={})


def combined(fingerprint, installed=()):
    """The fingerprint node_state checks and returns."""
    args = dict(fingerprint=fingerprint, installed=list(installed), nodes=[], local=True)
    return action(node_state.ActionModule, args).run(task_vars={})["fingerprint"]


def test_a_node_prepared_for_these_nodes_or_more_is_prepared(tmp_path, monkeypatch):
    assert state(tmp_path, monkeypatch, "F1\na\nb\n")["prepared"]
    assert state(tmp_path, monkeypatch, "F1\na\nb\nc\n")["prepared"]


def test_a_node_prepared_for_fewer_nodes_another_fingerprint_or_never_is_not(tmp_path, monkeypatch):
    assert not state(tmp_path, monkeypatch, "F1\na\n")["prepared"]
    assert not state(tmp_path, monkeypatch, "F1\na\nb\n", fingerprint="f0")["prepared"]
    assert not state(tmp_path, monkeypatch, None)["prepared"]
    assert not state(tmp_path, monkeypatch, "")["prepared"]


@pytest.fixture
def installed(tmp_path):
    """What preparation installs, on the controller: a package directory
    (with bytecode a checkout's runs left) and a program."""
    source = tmp_path / "collection" / "runtime"
    (source / "pkg" / "__pycache__").mkdir(parents=True)
    (source / "pkg" / "main.py").write_text("VALUE = 1\n")
    (source / "__main__.py").write_text("from pkg import main\n")
    (tmp_path / "collection" / "wrapper").write_text("#!/bin/sh\n")
    return [source, tmp_path / "collection" / "wrapper"]


def test_the_fingerprint_covers_the_installed_files_contents_not_where_they_lie(tmp_path, installed):
    base = combined("f1", installed)
    assert base != combined("f1") and base != combined("f0", installed)
    (installed[0] / "pkg" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"bytecode")
    (installed[0] / "stale.pyc").write_bytes(b"bytecode")
    assert combined("f1", installed) == base, "bytecode is not installed"
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "collection").rename(elsewhere)
    moved = [elsewhere / "runtime", elsewhere / "wrapper"]
    assert combined("f1", moved) == base
    assert combined("f1", moved[::-1]) != base


@pytest.mark.parametrize("change", [
    lambda runtime: (runtime / "pkg" / "main.py").write_text("VALUE = 2\n"),
    lambda runtime: (runtime / "pkg" / "main.py").rename(runtime / "pkg" / "other.py"),
    lambda runtime: (runtime / "pkg" / "new.py").write_text(""),
    lambda runtime: (runtime / "__main__.py").unlink(),
])
def test_a_changed_renamed_added_or_removed_file_prepares_the_node_again(tmp_path, monkeypatch, installed, change):
    (tmp_path / "prepared").write_text("%s\na\nb\n" % combined("f1", installed))
    monkeypatch.setattr(node_state, "STAMP", str(tmp_path / "prepared"))
    check = dict(fingerprint="f1", installed=[str(path) for path in installed], nodes=["a", "b"], local=True)
    assert action(node_state.ActionModule, check).run(task_vars={})["prepared"]
    change(installed[0])
    assert not action(node_state.ActionModule, check).run(task_vars={})["prepared"]


def test_an_installed_file_the_controller_cannot_read_is_named(tmp_path, monkeypatch):
    result = state(tmp_path, monkeypatch, "F1\na\nb\n", installed=[str(tmp_path / "missing")])
    assert result["failed"] and "cannot read what node preparation installs" in result["msg"], result
    assert str(tmp_path / "missing") in result["msg"]


def test_a_node_whose_sshd_does_not_run_is_not_prepared(tmp_path, monkeypatch):
    (tmp_path / "prepared").write_text("%s\na\n" % combined("f1"))
    monkeypatch.setattr(node_state, "STAMP", str(tmp_path / "prepared"))
    # This machine runs no sshd with its pid in /run/sshd.pid as this test sees it.
    monkeypatch.setattr(node_state, "CHECK", node_state.CHECK.replace("/run/sshd.pid", str(tmp_path / "sshd.pid")))
    result = action(node_state.ActionModule, dict(fingerprint="f1", nodes=["a"], local=False)).run(task_vars={})
    assert result["prepared"] is False and not result.get("failed"), result


def test_the_state_names_the_runtime_and_an_address(tmp_path, monkeypatch):
    result = state(tmp_path, monkeypatch, "F1\na\nb\n")
    assert result["runtime"] == node_state.RUNTIME_PATH
    assert isinstance(result["address"], str)


def test_the_state_names_the_ssh_tools_the_node_lacks_and_whether_systemd_runs(tmp_path, monkeypatch):
    (tmp_path / "ssh").write_text("")
    monkeypatch.setattr(node_state, "SSH_TOOLS", (str(tmp_path / "ssh"), str(tmp_path / "sshd")))
    result = state(tmp_path, monkeypatch, "F1\na\nb\n")
    assert result["missing"] == [str(tmp_path / "sshd")], result
    assert result["systemd"] is os.path.isdir("/run/systemd/system")


def test_the_state_counts_the_nodes_cdi_devices_by_kind_and_names_what_it_passed_over(tmp_path, monkeypatch):
    """The runtime's CDI reader runs as it is, fed to the node's Python in
    the one command (here with its directories pointed into tmp_path): two
    GPUs (one named twice, by index and UUID), `all` not counted, a broken
    specification passed over and named."""
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    gpus = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
        {"name": "GPU-1234", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
        {"name": "1", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia1"}]}},
        {"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}]}}]}
    (cdi / "nvidia.json").write_text(json.dumps(gpus))
    (cdi / "broken.json").write_text("{")
    reader = tmp_path / "cdi.py"
    with open(node_state.CDI_READER) as handle:
        source = handle.read()
    reader.write_text(source.replace('CDI_DIRS = ("/etc/cdi", "/var/run/cdi")', "CDI_DIRS = (%r,)" % str(cdi)))
    monkeypatch.setattr(node_state, "CDI_READER", str(reader))
    result = state(tmp_path, monkeypatch, "F1\na\nb\n")
    assert result["devices"] == {"nvidia.com/gpu": 2}, result
    assert result["device_problems"] == [
        "CDI specification %s: not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)" % (cdi / "broken.json")], result


def test_a_node_whose_python_cannot_count_devices_could_not_tell(tmp_path, monkeypatch):
    monkeypatch.setattr(node_state, "FACTS", node_state.FACTS.replace("/usr/bin/python3 -I -", "/nonexistent -"))
    result = state(tmp_path, monkeypatch, "F1\na\nb\n")
    assert result["devices"] is None and result["device_problems"] == [], result


def test_the_address_comes_without_the_runtimes_python_too(tmp_path, monkeypatch):
    usual = state(tmp_path, monkeypatch, "F1\na\nb\n")["address"]
    monkeypatch.setattr(node_state, "FACTS", node_state.FACTS.replace("/usr/bin/python3 -I -", "/nonexistent -"))
    assert state(tmp_path, monkeypatch, "F1\na\nb\n")["address"] == usual


def test_the_state_says_whether_the_runtimes_python_has_boto3_without_importing_it(tmp_path, monkeypatch):
    """Found, not imported: the stand-in package fails on import."""
    package = tmp_path / "site" / "boto3"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setattr(node_state, "FACTS", node_state.FACTS.replace("/usr/bin/python3 -I -", "/usr/bin/python3 -"))
    found = state(tmp_path, monkeypatch, "F1\na\nb\n")
    assert found["boto3"] is True and found["devices"] is not None, found
    # -S: no site-packages, so no boto3 wherever this machine has one.
    monkeypatch.setattr(node_state, "FACTS", node_state.FACTS.replace("/usr/bin/python3 -", "/usr/bin/python3 -I -S -"))
    assert state(tmp_path, monkeypatch, "F1\na\nb\n")["boto3"] is False


def test_without_facts_no_python_starts_and_the_address_is_the_same(tmp_path, monkeypatch):
    """facts=[]: the address from ip; a python3 first on the PATH that
    fails and leaves a trace shows no Python started for it (the devices
    unknown, boto3 false)."""
    usual = state(tmp_path, monkeypatch, "F1\na\nb\n")["address"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\necho started >>%s\nexit 1\n" % (tmp_path / "started"))
    (bin_dir / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    result = state(tmp_path, monkeypatch, "F1\na\nb\n", facts=[])
    assert result["address"] == usual and result["prepared"], result
    assert result["devices"] is None and result["boto3"] is False, result
    assert not (tmp_path / "started").exists()


def test_without_ip_the_address_comes_from_python3(tmp_path, monkeypatch):
    usual = state(tmp_path, monkeypatch, "F1\na\nb\n")["address"]
    monkeypatch.setattr(node_state, "ADDRESS_ONLY",
                        node_state.ADDRESS_ONLY.replace("ip route get", "/nonexistent/ip route get"))
    assert state(tmp_path, monkeypatch, "F1\na\nb\n", facts=[])["address"] == usual
