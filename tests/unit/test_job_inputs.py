"""Job inputs carried out on the nodes: secret:// env values, job files and
cwd. The controller's part (the run policy and job_spec: references, the missing-secret check,
the files plan) and the node runtime's pure parts (resolving secrets,
writing files as the calling user, checking cwd, removing what it created).
The whole path, as the job user on real nodes, is the Molecule scenario
default (molecule/default/tests/test_job_inputs.py)."""

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from multinode_runtime import cli, inputs, registry
from multinode_runtime.errors import RuntimeFailure
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.filter.job_secrets import job_secrets
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    Job,
    TaskArray,
    admission,
    admit,
    admit_once,
    check_secret_arguments,
    check_secrets,
    image_secret_name,
    missing_secrets,
    parse_workflow,
    registry_credentials,
    registry_secret_names,
    secret_references,
    select_job,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import (
    plan_files,
    plan_job,
)

ROOT = Path(__file__).resolve().parents[2]

WRAPPER = "/multinode/ssh-wrapper"
NODES = [{"node": "node-1", "address": "10.0.0.1"}, {"node": "node-2", "address": "10.0.0.2"}]


def make_job(**fields):
    base = dict(name="solve", image_uri="docker://alpine", command=["true"], nodes=2,
                implementation="generic")
    base.update(fields)
    return Job(**base)


def plan(job, **kwargs):
    return plan_job(job, NODES[:job.nodes], user="fuzz", wrapper_path=WRAPPER, kill_grace=10,
                    **kwargs)


def typed(spec):
    """The spec as the node runtime reads it from spec.json."""
    return JobSpec.from_dict(spec)


# ---------------------------------------------------------------------------
# secret references (controller)


def test_secret_references_are_the_env_values_starting_with_secret_scheme():
    job = make_job(env=[("PLAIN", "x"), ("TOKEN", "secret://user/token"),
                        ("NOT_A_REF", "see secret://user/x"), ("DB", "secret://group/db")])
    assert secret_references(job) == {"TOKEN": "user/token", "DB": "group/db"}


def test_secret_references_skip_keys_the_runtime_sets():
    """Their job value is dropped, so their secret is never needed."""
    job = make_job(env=[("RANK", "secret://user/r"), ("HOSTNAME", "secret://user/h"),
                        ("MULTINODE_HOSTLIST", "secret://user/m"), ("OK", "secret://user/ok")])
    assert secret_references(job) == {"OK": "user/ok"}
    # Without multinode the runtime sets HOSTNAME only.
    single = make_job(nodes=1, implementation=None, env=[("RANK", "secret://user/r")])
    assert secret_references(single) == {"RANK": "user/r"}


def test_missing_secrets_name_job_key_and_reference():
    job = make_job(env=[("TOKEN", "secret://user/token"), ("DB", "secret://group/db"),
                        ("HAVE", "secret://user/have")])
    assert missing_secrets(job, ["user/have", "user/other", 7]) == [
        "jobs.solve.env.TOKEN: secret://user/token is not defined in fuzz_multinode_secrets",
        "jobs.solve.env.DB: secret://group/db is not defined in fuzz_multinode_secrets",
    ]
    assert missing_secrets(job, ["user/token", "group/db", "user/have"]) == []


def test_check_secrets_message_lists_every_missing_one_and_says_where_they_go():
    job = make_job(env=[("TOKEN", "secret://user/token"), ("DB", "secret://group/db")])
    with pytest.raises(FuzzfileError) as info:
        check_secrets(job, {})
    assert str(info.value) == (
        "jobs.solve.env.TOKEN: secret://user/token is not defined in fuzz_multinode_secrets; "
        "jobs.solve.env.DB: secret://group/db is not defined in fuzz_multinode_secrets "
        "(fuzz_multinode_secrets maps each secret name, such as user/token, to its value; "
        "keep it in a vault-encrypted vars file and pass it with -e @FILE)")
    check_secrets(job, ["user/token", "group/db"])  # all there: no error


def test_plan_keeps_references_on_every_rank_and_lists_them():
    job = make_job(env=[("TOKEN", "secret://user/token"), ("PLAIN", "x")])
    spec = plan(job, secret_names=["user/token"])
    assert [r["env"]["TOKEN"] for r in spec["ranks"]] == ["secret://user/token"] * 2
    assert spec["secret_env"] == {"TOKEN": "user/token"}
    assert spec["secret_args"] == []


def test_plan_refuses_a_missing_secret_only_when_names_are_given():
    job = make_job(env=[("TOKEN", "secret://user/token")])
    with pytest.raises(FuzzfileError, match=r"^jobs\.solve\.env\.TOKEN: secret://user/token is not"):
        plan(job, secret_names=["user/other"])
    assert plan(job)["secret_env"] == {"TOKEN": "user/token"}  # checked by whoever delivers


# ---------------------------------------------------------------------------
# image.secret: registry credentials (controller)

REGISTRY_REFUSED = (
    "jobs.solve.image.secret: the value of secret://user/registry in fuzz_multinode_secrets "
    "is not registry credentials: it must be a mapping of username and password (a password "
    "or token), both non-empty strings, the user name without ':'")


def test_an_image_secret_not_defined_is_missing_like_an_env_one():
    job = make_job(env=[("TOKEN", "secret://user/token")], image_secret="secret://user/registry")
    assert image_secret_name(job) == "user/registry"
    assert missing_secrets(job, []) == [
        "jobs.solve.env.TOKEN: secret://user/token is not defined in fuzz_multinode_secrets",
        "jobs.solve.image.secret: secret://user/registry is not defined in fuzz_multinode_secrets",
    ]
    assert missing_secrets(job, ["user/token", "user/registry"]) == []
    assert image_secret_name(make_job()) is None


@pytest.mark.parametrize("value, is_credentials", [
    ({"username": "fuzz", "password": "s3cret:with:colons"}, True),
    ({"username": "oauth2accesstoken", "password": "ya29.token"}, True),
    ("fuzz:s3cret", False),                           # a plain string: no user name
    ({"username": "fuzz"}, False),                    # no password
    ({"user": "fuzz", "password": "p"}, False),       # not the key
    ({"username": "fuzz", "password": "p", "email": "e"}, False),  # an unknown key
    ({"username": "", "password": "p"}, False),
    ({"username": "fuzz", "password": ""}, False),
    ({"username": "fu:zz", "password": "p"}, False),  # USER:PASSWORD could not be split
    ({"username": "fuzz", "password": 1234}, False),  # quote it in YAML
    (None, False),
])
def test_registry_credentials_are_a_mapping_of_username_and_password(value, is_credentials):
    assert registry_credentials(value) is is_credentials
    assert registry_secret_names({"user/registry": value, "user/token": "t"}) == (
        ["user/registry"] if is_credentials else [])


def test_an_image_secret_that_is_not_registry_credentials_is_refused_naming_it():
    job = make_job(image_secret="secret://user/registry")
    with pytest.raises(FuzzfileError) as info:
        admit(job, ["user/registry"], [])
    assert str(info.value) == REGISTRY_REFUSED
    admit(job, ["user/registry"], ["user/registry"])
    admit(make_job(), [], [])  # no image.secret: nothing to check
    # Not defined at all: said so first, as for an env reference.
    with pytest.raises(FuzzfileError, match=r"^jobs\.solve\.image\.secret: secret://user/registry is "
                                            r"not defined in fuzz_multinode_secrets \("):
        admit(job, [], [])


def test_an_admitted_job_is_checked_again_only_against_names_it_was_not():
    job = make_job(image_secret="secret://user/registry")
    record = admission(job, ["user/registry"], ["user/registry"])
    assert record["registry_secret_names"] == ["user/registry"]
    assert admit_once(job, record, ["user/registry"], ["user/registry"]) is job
    with pytest.raises(FuzzfileError) as info:  # the value changed since: no credentials now
        admit_once(job, record, ["user/registry"], [])
    assert str(info.value) == REGISTRY_REFUSED
    unchecked = admission(job, ["user/registry"])
    with pytest.raises(FuzzfileError):
        admit_once(job, unchecked, ["user/registry"], [])


def test_the_spec_names_the_image_secret_only_where_the_image_is_pulled():
    job = make_job(image_secret="secret://user/registry")
    spec = plan(job, secret_names=["user/registry"], registry_secret_names=["user/registry"])
    assert spec["image"] == {"uri": "docker://alpine", "secret": "user/registry"}
    assert spec["secret_env"] == {}
    assert typed(spec).image["secret"] == "user/registry"
    assert plan(job, execution="host")["image"] == {"uri": "docker://alpine", "secret": None}
    with pytest.raises(FuzzfileError) as info:
        plan(job, secret_names=["user/registry"], registry_secret_names=[])
    assert str(info.value) == REGISTRY_REFUSED


def test_the_nodes_get_the_values_of_the_env_and_image_secrets_and_no_other():
    secrets = {"user/token": "t", "user/registry": {"username": "u", "password": "p"}, "user/other": "o"}
    job = make_job(env=[("TOKEN", "secret://user/token")], image_secret="secret://user/registry")
    spec = plan(job)
    assert job_secrets(secrets, spec) == {"user/token": "t", "user/registry": {"username": "u", "password": "p"}}
    assert job_secrets(secrets, plan(job, execution="host")) == {"user/token": "t"}
    assert job_secrets(secrets, plan(make_job())) == {}


SECRET_ARGUMENTS = [
    (["curl", "-H", "Authorization: Bearer $TOKEN"], [], "command[2]", 2,
     [["text", "Authorization: Bearer "], ["secret", "user/token"]]),
    (["curl"], ["$WHO:${TOKEN}@$TOKEN."], "args[0]", 1,
     [["text", "me:"], ["secret", "user/token"], ["text", "@"], ["secret", "user/token"], ["text", "."]]),
    (None, ["plain", "$TOKEN"], "args[1]", 1, [["secret", "user/token"]]),  # script mode: args only
]


def secret_argument_job(command, args):
    return make_job(env=[("TOKEN", "secret://user/token"), ("WHO", "me")], command=command,
                    script="#!/bin/sh\necho \"$1\"\n" if command is None else None, args=args)


@pytest.mark.parametrize("command, args, field, index, parts", SECRET_ARGUMENTS)
def test_an_argument_expanding_a_secret_is_run_with_a_warning_naming_it(command, args, field, index, parts):
    """Runs have PID namespaces of their own: other jobs cannot read a
    rank's command line, users logged in on its node can (ps); the spec
    holds the argument's parts, never a value."""
    job = secret_argument_job(command, args)
    assert check_secret_arguments(job) == [
        "jobs.solve.%s: expands the secret:// env value TOKEN: users logged in on the job's nodes can "
        "read it in the rank's command line (ps); other jobs cannot" % field]
    admit(job, ["user/token"])
    spec = plan(job, secret_names=["user/token"])
    assert spec["secret_args"] == [{"index": index, "parts": parts}]
    assert "secret://user/token" in spec["argv"][index]  # the reference, as the env holds it
    assert typed(spec).secret_names() == {"user/token"}


@pytest.mark.parametrize("command, args, field, index, parts", SECRET_ARGUMENTS)
def test_a_site_may_refuse_an_argument_expanding_a_secret_naming_it(command, args, field, index, parts):
    """fuzz_multinode_secret_arguments: refuse, the refusal of old (issue 12)."""
    with pytest.raises(FuzzfileError) as info:
        admit(secret_argument_job(command, args), ["user/token"], None, "refuse")
    assert str(info.value) == (
        "jobs.solve.%s: expands a secret:// env value, and every user of a node can read a "
        "process's command line (ps); read the secret from the job's environment instead "
        "(fuzz_multinode_secret_arguments: refuse)" % field)


def test_the_secret_arguments_setting_is_allow_or_refuse():
    with pytest.raises(FuzzfileError) as info:
        check_secret_arguments(make_job(), "deny")
    assert str(info.value) == ("secret_arguments (fuzz_multinode_secret_arguments): must be allow or refuse, "
                               "got 'deny'")
    assert check_secret_arguments(make_job(), "refuse") == []  # nothing expands a secret: nothing to refuse


def test_the_node_builds_the_argument_from_its_parts_and_the_value(jobs_dir):
    """The value arrives on the node apart from the spec; only job_argv,
    in the process that starts the rank's command, puts it in."""
    job = secret_argument_job(["curl"], ["$WHO:${TOKEN}@$TOKEN.", "-v"])
    spec = plan(job, secret_names=["user/token"])
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": "v a l$ue"}))
    assert "v a l$ue" not in json.dumps(spec)
    assert inputs.job_argv(typed(spec)) == ["curl", "me:v a l$ue@v a l$ue.", "-v"]
    script = plan(secret_argument_job(None, ["plain", "$TOKEN"]), secret_names=["user/token"])
    script["job"] = "other"
    register(jobs_dir, script)
    (jobs_dir / "other" / "secrets.json").write_text(json.dumps({"user/token": "v a l$ue"}))
    assert inputs.job_argv(typed(script)) == ["plain", "v a l$ue"]


def test_a_message_about_the_program_names_a_secrets_reference_never_its_value():
    spec = typed(plan(secret_argument_job(["$TOKEN", "-v"], []), secret_names=["user/token"]))
    assert spec.secret_args[0].index == 0
    assert inputs.program_shown(spec, spec.ranks[0], ["t0ken", "-v"]) == "secret://user/token"
    plain = typed(plan(secret_argument_job(["curl", "$TOKEN"], []), secret_names=["user/token"]))
    assert inputs.program_shown(plain, plain.ranks[0], ["/usr/bin/curl", "t0ken"]) == "/usr/bin/curl"


def test_the_node_refuses_secret_args_it_cannot_build_without_showing_a_value(jobs_dir):
    spec = dict(secret_spec(), secret_args=[{"index": 5, "parts": [["secret", "user/token"]]}])
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": "t0ken"}))
    with pytest.raises(RuntimeFailure) as info:
        inputs.job_argv(typed(spec))
    assert str(info.value) == "malformed job spec (secret_args: argument 5 of 2)"
    with pytest.raises(RuntimeFailure) as info:
        typed(dict(spec, secret_args=[{"index": 1, "parts": [["value", "user/token"]]}]))
    assert str(info.value).startswith("malformed job spec (secret_args: ")


def test_a_task_array_gets_each_tasks_own_argument_parts(jobs_dir):
    from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_task_array
    job = make_job(nodes=1, implementation=None, env=[("TOKEN", "secret://user/token")],
                   command=["fetch", "--as=task-$FB_TASK_ID:$TOKEN"],
                   task_array=TaskArray(start=1, end=2, concurrency=None))
    spec = plan_task_array(job, NODES[:1], user="fuzz", wrapper_path=WRAPPER, kill_grace=10,
                           secret_names=["user/token"])
    assert [task["secret_args"] for task in spec["ranks"]] == [
        [{"index": 1, "parts": [["text", "--as=task-%d:" % t], ["secret", "user/token"]]}] for t in (1, 2)]
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": "t0ken"}))
    task = typed(spec).ranks[1]
    assert inputs.job_argv(typed(spec).with_changes(argv=task.argv, secret_args=task.secret_args)) == [
        "fetch", "--as=task-2:t0ken"]
    assert typed(spec).secret_names() == {"user/token"}


# ---------------------------------------------------------------------------
# files plan (controller)


def test_files_plan_takes_the_contents_from_the_top_level_files():
    workflow = parse_workflow(
        "version: v4\n"
        "files:\n  conf: \"a\\tb\\r\\nno newline \\u00fc\"\n  other: unused\n"
        "jobs:\n  solve:\n    image: {uri: docker://x}\n    command: [\"true\"]\n"
        "    files: {/tmp/x/solver.conf: 'file://conf', /tmp/copy: 'file://conf'}\n")
    job = select_job(workflow, "solve")
    expected = [
        {"path": "/tmp/x/solver.conf", "name": "conf", "contents": "a\tb\r\nno newline \u00fc"},
        {"path": "/tmp/copy", "name": "conf", "contents": "a\tb\r\nno newline \u00fc"},
    ]
    assert plan_files(job, workflow.files) == expected
    assert plan_job(job.to_dict(), NODES[:1], user="fuzz", wrapper_path=WRAPPER, kill_grace=10,
                    files=workflow.files)["files"] == expected
    assert plan_files(make_job(), None) == []


@pytest.mark.parametrize("files, message", [
    (None, "jobs.solve.files./tmp/a: no entry 'conf' in the workflow's top-level files (none given)"),
    ({"x": "1", "y": "2"}, "jobs.solve.files./tmp/a: no entry 'conf' in the workflow's top-level "
                           "files (x, y)"),
    ({"conf": 5}, "files.conf: must be the file's contents as a string, got int"),
])
def test_files_plan_refuses_missing_or_bad_contents(files, message):
    with pytest.raises(FuzzfileError) as info:
        plan_files(make_job(files={"/tmp/a": "conf"}), files)
    assert str(info.value) == message


@pytest.mark.parametrize("path", ["/", "/tmp/", "/tmp//a", "/tmp/./a", "/tmp/../etc/a", "/tmp/a/."])
def test_files_plan_refuses_paths_that_are_not_normalized(path):
    with pytest.raises(FuzzfileError) as info:
        plan_files(make_job(files={path: "conf"}), {"conf": "x"})
    assert str(info.value) == (
        "jobs.solve.files.%s: must be a normalized absolute file path (no '.', '..' or empty "
        "components, no trailing '/')" % path)


# ---------------------------------------------------------------------------
# node runtime: secrets


@pytest.fixture
def jobs_dir(tmp_path, monkeypatch):
    """The runtime's job registry in a temporary directory."""
    monkeypatch.setattr(registry, "JOBS_DIR", str(tmp_path / "jobs"))
    return tmp_path / "jobs"


def register(jobs_dir, spec):
    directory = jobs_dir / spec["job"]
    directory.mkdir(parents=True)
    (directory / "spec.json").write_text(json.dumps(spec))
    return directory


def secret_spec():
    job = make_job(env=[("TOKEN", "secret://user/token"), ("PLAIN", "x")],
                   command=["/bin/echo", "--token"])
    return plan(job)


def test_secret_values_reach_the_env_of_every_rank(jobs_dir, monkeypatch):
    spec = secret_spec()
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": "v a l$ue"}))
    user = pwd.getpwuid(os.getuid())
    for rank in typed(spec).ranks:
        env = inputs.job_environment(typed(spec), rank, user)
        assert (env["TOKEN"], env["PLAIN"]) == ("v a l$ue", "x")
    assert inputs.job_argv(typed(spec)) == ["/bin/echo", "--token"]
    # The spec itself (spec.json, readable by the job user) never holds it.
    assert "v a l$ue" not in (directory / "spec.json").read_text()


def test_a_secret_not_delivered_fails_the_rank_naming_it(jobs_dir):
    spec = secret_spec()
    register(jobs_dir, spec)
    user = pwd.getpwuid(os.getuid())
    with pytest.raises(RuntimeFailure, match=r"^the value of secret://user/token was not "
                       r"delivered to node "):
        inputs.job_environment(typed(spec), typed(spec).ranks[1], user)


@pytest.mark.parametrize("value, message", [
    (["a"], "secret://user/token: its value in fuzz_multinode_secrets must be a string"),
    ("a\0b", "secret://user/token: its value contains a NUL character, which an environment "
             "variable cannot hold"),
])
def test_a_bad_secret_value_fails_without_showing_it(jobs_dir, value, message):
    spec = secret_spec()
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": value}))
    with pytest.raises(RuntimeFailure) as info:
        inputs.job_environment(typed(spec), typed(spec).ranks[0], pwd.getpwuid(os.getuid()))
    assert str(info.value) == message


def test_an_integer_secret_value_is_used_as_its_digits(jobs_dir):
    spec = secret_spec()
    directory = register(jobs_dir, spec)
    (directory / "secrets.json").write_text(json.dumps({"user/token": 1234}))
    env = inputs.job_environment(typed(spec), typed(spec).ranks[0], pwd.getpwuid(os.getuid()))
    assert env["TOKEN"] == "1234"


def test_secrets_command_keeps_only_the_referenced_values_root_only(jobs_dir, monkeypatch):
    spec = secret_spec()
    directory = register(jobs_dir, spec)
    monkeypatch.setattr(sys, "stdin", _Stdin({"user/token": "t", "user/other": "o"}))
    cli.cmd_secrets([spec["job"]])
    stored = directory / "secrets.json"
    assert json.loads(stored.read_text()) == {"user/token": "t"}
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


def test_secrets_command_names_a_missing_value_never_a_given_one(jobs_dir, monkeypatch):
    spec = secret_spec()
    register(jobs_dir, spec)
    monkeypatch.setattr(sys, "stdin", _Stdin({"user/other": "hidden-value"}))
    with pytest.raises(RuntimeFailure) as info:
        cli.cmd_secrets([spec["job"]])
    assert str(info.value) == "secrets: no value given for secret://user/token"


class _Stdin:
    def __init__(self, data):
        self.text = json.dumps(data)

    def read(self, *args):
        text, self.text = self.text, ""
        return text


# ---------------------------------------------------------------------------
# node runtime: files and cwd


def me():
    return pwd.getpwuid(os.getuid())


def files_spec(tmp_path, files, cwd="/"):
    spec = plan(make_job())
    spec["files"] = [{"path": str(path), "name": "f", "contents": contents}
                     for path, contents in files]
    spec["cwd"] = cwd
    return spec


def test_files_are_written_byte_exact_with_their_parents_and_removed_at_cleanup(tmp_path, jobs_dir):
    contents = "line one\r\n\ttab \u00fc \\n {{ not_templated }} no newline at end"
    target = tmp_path / "new" / "deeper" / "job.conf"
    kept = tmp_path / "kept.conf"
    kept.write_text("old contents, longer than the new ones")
    spec = files_spec(tmp_path, [(target, contents), (kept, "new")], cwd=str(tmp_path))
    register(jobs_dir, spec)
    inputs.prepare_inputs(typed(spec), "node-1", me())
    assert target.read_bytes() == contents.encode("utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert kept.read_text() == "new"  # the job user's own file: overwritten
    inputs.remove_job_files(spec["job"], me())
    # What prepare created is gone, directories included; the job user's
    # existing file stays (with the job's contents).
    assert not (tmp_path / "new").exists()
    assert kept.read_text() == "new"
    assert not (jobs_dir / spec["job"] / "created.json").exists()


def test_cleanup_keeps_a_created_directory_the_job_filled(tmp_path, jobs_dir):
    target = tmp_path / "new" / "job.conf"
    spec = files_spec(tmp_path, [(target, "x")])
    register(jobs_dir, spec)
    inputs.prepare_inputs(typed(spec), "node-1", me())
    (tmp_path / "new" / "result.dat").write_text("the job's output")
    inputs.remove_job_files(spec["job"], me())
    assert sorted(os.listdir(tmp_path / "new")) == ["result.dat"]


def test_paths_that_are_not_the_job_users_to_write_fail_before_the_job_starts(
        tmp_path, jobs_dir, monkeypatch):
    """Every problem of the node in one message naming node, rank, paths and
    reasons; nothing is followed or overwritten, and what was created before
    the failure is still recorded for cleanup."""
    (tmp_path / "plain").write_text("a file, not a directory")
    (tmp_path / "target").write_text("the link's target")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    others = tmp_path / "others.conf"
    others.write_text("someone else's")
    good = tmp_path / "made" / "good.conf"
    spec = files_spec(tmp_path, [
        (good, "ok"),
        (tmp_path / "plain" / "below.conf", "x"),
        (tmp_path / "link", "x"),
        (tmp_path / "fifo", "x"),
        (others, "x"),
    ], cwd=str(tmp_path / "no-such-dir"))
    register(jobs_dir, spec)
    user, owner = me(), inputs._owner(os.getuid())
    others_mtime = others.stat().st_mtime_ns
    # Files owned by the test user are someone else's to a job user with
    # another uid: run prepare's checks as that user.
    with monkeypatch.context() as patch, pytest.raises(RuntimeFailure) as info:
        patch.setattr(inputs.os, "getuid", lambda: user.pw_uid + 1)
        inputs.prepare_inputs(typed(spec), "node-2", user)
    head = "job solve cannot start on node node-2 (rank 1, solve-1) as user %s: " % user.pw_name
    message = str(info.value)
    assert message.startswith(head)
    assert message[len(head):].split("; ") == [
        "jobs.solve.files.%s/plain/below.conf: cannot write it: Not a directory" % tmp_path,
        "jobs.solve.files.%s/link: exists as a symbolic link, which is never followed" % tmp_path,
        "jobs.solve.files.%s/fifo: exists and is not a regular file" % tmp_path,
        "jobs.solve.files.%s: exists and belongs to %s, not to the job user, so it is never "
        "overwritten" % (others, owner),
        "jobs.solve.cwd: %s/no-such-dir: no such directory" % tmp_path,
    ]
    assert (tmp_path / "target").read_text() == "the link's target"
    assert others.read_text() == "someone else's" and others.stat().st_mtime_ns == others_mtime
    assert good.read_text() == "ok"
    inputs.remove_job_files(spec["job"], me())
    assert not (tmp_path / "made").exists()


@pytest.mark.parametrize("make, reason", [
    (lambda p: p.write_text("x"), "not a directory"),
    (lambda p: None, "no such directory"),
])
def test_an_unusable_cwd_fails_naming_cwd_node_and_rank(tmp_path, jobs_dir, make, reason):
    cwd = tmp_path / "cwd"
    make(cwd)
    spec = files_spec(tmp_path, [], cwd=str(cwd))
    register(jobs_dir, spec)
    with pytest.raises(RuntimeFailure) as info:
        inputs.prepare_inputs(typed(spec), "node-1", me())
    assert str(info.value) == (
        "job solve cannot start on node node-1 (rank 0, solve-0) as user %s: "
        "jobs.solve.cwd: %s: %s" % (me().pw_name, cwd, reason))


def test_a_job_without_files_or_cwd_touches_nothing(jobs_dir, monkeypatch):
    spec = plan(make_job())
    register(jobs_dir, spec)
    monkeypatch.setattr(inputs, "run_as", lambda *a: pytest.fail("nothing to do as the job user"))
    inputs.prepare_inputs(typed(spec), "node-1", me())


# ---------------------------------------------------------------------------
# the fuzzfile module refuses a missing secret before any host is touched


def test_fuzzfile_module_refuses_a_job_whose_secret_is_not_defined(tmp_path):
    fuzzfile = tmp_path / "job.yml"
    fuzzfile.write_text(yaml.safe_dump({"version": "v4", "jobs": {"solve": {
        "image": {"uri": "docker://alpine"}, "command": ["true"],
        "env": ["TOKEN=secret://user/token", "DB=secret://group/db"]}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: missing
      fuzz.multinode.fuzzfile:
        path: %(f)s
        secret_names: [group/db]
      ignore_errors: true
    - name: present
      fuzz.multinode.fuzzfile:
        path: %(f)s
        secret_names: [group/db, user/token]
""" % {"f": fuzzfile})
    ansible_playbook = shutil.which("ansible-playbook") or os.path.join(
        os.path.dirname(sys.executable), "ansible-playbook")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([ansible_playbook, str(playbook)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    tasks = {t["task"]["name"]: t["hosts"]["localhost"]
             for t in json.loads(proc.stdout)["plays"][0]["tasks"]}
    assert tasks["missing"]["msg"] == (
        "%s: jobs.solve.env.TOKEN: secret://user/token is not defined in fuzz_multinode_secrets "
        "(fuzz_multinode_secrets maps each secret name, such as user/token, to its value; "
        "keep it in a vault-encrypted vars file and pass it with -e @FILE)" % fuzzfile)
    assert not tasks["present"].get("failed"), tasks["present"]
