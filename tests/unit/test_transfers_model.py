"""A volume's ingress and egress in the model: the ends each may have, the
paths inside a volume (never out of it), a run's transfers (which volumes,
on how many hosts) and their credentials, checked before any host is
touched."""

import json

import pytest
import yaml

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    Transfer,
    Volume,
    check_transfer_secrets,
    load_workflow,
    parse_workflow,
    s3_credentials,
    s3_secret_names,
    select_run,
    transfer_plan,
    transfer_secrets,
)


def fuzzfile(ingress=None, egress=None, jobs=None, files=None, store="volume://user/ephemeral"):
    volume = {"reference": store}
    if ingress is not None:
        volume["ingress"] = ingress
    if egress is not None:
        volume["egress"] = egress
    data = {
        "version": "v1",
        "files": files or {"case.tgz": "the case\n"},
        "volumes": {"data": volume},
        "jobs": jobs or {"solve": {"image": {"uri": "docker://alpine"}, "command": ["true"],
                                   "mounts": {"data": {"location": "/data"}}}},
    }
    return yaml.safe_dump(data, sort_keys=False)


def item(source, destination, **more):
    return dict({"source": {"uri": source}, "destination": {"uri": destination}}, **more)


def error(text):
    with pytest.raises(FuzzfileError) as info:
        parse_workflow(text)
    return str(info.value)


def test_every_end_a_transfer_may_have():
    wf = parse_workflow(fuzzfile(
        ingress=[item("https://example.org/a.tgz", "file://in/a.tgz"),
                 item("http://example.org/b", "file://b"),
                 dict(item("s3://inputs/case/c.dat", "file://./c.dat"),
                      source={"uri": "s3://inputs/case/c.dat", "secret": "secret://user/s3"},
                      policy={"timeout": {"execute": "10m"}, "retry": {"attempts": 3}}),
                 item("file://case.tgz", "file://case.tgz")],
        egress=[dict(item("file://out/result.csv", "s3://results/run/result.csv"),
                     destination={"uri": "s3://results/run/result.csv", "secret": "secret://user/s3"}),
                item("file://log.txt", "file://logs/log.txt")]))
    assert wf.volumes["data"] == Volume("ephemeral", ingress=[
        Transfer("https://example.org/a.tgz", "file://in/a.tgz"),
        Transfer("http://example.org/b", "file://b"),
        Transfer("s3://inputs/case/c.dat", "file://./c.dat", "secret://user/s3", 600.0, 3),
        Transfer("file://case.tgz", "file://case.tgz"),
    ], egress=[
        Transfer("file://out/result.csv", "s3://results/run/result.csv", "secret://user/s3"),
        Transfer("file://log.txt", "file://logs/log.txt"),
    ])
    assert wf.unsupported == [] and wf.warnings == []
    # The JSON form reads back as it was.
    assert load_workflow(json.loads(json.dumps(wf.to_dict()))) == wf


@pytest.mark.parametrize("ingress, egress, message", [
    # A path out of the volume, by .. or from the root, is refused naming the field.
    ([item("https://example.org/a", "file://../a")], None,
     "volumes.data.ingress[0].destination.uri: 'file://../a' escapes the volume with '..'; it must be "
     "a path inside the volume (file://dir/name, or file:///dir/name from its root), without '..'"),
    ([item("https://example.org/a", "file://in/../../a")], None,
     "volumes.data.ingress[0].destination.uri: 'file://in/../../a' escapes the volume with '..'"),
    # From the volume's root: '..' still escapes, '//' is no path of the volume's.
    ([item("https://example.org/a", "file:///../etc/passwd")], None,
     "volumes.data.ingress[0].destination.uri: 'file:///../etc/passwd' escapes the volume with '..'"),
    ([item("https://example.org/a", "file:////etc/passwd")], None,
     "volumes.data.ingress[0].destination.uri: 'file:////etc/passwd' starts with '//'; it must be a path "
     "inside the volume (file://dir/name, or file:///dir/name from its root), without '..'"),
    (None, [item("file:///../../etc/shadow", "s3://b/k")],
     "volumes.data.egress[0].source.uri: 'file:///../../etc/shadow' escapes the volume with '..'"),
    (None, [item("file://../../../etc/shadow", "s3://b/k")],
     "volumes.data.egress[0].source.uri: 'file://../../../etc/shadow' escapes the volume with '..'"),
    (None, [item("file://out", "file://../elsewhere")],
     "volumes.data.egress[0].destination.uri: 'file://../elsewhere' escapes the controller's egress directory "
     "with '..'; it must be a path inside the controller's egress directory (file://dir/name, or "
     "file:///dir/name from its root), without '..'"),
    (None, [item("file://out", "file:///../elsewhere")],
     "volumes.data.egress[0].destination.uri: 'file:///../elsewhere' escapes the controller's egress directory "
     "with '..'"),
    ([item("https://example.org/a", "file://")], None,
     "volumes.data.ingress[0].destination.uri: 'file://' names no file"),
    ([item("https://example.org/a", "file:///")], None,
     "volumes.data.ingress[0].destination.uri: 'file:///' names no file; it must be a path inside the "
     "volume (file://dir/name, or file:///dir/name from its root), without '..', ending in a file name"),
    ([item("https://example.org/a", "file:///in/")], None,
     "volumes.data.ingress[0].destination.uri: 'file:///in/' names no file"),
    ([item("https://example.org/a", "file:///.")], None,
     "volumes.data.ingress[0].destination.uri: 'file:///.' names no file"),
    ([item("https://example.org/a", "file://in/")], None,
     "volumes.data.ingress[0].destination.uri: 'file://in/' names no file"),
    ([item("https://example.org/a", "file://.")], None,
     "volumes.data.ingress[0].destination.uri: 'file://.' names no file"),
    # Ends this collection does not copy from or to, saying what it does.
    ([item("ftp://example.org/a", "file://a")], None,
     "volumes.data.ingress[0].source.uri: 'ftp://example.org/a' is not a source this collection copies "
     "from: use https://, http://, s3://BUCKET/KEY or file://<name of a top-level files entry>"),
    ([item("https://example.org/a", "s3://b/k")], None,
     "volumes.data.ingress[0].destination.uri: 's3://b/k' is not a destination this collection copies "
     "to: use file://PATH, a path inside the volume"),
    (None, [item("file://out", "https://example.org/up")],
     "volumes.data.egress[0].destination.uri: 'https://example.org/up' is not a destination this "
     "collection copies to: use s3://BUCKET/KEY or file://PATH (a file under the controller's egress "
     "directory)"),
    (None, [item("s3://b/k", "s3://b/k2")],
     "volumes.data.egress[0].source.uri: 's3://b/k' is not a source this collection copies from: use "
     "file://PATH, a path inside the volume"),
    ([item("s3://bucket", "file://a")], None,
     "volumes.data.ingress[0].source.uri: 's3://bucket' must name an object, s3://BUCKET/KEY"),
    ([item("s3://bucket/dir/", "file://a")], None,
     "volumes.data.ingress[0].source.uri: 's3://bucket/dir/' must name an object"),
    ([item("https:///a", "file://a")], None, "volumes.data.ingress[0].source.uri: 'https:///a' names no host"),
    ([item("file://nope", "file://a")], None,
     "volumes.data.ingress[0].source.uri: 'file://nope' names no entry of the top-level files (case.tgz)"),
    ([dict(item("s3://b/k", "file://a"), source={"uri": "s3://b/k", "secret": "user/s3"})], None,
     "volumes.data.ingress[0].source.secret: must be a secret:// reference"),
    ([dict(item("s3://b/k", "file://a"), policy={"timeout": {"execute": "soon"}})], None,
     "volumes.data.ingress[0].policy.timeout.execute: must be a duration such as 2h"),
    ([{"source": {"uri": "s3://b/k"}}], None, "volumes.data.ingress[0].destination: required"),
    ("s3://b/k", None, "volumes.data.ingress: must be a list, got 's3://b/k'"),
])
def test_a_transfer_that_could_leave_its_volume_or_has_no_such_end_is_refused_naming_the_field(
        ingress, egress, message):
    assert message in error(fuzzfile(ingress=ingress, egress=egress))


def test_a_secret_on_the_volumes_own_end_is_ignored_with_a_warning():
    wf = parse_workflow(fuzzfile(ingress=[dict(item("https://example.org/a", "file://a"),
                                               destination={"uri": "file://a", "secret": "secret://user/x"})]))
    assert wf.volumes["data"].ingress == [Transfer("https://example.org/a", "file://a")]
    assert wf.warnings == ["volumes.data.ingress[0].destination.secret: ignored: 'file://a' needs no credentials"]


def test_the_json_form_of_a_transfer_is_checked_like_the_fuzzfile():
    data = parse_workflow(fuzzfile(ingress=[item("https://example.org/a", "file://a")])).to_dict()
    data["volumes"]["data"]["ingress"][0]["destination"] = "file://../../etc/cron.d/x"
    with pytest.raises(FuzzfileError) as info:
        load_workflow(data)
    assert str(info.value).startswith(
        "workflow.volumes.data.ingress[0].destination: 'file://../../etc/cron.d/x' escapes the volume")
    data["volumes"]["data"]["ingress"][0]["destination"] = "file://a"
    data["volumes"]["data"]["store"] = "persistent/../x"
    with pytest.raises(FuzzfileError) as info:
        load_workflow(data)
    assert str(info.value) == ("workflow.volumes.data: must be ephemeral, user/persistent, account/persistent or "
                               "persistent/NAME, got 'persistent/../x'")
    data["volumes"]["data"]["store"] = "persistent/other"
    with pytest.raises(FuzzfileError) as info:
        load_workflow(data)
    assert str(info.value) == (
        "workflow.job_defs.solve.volumes.data: must be the store of workflow.volumes.data, got 'ephemeral'")


JOBS = {
    # a on 1 host, b on 3 (multinode), c a task array on up to 2: all mount data
    "a": {"image": {"uri": "docker://alpine"}, "command": ["true"], "mounts": {"data": {"location": "/d"}}},
    "b": {"image": {"uri": "docker://alpine"}, "command": ["true"], "mounts": {"data": {"location": "/d"}},
          "multinode": {"nodes": 3, "implementation": "generic"}, "requires": ["a"]},
    "c": {"image": {"uri": "docker://alpine"}, "command": ["true"], "mounts": {"data": {"location": "/d"}},
          "task-array": {"start": 1, "end": 5, "concurrency": 2}},
    "d": {"image": {"uri": "docker://alpine"}, "command": ["true"],
          "multinode": {"nodes": 4, "implementation": "generic"}},
}


def test_a_runs_transfers_are_those_of_the_volumes_its_jobs_mount_on_the_hosts_that_mount_them():
    wf = parse_workflow(fuzzfile(
        ingress=[dict(item("s3://b/in", "file://in"), source={"uri": "s3://b/in", "secret": "secret://user/s3"})],
        egress=[item("file://out", "file://out")], jobs=JOBS))
    plan = transfer_plan(wf, select_run(wf))
    # d uses 4 hosts but does not mount the volume: 3 hosts mount it.
    assert plan == [{
        "volume": "data", "store": "ephemeral", "hosts": 3, "s3": True,
        "ingress": [{"field": "volumes.data.ingress[0]", "source": "s3://b/in", "destination": "file://in",
                     "secret": "user/s3", "timeout_seconds": None, "attempts": 1}],
        "egress": [{"field": "volumes.data.egress[0]", "source": "file://out", "destination": "file://out",
                    "secret": None, "timeout_seconds": None, "attempts": 1}]}]
    # One job of it (-e job=c): the hosts that job uses.
    assert [(v["volume"], v["hosts"]) for v in transfer_plan(wf, select_run(wf, "c"))] == [("data", 2)]
    # A job that mounts no volume with transfers has none.
    assert transfer_plan(wf, select_run(wf, "d")) == []


def test_a_volume_no_job_mounts_has_its_transfers_not_run_and_says_so():
    jobs = {"solve": {"image": {"uri": "docker://alpine"}, "command": ["true"]}}
    wf = parse_workflow(fuzzfile(ingress=[item("https://example.org/a", "file://a")], jobs=jobs))
    assert wf.warnings == ["volumes.data: no job mounts it, so its ingress and egress are not run"]
    assert transfer_plan(wf, select_run(wf)) == []


PLAN = [{"volume": "data", "store": "ephemeral", "hosts": 1, "s3": True, "ingress": [
    {"field": "volumes.data.ingress[0]", "source": "s3://b/k", "destination": "file://k", "secret": "user/s3"},
    {"field": "volumes.data.ingress[1]", "source": "https://h/x", "destination": "file://x", "secret": "user/web"},
], "egress": [
    {"field": "volumes.data.egress[0]", "source": "file://o", "destination": "s3://b/o", "secret": "user/out"},
]}]


def test_every_secret_of_a_runs_transfers_is_defined_and_of_its_ends_form_before_any_host_is_touched():
    everything = dict(secret_names=["user/s3", "user/web", "user/out"], registry_secret_names=["user/web"],
                      s3_names=["user/s3", "user/out"])
    check_transfer_secrets(PLAN, **everything)
    check_transfer_secrets(PLAN)  # nothing to check against
    with pytest.raises(FuzzfileError) as info:
        check_transfer_secrets(PLAN, **{**everything, "secret_names": ["user/s3", "user/web"]})
    assert str(info.value).startswith(
        "volumes.data.egress[0].destination.secret: secret://user/out is not defined in fuzz_multinode_secrets")
    with pytest.raises(FuzzfileError) as info:
        check_transfer_secrets(PLAN, **{**everything, "s3_names": ["user/out"]})
    assert str(info.value) == (
        "volumes.data.ingress[0].source.secret: secret://user/s3: its value in fuzz_multinode_secrets is not "
        "S3 credentials: it must be a mapping of access_key_id and secret_access_key (non-empty strings), and "
        "optionally session_token, region and endpoint_url")
    with pytest.raises(FuzzfileError) as info:
        check_transfer_secrets(PLAN, **{**everything, "registry_secret_names": []})
    assert str(info.value).startswith(
        "volumes.data.ingress[1].source.secret: secret://user/web: its value in fuzz_multinode_secrets is not "
        "HTTP credentials: it must be a mapping of username and password")


def test_s3_credentials_and_the_secrets_a_run_gives_its_transfers():
    secrets = {
        "user/s3": {"access_key_id": "AKIA", "secret_access_key": "s"},
        "user/out": {"access_key_id": "AKIA", "secret_access_key": "s", "region": "eu-west-1",
                     "endpoint_url": "http://minio:9000", "session_token": ""},
        "user/web": {"username": "u", "password": "p"},
        "user/half": {"access_key_id": "AKIA"},
        "user/empty": {"access_key_id": "", "secret_access_key": "s"},
        "user/extra": {"access_key_id": "A", "secret_access_key": "s", "bucket": "b"},
        "user/token": "a string",
    }
    assert s3_secret_names(secrets) == ["user/out", "user/s3"]
    assert not s3_credentials(["access_key_id", "secret_access_key"])
    assert s3_secret_names("not a mapping") == []
    assert transfer_secrets(secrets, PLAN) == {name: secrets[name] for name in ("user/s3", "user/out", "user/web")}
    assert transfer_secrets(None, PLAN) == {}


def test_the_fuzzfile_task_refuses_a_transfer_secret_naming_the_file_and_field(tmp_path):
    from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import load_fuzzfile
    path = tmp_path / "wf.yml"
    path.write_text(fuzzfile(ingress=[dict(item("s3://b/k", "file://k"),
                                           source={"uri": "s3://b/k", "secret": "secret://user/s3"})]))
    result, warnings = load_fuzzfile(dict(path=str(path), secret_names=["user/s3"], s3_secret_names=["user/s3"]))
    assert [v["volume"] for v in result["transfers"]] == ["data"] and warnings == []
    with pytest.raises(FuzzfileError) as info:
        load_fuzzfile(dict(path=str(path), secret_names=["user/s3"], s3_secret_names=[]))
    assert str(info.value).startswith(
        "%s: volumes.data.ingress[0].source.secret: secret://user/s3: its value in fuzz_multinode_secrets is "
        "not S3 credentials" % path)
