"""The action plugin volume_transfers on the controller, with the node
runtime of this checkout behind a stand-in for the host's connection (each
command run here, as the connection would run it on a node): which items
a host carries out, what each command gets on stdin (only its own item's
credentials), how a failure stops the ingress but not the egress, and a
file:// egress destination fetched home a piece at a time, whole or not
at all."""

import json
import os
import pwd
import shlex
import subprocess
from pathlib import Path
from unittest import mock

import pytest

from ansible_collections.fuzz.multinode.plugins.action import volume_transfers
from ansible_collections.fuzz.multinode.plugins.action.volume_transfers import ActionModule, items_here
from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUNTIME_PATH

RUNTIME = str(Path(__file__).resolve().parents[4] / "files" / "multinode-runtime")


class Node:
    """The host's connection, standing in: runs each command on this
    machine with the checkout's runtime, records it with its stdin;
    `before(command)` may change the node first."""

    def __init__(self, before=None):
        self.commands, self.before = [], before

    def execute(self, command, sudoable=True, in_data=None):
        self.commands.append((command, json.loads(in_data) if in_data else None))
        if self.before:
            self.before(command)
        done = subprocess.run(["/bin/sh", "-c", command.replace(shlex.quote(RUNTIME_PATH), shlex.quote(RUNTIME))],
                              input=in_data, capture_output=True, check=False)
        return {"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode()}

    def subcommands(self):
        return [command.split()[3] for command, _unused in self.commands]


def run(args, node, host="node1"):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False)
    plugin = ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    plugin._low_level_execute_command = node.execute
    return plugin.run(task_vars={"inventory_hostname": host})


def me():
    return pwd.getpwuid(os.getuid()).pw_name


def item(field, source, destination, secret=None):
    return {"field": field, "source": source, "destination": destination, "secret": secret,
            "timeout_seconds": None, "attempts": 1}


def volume(name, hosts=1, ingress=(), egress=()):
    return {"volume": name, "store": "ephemeral", "hosts": hosts, "s3": False, "ingress": list(ingress),
            "egress": list(egress)}


def args(tmp_path, direction, transfers, **more):
    return dict(dict(direction=direction, transfers=transfers, hosts=["node1", "node2", "node3"], run="r1",
                     volume_root=str(tmp_path / "volumes"), user=me(), files={"conf": "a = 1\n", "notes": "n\n"},
                     egress_dir=str(tmp_path / "egress"), progress_every=0), **more)


def volume_dir(tmp_path, name="data"):
    return tmp_path / "volumes" / "ephemeral" / "r1" / name


def test_ingress_is_done_where_a_job_mounts_the_volume_and_egress_on_the_first_host_only():
    transfers = [volume("a", 1, ingress=[item("volumes.a.ingress[0]", "file://x", "file://x")],
                        egress=[item("volumes.a.egress[0]", "file://x", "s3://b/x")]),
                 volume("b", 3, ingress=[item("volumes.b.ingress[0]", "file://x", "file://x"),
                                         item("volumes.b.ingress[1]", "file://y", "file://y")])]
    hosts = ["n1", "n2", "n3", "n4"]
    fields = {host: [i["field"] for _unused, i in items_here(transfers, "ingress", hosts, host)[0]] for host in hosts}
    assert fields == {"n1": ["volumes.a.ingress[0]", "volumes.b.ingress[0]", "volumes.b.ingress[1]"],
                      "n2": ["volumes.b.ingress[0]", "volumes.b.ingress[1]"],
                      "n3": ["volumes.b.ingress[0]", "volumes.b.ingress[1]"], "n4": []}
    assert [i["field"] for _unused, i in items_here(transfers, "egress", hosts, "n1")[0]] == ["volumes.a.egress[0]"]
    assert items_here(transfers, "egress", hosts, "n2") == ([], False, [])
    assert items_here(transfers, "ingress", hosts, "elsewhere") == ([], False, [])


def test_each_item_is_one_runtime_command_with_only_its_own_credentials(tmp_path):
    transfers = [volume("data", ingress=[
        item("volumes.data.ingress[0]", "file://conf", "file://etc/app.conf", secret="user/one"),
        item("volumes.data.ingress[1]", "file://notes", "file://notes.txt", secret="user/two"),
    ])]
    secrets = {"user/one": {"username": "u1", "password": "p1"}, "user/two": {"username": "u2", "password": "p2"},
               "user/other": {"username": "u3", "password": "p3"}}
    node = Node()
    result = run(args(tmp_path, "ingress", transfers, secrets=secrets), node)
    assert result["failures"] == [] and not result.get("failed") and result["changed"]
    assert [c["field"] for c in result["copied"]] == ["volumes.data.ingress[0]", "volumes.data.ingress[1]"]
    assert (volume_dir(tmp_path) / "etc" / "app.conf").read_text() == "a = 1\n"
    assert (volume_dir(tmp_path) / "notes.txt").read_text() == "n\n"
    assert node.subcommands() == ["transfer", "transfer"]
    (first, one), (second, two) = node.commands
    assert one["credentials"] == secrets["user/one"] and two["credentials"] == secrets["user/two"]
    assert "p1" not in first + second  # never on a command line
    assert one["contents"] == "a = 1\n" and one["first"] is True and one["user"] == me()


def test_a_failed_ingress_item_stops_the_hosts_ingress_naming_item_uri_reason_and_host(tmp_path):
    transfers = [volume("data", ingress=[
        item("volumes.data.ingress[0]", "http://127.0.0.1:9/in.tgz", "file://in.tgz"),
        item("volumes.data.ingress[1]", "file://conf", "file://conf"),
    ])]
    node = Node()
    result = run(args(tmp_path, "ingress", transfers), node)
    assert result["failures"] == [
        "volumes.data.ingress[0]: http://127.0.0.1:9/in.tgz -> file://in.tgz: cannot connect to 127.0.0.1:9: "
        "connection refused (on node1)"]
    assert result["failed"] and result["msg"] == "ingress failed: " + result["failures"][0]
    assert node.subcommands() == ["transfer"]  # the second item is not tried
    assert os.listdir(volume_dir(tmp_path)) == []


def test_on_shared_storage_the_other_hosts_leave_the_ingress_to_the_first(tmp_path, capsys):
    """Said by the play (volume_sharing shared): the host is not asked at
    all. With auto only the host's runtime can tell by the file system: it
    is asked (here local storage, so it copies the items itself)."""
    transfers = [volume("data", hosts=3, ingress=[item("volumes.data.ingress[0]", "file://conf", "file://c"),
                                                  item("volumes.data.ingress[1]", "file://conf", "file://d")])]
    node = Node()
    result = run(args(tmp_path, "ingress", transfers, volume_sharing="shared"), node, host="node2")
    assert result["copied"] == [] and result["failures"] == [] and not result["changed"]
    assert node.subcommands() == []
    assert "[ingress] volume data: the volume root is shared storage: the first host copies it\n" in \
        capsys.readouterr().out
    assert not (tmp_path / "volumes").exists()
    node = Node()
    result = run(args(tmp_path, "ingress", transfers, volume_sharing="auto"), node, host="node2")
    assert node.subcommands() == ["transfer", "transfer"] and result["failures"] == [], result


def test_a_file_egress_destination_comes_home_a_piece_at_a_time_whole_or_not_at_all(tmp_path, monkeypatch):
    data = os.urandom(100)
    volume_dir(tmp_path).mkdir(parents=True)
    (volume_dir(tmp_path) / "out").mkdir()
    (volume_dir(tmp_path) / "out" / "result.bin").write_bytes(data)
    monkeypatch.setattr(volume_transfers, "PIECE", 32)
    transfers = [volume("data", egress=[
        item("volumes.data.egress[0]", "file://missing.bin", "file://results/missing.bin"),
        item("volumes.data.egress[1]", "file://out/result.bin", "file://results/result.bin"),
    ])]
    node = Node()
    result = run(args(tmp_path, "egress", transfers), node)
    # The first item fails; the egress goes on with the next.
    assert result["failures"] == [
        "volumes.data.egress[0]: file://missing.bin -> file://results/missing.bin: missing.bin: no such file in "
        "the volume (on node1)"]
    assert (tmp_path / "egress" / "results" / "result.bin").read_bytes() == data
    assert sorted(os.listdir(tmp_path / "egress" / "results")) == ["result.bin"]
    assert node.subcommands() == ["volume-read"] * 5  # one for the missing file, four pieces of 32 bytes
    assert [stdin["offset"] for _unused, stdin in node.commands[1:]] == [0, 32, 64, 96]


def test_a_file_that_changes_while_it_is_fetched_is_not_kept(tmp_path, monkeypatch):
    source = volume_dir(tmp_path) / "result.bin"
    source.parent.mkdir(parents=True)
    source.write_bytes(b"x" * 100)
    monkeypatch.setattr(volume_transfers, "PIECE", 32)

    def job_writes_on(command):
        if len(node.commands) == 3:
            source.write_bytes(b"y" * 120)
    node = Node(before=job_writes_on)
    destination = tmp_path / "egress" / "result.bin"
    destination.parent.mkdir(parents=True)
    destination.write_bytes(b"the last run's\n")
    result = run(args(tmp_path, "egress", [volume("data", egress=[
        item("volumes.data.egress[0]", "file://result.bin", "file://result.bin")])]), node)
    assert result["failures"] == ["volumes.data.egress[0]: file://result.bin -> file://result.bin: the file changed "
                                  "while it was copied (on node1)"]
    assert os.listdir(destination.parent) == ["result.bin"] and destination.read_bytes() == b"the last run's\n"


@pytest.mark.parametrize("destination", ["file://../escape", "file:///../etc/cron.d/x"])
def test_a_file_egress_destination_out_of_the_egress_directory_is_refused(tmp_path, destination):
    volume_dir(tmp_path).mkdir(parents=True)
    (volume_dir(tmp_path) / "r").write_text("r")
    node = Node()
    result = run(args(tmp_path, "egress", [volume("data", egress=[
        item("volumes.data.egress[0]", "file://r", destination)])]), node)
    failure, = result["failures"]
    assert failure.startswith("volumes.data.egress[0].destination: %r " % destination)
    assert ("it must be a path inside the controller's egress directory (file://dir/name, or file:///dir/name "
            "from its root), without '..'") in failure
    assert node.commands == [] and not (tmp_path / "egress").exists()


def test_paths_from_the_roots_and_the_users_persistent_volume_in_and_out(tmp_path):
    """file:///PATH from the volume's root (ingress destination, egress
    source) and from the egress directory's root (egress destination), in
    the store of volume://user/persistent: ROOT/user/persistent."""
    home = dict(volume("home"), store="user/persistent")
    ingress = run(args(tmp_path, "ingress", [dict(home, ingress=[
        item("volumes.home.ingress[0]", "file://conf", "file:///etc/app.conf")])]), Node())
    assert ingress["failures"] == [], ingress
    inside = tmp_path / "volumes" / "user" / "persistent" / "etc" / "app.conf"
    assert inside.read_text() == "a = 1\n"
    egress = run(args(tmp_path, "egress", [dict(home, egress=[
        item("volumes.home.egress[0]", "file:///etc/app.conf", "file:///app.conf")])]), Node())
    assert egress["failures"] == [], egress
    assert (tmp_path / "egress" / "app.conf").read_text() == "a = 1\n"
