"""The shapes of the vendor's own published Fuzzfiles (spec
fuzzfile-reference.md, section 7), in Fuzzfiles of our own written the same
way (tests/fuzzfiles/vendor-shapes/): each is accepted with a precise meaning
in the normalized model (mount locations and volume names, argv strings, the
probe's scheme and named port, a service's endpoints, files given in place, a
service's policy), or refused with a
message naming the field and what is wrong. FB_WORKFLOW_ID in their paths
expands to the run's id in the job spec."""

import json
import os
import pwd
from pathlib import Path

import pytest
from multinode_runtime import inputs, registry
from multinode_runtime.spec import JobSpec

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    Dependency,
    Endpoint,
    FuzzfileError,
    Port,
    Transfer,
    Volume,
    load_job,
    load_workflow,
    parse_workflow,
    select_job,
    select_run,
    transfer_plan,
    volume_relative_path,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_job

SHAPES = Path(__file__).resolve().parents[1] / "fuzzfiles" / "vendor-shapes"
RUN = "20261201T165012Z-a1b2c3"
SERVICE_POLICY_NOTE = (
    "a service has no policy in Fuzzball (its API drops it); validated as a job's and ignored"
)


def text(name):
    return (SHAPES / name).read_text(encoding="utf-8")


def load(name, old=None, new=None):
    source = text(name)
    if old is not None:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return parse_workflow(source)


def error(name, old, new):
    with pytest.raises(FuzzfileError) as info:
        load(name, old, new)
    return str(info.value)


def plan(job, count=1, **kwargs):
    """The job spec, from the job's JSON form as the rank_plan task gets it."""
    nodes = [{"node": "node-%d" % i, "address": "10.0.0.%d" % (i + 1)} for i in range(count)]
    return plan_job(json.loads(json.dumps(job.to_dict())), nodes, user="fuzz",
                    wrapper_path="/multinode/ssh-wrapper", kill_grace=10, **kwargs)


def round_trips(workflow):
    assert load_workflow(json.loads(json.dumps(workflow.to_dict()))) == workflow
    for unit in workflow.units.values():
        assert load_job(json.loads(json.dumps(unit.to_dict()))) == unit


# ---------------------------------------------------------------------------
# OpenFOAM-like, v1: a named volume, the v1 and the short mount forms


def test_openfoam_v1_every_mount_form_is_one_mount_model():
    wf = load("openfoam-v1.yml")
    jobs = wf.jobs
    # the v1 form (prepare-case, post-process) and the short form (mesh,
    # solve) of the same mount are the same model: location -> volume name
    assert jobs["prepare-case"].mounts == {"/data": "case-data"}
    assert jobs["mesh"].mounts == {"/data": "case-data", "/scratch": "scratch"}
    assert jobs["solve"].mounts == {"/data": "case-data"}
    assert jobs["post-process"].mounts == {"/data": "case-data", "/scratch": "scratch"}
    assert [j.cwd for j in jobs.values()] == ["/data", "/data/case", "/data/case", "/data/case"]
    assert all(j.unsupported == [] for j in jobs.values())
    assert jobs["mesh"].volumes == {"case-data": "ephemeral", "scratch": "ephemeral"}
    solve = jobs["solve"]
    assert (solve.nodes, solve.implementation, solve.cores) == (2, "openmpi", 2)
    assert [j.name for j in select_run(wf)] == ["prepare-case", "mesh", "solve", "post-process"]
    assert solve.depends_on == [Dependency("mesh", "FINISHED")]
    round_trips(wf)


def test_a_v1_volume_is_named_by_its_key_and_another_inner_name_is_ignored_with_a_warning():
    wf = load("openfoam-v1.yml")
    # case-data's name is its key (the vendor's usual form): no warning
    assert [w for w in wf.warnings if w.startswith("volumes.")] == [
        "volumes.scratch.name: 'scratch-space' ignored: a v1 volume is named by its key, "
        "'scratch', which mounts name"
    ]
    # mounts name the key, not the inner name
    assert error("openfoam-v1.yml", "      /scratch: scratch\n", "      /scratch: scratch-space\n") == (
        "jobs.mesh.mounts./scratch: no volume named 'scratch-space' under volumes "
        "(case-data, scratch)"
    )
    assert error("openfoam-v1.yml", "    name: case-data\n", "    name: 7\n") == (
        "volumes.case-data.name: must be a string, got 7 (quote it in YAML)"
    )


@pytest.mark.parametrize(
    "old, new, message",
    [
        # the short form's key is the location, its value the volume
        ("      /data: case-data\n      /scratch: scratch\n",
         "      case-data: /data\n",
         "jobs.mesh.mounts: keys of the short form /path: VOLUME must be absolute mount paths, "
         "got 'case-data' (the short form is /path: VOLUME: the location first)"),
        ("      /data: case-data\n      /scratch: scratch\n",
         "      /data: case-data\n      /scratch: ''\n",
         "jobs.mesh.mounts./scratch: must not be empty"),
        # two mounts at one location, in the v1 and the short form
        ("      /data: case-data\n      /scratch: scratch\n",
         "      /data: case-data\n      scratch:\n        location: /data\n",
         "jobs.mesh.mounts.scratch.location: '/data' is already the mount point of volume "
         "'case-data'"),
        # the v4 form stays v4's
        ("      /data: case-data\n      /scratch: scratch\n",
         "      /data:\n        volume: case-data\n",
         "jobs.mesh.mounts./data: must be a mapping with 'location', got a mapping (that is the "
         "v4 form; a v1 Fuzzfile mounts VOLUME: {location: /path})"),
        # a relative location, in either form
        ("    cwd: /data\n    mounts:\n      case-data:\n        location: /data\n",
         "    cwd: /data\n    mounts:\n      case-data:\n        location: data\n",
         "jobs.prepare-case.mounts.case-data.location: must be an absolute path, got 'data'"),
        ("      /data: case-data\n    requires: [mesh]\n",
         "      data: case-data\n    requires: [mesh]\n",
         "jobs.solve.mounts: keys of the short form /path: VOLUME must be absolute mount paths, "
         "got 'data'"),
    ],
)
def test_openfoam_v1_mount_refusals(old, new, message):
    assert error("openfoam-v1.yml", old, new) == message


def test_the_run_id_reaches_a_multinode_command_in_the_volume_path():
    solve = load("openfoam-v1.yml").jobs["solve"]
    spec = plan(solve, count=2, run=RUN)
    assert spec["argv"] == ["/bin/sh", "-c", "pipeFoam -parallel > /data/case/log.%s" % RUN]
    assert spec["run"] == RUN


# ---------------------------------------------------------------------------
# BLAST-like, v1: bare numbers in a command list


def test_blast_bare_numbers_are_arguments_kept_as_written():
    search = load("blast-v1.yml").jobs["search"]
    assert search.command == [
        "blastp", "-num_threads", "8", "-evalue", "1.0e-5", "-max_target_seqs", "500",
        "-query", "/data/queries/q.fsa",
    ]
    assert search.args == ["-db", "/data/db/proteins", "-out",
                           "/data/results/${FB_WORKFLOW_ID}/blastp.out", "-word_size", "3"]
    assert {type(word) for word in search.command + search.args} == {str}
    assert load_job(json.loads(json.dumps(search.to_dict()))) == search


def test_blast_the_run_id_expands_in_command_and_args():
    wf = load("blast-v1.yml")
    assert plan(wf.jobs["make-dirs"], run=RUN)["argv"] == [
        "mkdir", "-p", "queries", "db", "results/%s" % RUN]
    assert plan(wf.jobs["search"], run=RUN)["argv"] == [
        "blastp", "-num_threads", "8", "-evalue", "1.0e-5", "-max_target_seqs", "500",
        "-query", "/data/queries/q.fsa", "-db", "/data/db/proteins", "-out",
        "/data/results/%s/blastp.out" % RUN, "-word_size", "3",
    ]


@pytest.mark.parametrize(
    "written",
    ["8", "0", "-3", "+4", "0x10", "0o17", "1_000", "1.50", ".5", "1e3", "6.02e+23", ".inf",
     "-.INF", ".nan", "1:20"],
)
def test_a_number_argument_is_its_yaml_text_whatever_the_yaml_version_makes_of_it(written):
    wf = load("blast-v1.yml", "-num_threads, 8,", "-num_threads, %s," % written)
    assert wf.jobs["search"].command[2] == written


@pytest.mark.parametrize(
    "written, shown",
    [("true", "true (quote it in YAML)"), ("False", "false (quote it in YAML)"),
     ("null", "null"), ("~", "null"), ("[8]", "a list"), ("{n: 8}", "a mapping")],
)
def test_booleans_null_and_collections_are_not_arguments(written, shown):
    assert error("blast-v1.yml", "-num_threads, 8,", "-num_threads, %s," % written) == (
        "jobs.search.command[2]: must be a string or a number, got %s" % shown
    )
    assert error("blast-v1.yml", "-word_size, 3]", "-word_size, %s]" % written) == (
        "jobs.search.args[5]: must be a string or a number, got %s" % shown
    )


# ---------------------------------------------------------------------------
# a job and services, v4: probe scheme, service policy, files in place, mounts


def test_web_services_readiness_probes_are_normalized_with_the_scheme_upper_case():
    wf = load("web-services-v4.yml")
    api, admin = wf.service_defs["api"], wf.service_defs["admin"]
    assert api.readiness_probe == {
        "http-get": {"port": 8080, "path": "/healthz", "scheme": "HTTP"},
        "initial-delay-seconds": 5,
        "period-seconds": 10,
    }
    assert admin.readiness_probe == {
        "http-get": {"port": 9443, "scheme": "HTTPS",
                     "http-headers": [{"name": "X-Probe", "value": "ready"}]},
    }
    # no scheme: HTTP, Kubernetes' default
    wf = load("web-services-v4.yml", "        scheme: Https\n", "")
    assert wf.service_defs["admin"].readiness_probe["http-get"]["scheme"] == "HTTP"


@pytest.mark.parametrize("scheme, model", [("http", "HTTP"), ("HTTP", "HTTP"), ("https", "HTTPS"),
                                           ("HTTPS", "HTTPS"), ("hTtP", "HTTP")])
def test_any_case_of_the_scheme_is_the_upper_case_one(scheme, model):
    wf = load("web-services-v4.yml", "scheme: http\n", "scheme: %s\n" % scheme)
    assert wf.service_defs["api"].readiness_probe["http-get"]["scheme"] == model


@pytest.mark.parametrize("scheme, shown", [("ftp", "'ftp'"), ("'HTTP/2'", "'HTTP/2'"), ("1", "1"),
                                           # upper-case of long s is S: still not HTTPS
                                           ("http\u017f", "'http\u017f'")])
def test_a_scheme_other_than_http_or_https_is_refused(scheme, shown):
    assert error("web-services-v4.yml", "scheme: http\n", "scheme: %s\n" % scheme) == (
        "services.api.readiness-probe.http-get.scheme: must be HTTP or HTTPS (any case), got %s"
        % shown
    )


def test_a_service_policy_is_validated_as_a_jobs_and_ignored():
    api = load("web-services-v4.yml").service_defs["api"]
    assert (api.timeout_seconds, api.retry_attempts, api.restart) == (None, None, None)
    assert "services.api.policy: %s" % SERVICE_POLICY_NOTE in api.unsupported
    # the job's policy keys, the job's rules
    wf = load("web-services-v4.yml", "        execute: 24h\n",
              "        execute: 24h\n      retry:\n        attempts: 2\n      restart: never\n")
    api = wf.service_defs["api"]
    assert (api.timeout_seconds, api.retry_attempts, api.restart) == (None, None, None)
    assert [note for note in api.unsupported if ".policy" in note] == [
        "services.api.policy: %s" % SERVICE_POLICY_NOTE]
    assert error("web-services-v4.yml", "        execute: 24h\n", "        execute: 1d\n") == (
        "services.api.policy.timeout.execute: must be a duration such as 2h, 10m0s, 90s or "
        "1h30m, got '1d' (unknown unit 'd'; units are ns, us, ms, s, m, h)"
    )
    assert error("web-services-v4.yml", "      timeout:\n", "      deadline:\n") == (
        "services.api.policy.deadline: unknown key; expected one of restart, retry, timeout"
    )
    # the vendor has no policy defaults for services either
    assert error("web-services-v4.yml", "defaults:\n", "defaults:\n  service:\n    policy: {}\n") == (
        "defaults.service.policy: unknown key; expected one of env, mounts, resource"
    )


def test_a_services_files_give_contents_in_place_or_reference_top_level_files():
    wf = load("web-services-v4.yml")
    api = wf.service_defs["api"]
    assert api.inline_files == {"/etc/api/api.conf": "listen = 0.0.0.0:8080\nroot = /srv/site\n"}
    assert api.files == {}
    assert wf.jobs["seed"].files == {"/etc/seed/seed.csv": "seed.csv"}
    assert wf.jobs["seed"].inline_files == {}
    assert wf.files == {"seed.csv": "id,value\n1,42\n"}  # nothing added to the workflow's files


def test_web_services_mounts_short_and_v4_forms_and_defaults_overridden_per_path():
    wf = load("web-services-v4.yml")
    # defaults.job.mounts /srv: cache, the job's short form /srv: site wins
    assert wf.jobs["seed"].mounts == {"/srv": "site"}
    # defaults.job is not a service's
    assert wf.service_defs["api"].mounts == {"/srv/site": "site"}
    assert wf.service_defs["admin"].mounts == {"/srv/site": "site"}
    wf = load("web-services-v4.yml", "    mounts:\n      /srv: site\n", "")
    assert wf.jobs["seed"].mounts == {"/srv": "cache"}


def test_a_job_with_services_runs_its_jobs_and_services_in_dependency_order():
    wf = load("web-services-v4.yml")
    assert [(j.name, j.kind) for j in select_run(wf)] == [
        ("seed", "job"), ("api", "service"), ("admin", "service")]
    assert wf.unsupported == []
    assert wf.service_defs["admin"].depends_on == [Dependency("api", "RUNNING")]
    assert wf.service_defs["api"].command == ["api-server", "--port", "8080", "--workers", "4"]
    assert wf.service_defs["api"].ports == [Port("http", 8080, "TCP")]
    round_trips(wf)


# ---------------------------------------------------------------------------
# a job's files given in place


def test_a_jobs_files_in_place_are_written_with_its_references():
    wf = load("job-inline-files-v4.yml")
    job = wf.jobs["configure"]
    assert job.files == {"/etc/run/params": "params"}
    assert job.inline_files == {"/etc/run/run.ini": "[run]\nname = inline\ntolerance = 1e-6\n"}
    assert plan(job, files=wf.files)["files"] == [
        {"path": "/etc/run/params", "name": "params", "contents": "steps = 100\n"},
        {"path": "/etc/run/run.ini", "name": "",
         "contents": "[run]\nname = inline\ntolerance = 1e-6\n"},
    ]
    # only files in place: no top-level files needed
    wf = load("job-inline-files-v4.yml", "      /etc/run/params: file://params\n", "")
    assert plan(wf.jobs["configure"])["files"] == [
        {"path": "/etc/run/run.ini", "name": "",
         "contents": "[run]\nname = inline\ntolerance = 1e-6\n"}]
    round_trips(wf)


def test_the_node_runtime_writes_a_file_given_in_place_byte_exact_and_removes_it(
        tmp_path, monkeypatch):
    """The spec's entry for contents in place (name empty) through the node
    runtime's own code, as the calling user (the job user on a node: the
    Molecule scenario default checks references that way)."""
    monkeypatch.setattr(registry, "JOBS_DIR", str(tmp_path / "jobs"))
    target = tmp_path / "etc" / "run" / "run.ini"
    wf = load("job-inline-files-v4.yml", "/etc/run/run.ini:", "%s:" % target)
    spec = plan(wf.jobs["configure"], files=wf.files)
    spec["files"] = [entry for entry in spec["files"] if entry["name"] == ""]
    (tmp_path / "jobs" / spec["job"]).mkdir(parents=True)
    (tmp_path / "jobs" / spec["job"] / "spec.json").write_text(json.dumps(spec))
    me = pwd.getpwuid(os.getuid())
    inputs.prepare_inputs(JobSpec.from_dict(spec), "node-0", me)
    assert target.read_bytes() == b"[run]\nname = inline\ntolerance = 1e-6\n"
    inputs.remove_job_files(spec["job"], me)
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("file://params", "params",
         "jobs.configure.files./etc/run/params: 'params' names an entry of the top-level files; "
         "write file://params to use it (any other string is the file's contents)"),
        ("file://params", "file://nope",
         "jobs.configure.files./etc/run/params: 'file://nope' names no entry of the top-level "
         "files (params)"),
        ("file://params", "''", "jobs.configure.files./etc/run/params: must not be empty"),
        ("file://params", "42",
         "jobs.configure.files./etc/run/params: must be a string, got 42 (quote it in YAML)"),
    ],
)
def test_job_file_refusals(old, new, message):
    assert error("job-inline-files-v4.yml", old, new) == message


def test_a_jobs_json_form_gives_each_file_one_source():
    job = load("job-inline-files-v4.yml").jobs["configure"]
    data = job.to_dict()
    data["inline_files"]["/etc/run/params"] = "x"
    with pytest.raises(FuzzfileError) as info:
        load_job(data)
    assert str(info.value) == "job.inline_files./etc/run/params: is in files too; a file has one source"
    data = job.to_dict()
    data["inline_files"] = {"etc/run.ini": "x"}
    with pytest.raises(FuzzfileError) as info:
        load_job(data)
    assert str(info.value) == "job.inline_files: keys must be absolute paths, got 'etc/run.ini'"


def test_a_file_in_place_must_be_a_normalized_path_to_be_written():
    wf = load("job-inline-files-v4.yml", "/etc/run/run.ini:", "/etc/run/../run.ini:")
    with pytest.raises(FuzzfileError) as info:
        plan(wf.jobs["configure"], files=wf.files)
    assert str(info.value) == (
        "jobs.configure.files./etc/run/../run.ini: must be a normalized absolute file path "
        "(no '.', '..' or empty components, no trailing '/')"
    )


# ---------------------------------------------------------------------------
# services only


def test_a_workflow_of_services_only_is_valid_and_runs_its_service():
    wf = load("notebook-services-only-v1.yml")
    assert wf.jobs == {} and wf.services == ["notebook"]
    notebook = wf.service_defs["notebook"]
    assert notebook.mounts == {"/home/user/work": "notebooks"}
    assert notebook.command == ["start-notebook", "--port", "8888", "--no-browser",
                                "--base-url=${FB_ENDPOINT_PATH_NOTEBOOK}"]
    # the probe's named port is the number of the port of that name
    assert notebook.readiness_probe == {
        "http-get": {"port": 8888, "path": "/api", "scheme": "HTTPS"}, "period-seconds": 5}
    assert notebook.ports == [Port("web", 8888, "TCP")]
    assert notebook.endpoints == [Endpoint("notebook", 8888, "https", "/notebook/")]
    assert notebook.inline_files == {
        "/home/user/.notebook/config.py": 'c.ServerApp.ip = "0.0.0.0"\nc.ServerApp.port = 8888\n'}
    assert "services.notebook.policy: %s" % SERVICE_POLICY_NOTE in notebook.unsupported
    assert wf.unsupported == []
    for select in (lambda: select_run(wf), lambda: select_run(wf, "notebook")):
        assert select() == [notebook]
    assert select_job(wf) == select_job(wf, "notebook") == notebook
    round_trips(wf)


def test_a_services_own_endpoint_path_expands_in_its_command_as_the_vendors_files_write_it():
    spec = plan(select_job(load("notebook-services-only-v1.yml")), run=RUN)
    assert spec["argv"] == ["start-notebook", "--port", "8888", "--no-browser", "--base-url=/notebook/"]
    assert spec["ranks"][0]["env"]["FB_ENDPOINT_URL_NOTEBOOK"] == "https://10.0.0.1:8888/notebook/"
    assert spec["extra_hosts"] == [["notebook.svc", "10.0.0.1"]]
    assert spec["service"] == {"readiness_probe": {"http-get": {"port": 8888, "path": "/api", "scheme": "HTTPS"},
                                                   "period-seconds": 5},
                               "ready_timeout": 300,
                               "endpoints": [{"name": "notebook", "url": "https://10.0.0.1:8888/notebook/",
                                              "scope": None}]}


def test_a_services_only_workflow_is_checked_like_any_other():
    assert error("notebook-services-only-v1.yml", "        scheme: https\n", "        scheme: ftp\n") == (
        "services.notebook.readiness-probe.http-get.scheme: must be HTTP or HTTPS (any case), "
        "got 'ftp'"
    )
    assert error("notebook-services-only-v1.yml", "      /home/user/work: notebooks\n",
                 "      /home/user/work: data\n") == (
        "services.notebook.mounts./home/user/work: no volume named 'data' under volumes "
        "(notebooks)"
    )
    assert error("notebook-services-only-v1.yml", "        port: web\n", "        port: http\n") == (
        "services.notebook.readiness-probe.http-get.port: no port named 'http' in "
        "services.notebook.network.ports (web)"
    )
    # an empty jobs mapping beside services is no jobs, as a missing one
    wf = load("notebook-services-only-v1.yml", "services:\n", "jobs: {}\nservices:\n")
    assert [unit.name for unit in select_run(wf)] == ["notebook"]


@pytest.mark.parametrize(
    "data, message",
    [
        ("version: v4\n", "jobs: required: a mapping of job names to jobs"),
        ("version: v4\njobs: {}\n", "jobs: must contain at least one job"),
        ("version: v4\nservices: {}\n", "jobs: required: a mapping of job names to jobs"),
        ("version: v4\njobs: []\nservices: {s: {image: {uri: x}}}\n",
         "jobs: must be a mapping of job names to jobs, got a list"),
    ],
)
def test_a_workflow_without_jobs_or_services_is_still_refused_as_before(data, message):
    with pytest.raises(FuzzfileError) as info:
        parse_workflow(data)
    assert str(info.value) == message


def test_a_gpu_job_asks_each_rank_for_its_devices_and_notes_exclusive_and_annotations():
    """gpu-training-v1.yml: resource.devices (nvidia.com/gpu: 1) reaches the
    job spec as each rank's request, which the nodes' runtime allocates from
    their CDI specifications; exclusive and the annotations are noted, not
    enforced."""
    workflow = parse_workflow(text("gpu-training-v1.yml"))
    train = workflow.jobs["train"]
    assert (train.devices, train.exclusive, train.resource_annotations) == (
        {"nvidia.com/gpu": 1}, True, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    assert train.unsupported == [
        "jobs.train.resource.exclusive: exclusive node use is not enforced (a node's devices are "
        "never shared between jobs; its CPUs may be); noted",
        "jobs.train.resource.annotations: resource annotations are scheduler hints, not used here; "
        "ignored",
    ]
    spec = plan(train, count=2, run=RUN)
    assert spec["resources"]["devices"] == {"nvidia.com/gpu": 1}
    assert JobSpec.from_dict(spec).resources.devices == {"nvidia.com/gpu": 1}


# ---------------------------------------------------------------------------
# v1 volume references without a name; file:///PATH from the volume's root

ACCEPTED_REFERENCES = ("volume://user/ephemeral, volume://user/ephemeral/NAME, volume://user/persistent, "
                       "volume://user/persistent/NAME or volume://account/persistent")


def test_the_users_own_persistent_volume_and_a_file_from_the_volumes_root():
    wf = load("persistent-home-v1.yml")
    job = wf.jobs["record-run"]
    assert job.mounts == {"/home/user": "home", "/data": "data"}
    assert job.volumes == {"home": "user/persistent", "data": "ephemeral"}
    # the destination as written; its path, from the volume's root, relative
    assert wf.volumes["data"] == Volume("ephemeral", ingress=[Transfer("file://reference.fa", "file:///reference.fa")])
    assert volume_relative_path("file:///reference.fa", "x") == "reference.fa"
    assert wf.unsupported == [] and wf.warnings == []
    assert [m["store"] for m in plan(job, run=RUN)["mounts"]] == ["ephemeral", "user/persistent"]
    assert transfer_plan(wf, select_run(wf))[0]["store"] == "ephemeral"
    round_trips(wf)


def test_the_accounts_persistent_volume_and_an_ephemeral_volume_with_a_name():
    wf = load("desktop-scope-v1.yml")
    assert wf.service_defs["desktop"].volumes == {"session": "ephemeral"}
    assert wf.jobs["viewer"].volumes == {"shared": "account/persistent"}
    # the ephemeral volume's name is noted, nothing more: its key names it
    assert [note for note in wf.unsupported if note.startswith("volumes.")] == [
        "volumes.session.reference: the ephemeral volume's name 'scratch' is noted only: the volume is "
        "the run's, its directory named by its key 'session', as for volume://user/ephemeral"]
    round_trips(wf)


@pytest.mark.parametrize("reference, message", [
    ("volume://nobody/x", "'volume://nobody/x' is not a volume this collection keeps (%s)" % ACCEPTED_REFERENCES),
    ("volume://user/persistent/", "'volume://user/persistent/' is not a volume this collection keeps (%s)"
     % ACCEPTED_REFERENCES),
    ("volume://account/ephemeral", "'volume://account/ephemeral' is not a volume this collection keeps (%s)"
     % ACCEPTED_REFERENCES),
    ("volume://account/persistent/x", "'volume://account/persistent/x' is not a volume this collection keeps "
     "(%s)" % ACCEPTED_REFERENCES),
    ("volume://user/ephemeral/", "'volume://user/ephemeral/' is not a volume this collection keeps (%s)"
     % ACCEPTED_REFERENCES),
    ("volume://user/ephemeral/../x", "the ephemeral volume's name must be letters, digits and ._- (starting "
     "with a letter or digit, at most 128), got '../x'"),
    ("volume://user/ephemeral/a/b", "the ephemeral volume's name must be letters, digits and ._- (starting "
     "with a letter or digit, at most 128), got 'a/b'"),
    ("volume://user/persistent/a/b", "the persistent volume's name must be letters, digits and ._- (starting "
     "with a letter or digit, at most 128), got 'a/b'"),
])
def test_a_volume_reference_that_means_nothing_here_is_refused_listing_every_form(reference, message):
    assert error("persistent-home-v1.yml", "reference: volume://user/persistent\n",
                 "reference: %s\n" % reference) == "volumes.home.reference: " + message


def test_a_v1_volume_without_a_reference_is_told_every_form():
    assert error("persistent-home-v1.yml", "    reference: volume://user/persistent\n", "    name: home\n") == (
        "volumes.home.reference: required (%s)" % ACCEPTED_REFERENCES)


@pytest.mark.parametrize("old, new", [
    # an egress out of the volume's root, to the egress directory's root
    ("    ingress:\n",
     "    egress:\n      - source: {uri: file:///out/result.txt}\n"
     "        destination: {uri: file:///result.txt}\n    ingress:\n"),
    ("uri: file:///reference.fa", "uri: file:///in/./reference.fa"),
])
def test_every_file_path_of_a_volume_may_be_written_from_its_root(old, new):
    wf = load("persistent-home-v1.yml", old, new)
    for item in wf.volumes["data"].ingress + wf.volumes["data"].egress:
        for uri in (item.source, item.destination):
            if uri.startswith("file:///"):
                assert not volume_relative_path(uri, "x").startswith("/")
    assert volume_relative_path("file:///in/./reference.fa", "x") == "in/reference.fa"
    assert volume_relative_path("file:///out/result.txt", "x") == "out/result.txt"


@pytest.mark.parametrize("uri, why", [
    ("file:///", "names no file"), ("file:///../reference.fa", "escapes the volume with '..'"),
    ("file:///data/", "names no file"), ("file:////reference.fa", "starts with '//'"),
])
def test_a_path_from_the_root_still_stays_in_the_volume(uri, why):
    assert error("persistent-home-v1.yml", "uri: file:///reference.fa", "uri: %s" % uri).startswith(
        "volumes.data.ingress[0].destination.uri: %r %s" % (uri, why))


# ---------------------------------------------------------------------------
# a service endpoint's scope

SCOPE_NOTE = ("not enforced (there is no ingress): the endpoint is reached at its service's rank 0 node "
              "address and port by anyone who can reach that node; the scope is recorded and shown with "
              "the endpoint's URL")


def test_an_endpoints_scope_is_kept_shown_with_its_url_and_noted_as_not_enforced():
    wf = load("desktop-scope-v1.yml")
    desktop = wf.service_defs["desktop"]
    assert desktop.endpoints == [Endpoint("vnc", 6080, "http", "/", "user")]
    assert desktop.to_dict()["endpoints"] == [
        {"name": "vnc", "port": 6080, "protocol": "http", "path": "/", "scope": "user"}]
    assert "services.desktop.network.endpoints[0].scope: " + SCOPE_NOTE in desktop.unsupported
    assert desktop.readiness_probe == {"http-get": {"port": 6080, "path": "/index.html", "scheme": "HTTP"},
                                       "period-seconds": 1}
    spec = plan(desktop, run=RUN)
    assert spec["service"]["endpoints"] == [{"name": "vnc", "url": "http://10.0.0.1:6080/", "scope": "user"}]
    viewer = plan(wf.jobs["viewer"], run=RUN, services=[
        {"name": "desktop", "address": "10.0.0.9", "endpoints": [e.to_dict() for e in desktop.endpoints]}])
    assert viewer["ranks"][0]["env"]["FB_ENDPOINT_URL_VNC"] == "http://10.0.0.9:6080/"
    assert [unit.name for unit in select_run(wf)] == ["desktop", "viewer"]
    round_trips(wf)


@pytest.mark.parametrize("scope", ["public", "group", "'{{ .Scope }}'", "user-42"])
def test_any_scope_the_vendor_writes_is_kept_as_written(scope):
    wf = load("desktop-scope-v1.yml", "scope: user\n", "scope: %s\n" % scope)
    assert wf.service_defs["desktop"].endpoints[0].scope == scope.strip("'")


@pytest.mark.parametrize("scope, shown", [("''", "must not be empty"), ("7", "must be a string, got 7"),
                                          ("[user]", "must be a string, got a list")])
def test_a_scope_that_is_no_name_is_refused(scope, shown):
    assert error("desktop-scope-v1.yml", "scope: user\n", "scope: %s\n" % scope).startswith(
        "services.desktop.network.endpoints[0].scope: %s" % shown)


def test_the_json_form_of_an_endpoint_reads_its_scope_back_and_takes_none_missing():
    from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import load_endpoints
    form = {"name": "vnc", "port": 6080, "protocol": "http", "path": "/"}
    assert load_endpoints([dict(form, scope="user")], "e") == [Endpoint("vnc", 6080, "http", "/", "user")]
    assert load_endpoints([form], "e") == load_endpoints([dict(form, scope=None)], "e") == [
        Endpoint("vnc", 6080, "http", "/")]
    with pytest.raises(FuzzfileError) as info:
        load_endpoints([dict(form, scope="")], "e")
    assert str(info.value) == "e[0].scope: must not be empty"


# ---------------------------------------------------------------------------
# a secret:// env value expanded in a command's arguments


def test_a_secret_expanded_in_arguments_runs_with_a_warning_and_the_spec_holds_no_value(tmp_path):
    from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import load_fuzzfile
    path = tmp_path / "secret-args.yml"
    path.write_text(text("secret-args-v4.yml"))
    result, warnings = load_fuzzfile({"path": str(path), "job": None, "secret_names": ["user/api-token"]})
    assert [w for w in warnings if "secret://" in w] == [
        "%s: jobs.%s: expands the secret:// env value API_TOKEN: users logged in on the job's nodes can read it "
        "in the rank's command line (ps); other jobs cannot" % (path, field)
        for field in ("call-api.args[0]", "call-api-script.args[0]")]
    wf = load("secret-args-v4.yml")
    command, script = (plan(wf.jobs[name], secret_names=["user/api-token"]) for name in ("call-api", "call-api-script"))
    # command mode: command + args, the args' entry is argv[4]; script mode: args only
    assert command["secret_args"] == [{"index": 4, "parts": [["text", "Bearer "], ["secret", "user/api-token"]]}]
    assert script["secret_args"] == [{"index": 0, "parts": [["text", "--token="], ["secret", "user/api-token"]]}]
    assert (command["argv"][4], script["argv"]) == ("Bearer secret://user/api-token", ["--token=secret://user/api-token"])
    with pytest.raises(FuzzfileError) as info:
        load_fuzzfile({"path": str(path), "job": None, "secret_names": ["user/api-token"],
                       "secret_arguments": "refuse"})
    assert str(info.value) == (
        "%s: jobs.call-api.args[0]: expands a secret:// env value, and every user of a node can read a "
        "process's command line (ps); read the secret from the job's environment instead "
        "(fuzz_multinode_secret_arguments: refuse)" % path)
