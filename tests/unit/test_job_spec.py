"""Tests for plugins/module_utils/job_spec.py: rank names, slots, environment
and argument expansion in the job spec."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    MULTINODE_VARS,
    FuzzfileError,
    Job,
    parse_workflow,
    rank_name,
    select_job,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import (
    expand,
    plan_job,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRAPPER = "/multinode/ssh-wrapper"


def make_job(**fields):
    base = dict(
        name="solve",
        image_uri="docker://alpine",
        command=["true"],
        nodes=2,
        implementation="generic",
    )
    base.update(fields)
    return Job(**base)


def nodes(count):
    return [{"node": "node-%d" % (i + 1), "address": "10.0.0.%d" % (i + 1)} for i in range(count)]


def plan(job, count=None, **kwargs):
    options = dict(user="fuzz", wrapper_path=WRAPPER, kill_grace=10)
    options.update(kwargs)
    return plan_job(job, nodes(job.nodes if count is None else count), **options)


def plan_error(job, count=None, **kwargs):
    with pytest.raises(FuzzfileError) as info:
        plan(job, count, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------
# the spec document


def test_spec_of_the_command_example():
    with open(os.path.join(ROOT, "examples", "generic-multinode.yml"), encoding="utf-8") as handle:
        job = select_job(parse_workflow(handle.read()))
    spec = plan_job(
        job.to_dict(),
        [
            {"node": "node-1", "address": "172.18.0.2"},
            {"node": "node-2", "address": "172.18.0.3"},
        ],
        user="fuzz",
        wrapper_path=WRAPPER,
        kill_grace=10,
    )
    assert json.loads(json.dumps(spec)) == spec
    path = "/usr/lib64/openmpi/bin:/usr/local/bin:/usr/bin:/bin"
    assert spec == {
        "job": "generic-multinode",
        "user": "fuzz",
        "mode": "command",
        "argv": [
            "mpirun",
            "-H",
            "generic-multinode-0:2,generic-multinode-1:2",
            "--mca",
            "plm_rsh_agent",
            WRAPPER,
            "-np",
            "4",
            "/usr/lib64/openmpi/bin/mpi_hello_world",
        ],
        "script": None,
        "cwd": "/",
        "secret_env": {},
        "secret_args": [],
        "files": [],
        "kill_grace": 10,
        "claim_lease": 120,
        "timeout": None,
        # the example: 2 cores, 1GB, no devices
        "resources": {"cores": 2, "affinity": "NUMA", "memory_bytes": 1000000000, "devices": {}},
        "implementation": "generic",
        "launcher": [],  # generic: the command runs as given
        "nodes": 2,
        "slots_per_node": 2,
        "total_slots": 4,
        "unsupported": [],
        "local": False,
        # By default every rank runs in the job's image.
        "execution": "container",
        "image": {
            "uri": "oras://docker.io/anderbubble/openmpi-hello-world.sif@sha256:"
            "dc92ea0c541a8d9f30b4d6b78bfc57bd2fe9806689d93ece6069c6ed6519fa9a",
            "secret": None,
        },
        "ranks": [
            {
                "rank": 0,
                "name": "generic-multinode-0",
                "node": "node-1",
                "address": "172.18.0.2",
                "slots": 2,
                "env": {
                    "PATH": path,
                    "HOSTNAME": "generic-multinode-0",
                    "RANK": "0",
                    "MULTINODE_HOSTLIST": "generic-multinode-0:2,generic-multinode-1:2",
                    "MULTINODE_HOSTLIST_NOSLOTS": "generic-multinode-0,generic-multinode-1",
                    "MULTINODE_TOTAL_SLOTS": "4",
                    "MULTINODE_NODE_IP": "172.18.0.2",
                    "MULTINODE_SSH_WRAPPER": WRAPPER,
                    "MULTINODE_RSH_WRAPPER": WRAPPER,
                },
            },
            {
                "rank": 1,
                "name": "generic-multinode-1",
                "node": "node-2",
                "address": "172.18.0.3",
                "slots": 2,
                "env": {"PATH": path, "HOSTNAME": "generic-multinode-1", "RANK": "1"},
            },
        ],
        # No volumes; where the nodes would keep them.
        "mounts": [],
        "volume_root": "/var/lib/fuzz-multinode/volumes",
        "volume_sharing": "auto",
        # A job, not a service; no service of the run is running.
        "service": None,
        "extra_hosts": [],
    }


MOUNTING = """
version: v1
volumes:
  data: {reference: volume://user/ephemeral}
  results: {reference: volume://user/persistent/results}
jobs:
  solve:
    image: {uri: docker://x/y:1}
    command: [ls]
    cwd: /data/case
    mounts:
      results: {location: /data/results}
      data: {location: /data/}
"""


def test_the_spec_says_each_mount_with_its_volume_store_parents_first():
    """Every node learns where each volume is mounted and which store holds
    it (the run's ephemeral one, or a persistent one by name), a mount
    inside another after it, and where volumes are kept."""
    job = parse_workflow(MOUNTING).jobs["solve"]
    spec = plan(job, volume_root="/shared/fmn-volumes", volume_sharing="shared")
    assert spec["mounts"] == [
        {"location": "/data", "volume": "data", "store": "ephemeral"},
        {"location": "/data/results", "volume": "results", "store": "persistent/results"},
    ]
    assert (spec["volume_root"], spec["volume_sharing"]) == ("/shared/fmn-volumes", "shared")


@pytest.mark.parametrize("root, sharing, message", [
    ("relative/volumes", "auto", "volume_root (fuzz_multinode_volume_root): must be an absolute path"),
    ("/", "auto", "volume_root (fuzz_multinode_volume_root): must be an absolute path"),
    ("/srv/../etc", "auto", "volume_root (fuzz_multinode_volume_root): must be an absolute path"),
    ("/srv/volumes", "nfs", "volume_sharing (fuzz_multinode_volume_sharing): must be one of auto, "
                            "shared, node-local, got 'nfs'"),
])
def test_bad_volume_settings_are_refused_naming_the_variable(root, sharing, message):
    with pytest.raises(FuzzfileError) as caught:
        plan(parse_workflow(MOUNTING).jobs["solve"], volume_root=root, volume_sharing=sharing)
    assert str(caught.value).startswith(message)


def test_rank_names():
    assert rank_name("solve", 0) == "solve-0"
    assert rank_name("a-b", 12) == "a-b-12"
    spec = plan(make_job(nodes=4))
    assert [r["name"] for r in spec["ranks"]] == ["solve-0", "solve-1", "solve-2", "solve-3"]
    assert [r["rank"] for r in spec["ranks"]] == [0, 1, 2, 3]
    assert [r["node"] for r in spec["ranks"]] == ["node-1", "node-2", "node-3", "node-4"]
    assert [r["address"] for r in spec["ranks"]] == ["10.0.0.%d" % i for i in range(1, 5)]


@pytest.mark.parametrize(
    "fields, slots",
    [
        (dict(procs_per_node=3, cores=8), 3),
        (dict(procs_per_node=3), 3),
        (dict(cores=8), 8),
        (dict(), 1),
    ],
)
def test_slots(fields, slots):
    spec = plan(make_job(nodes=3, **fields))
    assert spec["slots_per_node"] == slots
    assert spec["total_slots"] == 3 * slots
    assert [r["slots"] for r in spec["ranks"]] == [slots] * 3
    head = spec["ranks"][0]["env"]
    assert head["MULTINODE_HOSTLIST"] == "solve-0:%d,solve-1:%d,solve-2:%d" % ((slots,) * 3)
    assert head["MULTINODE_HOSTLIST_NOSLOTS"] == "solve-0,solve-1,solve-2"
    assert head["MULTINODE_TOTAL_SLOTS"] == str(3 * slots)


def test_one_node_multinode_job():
    spec = plan(make_job(nodes=1, cores=2))
    head = spec["ranks"][0]["env"]
    assert head["MULTINODE_HOSTLIST"] == "solve-0:2"
    assert head["MULTINODE_HOSTLIST_NOSLOTS"] == "solve-0"
    assert head["MULTINODE_TOTAL_SLOTS"] == "2"
    assert head["RANK"] == "0"


def test_multinode_variables_only_on_the_head():
    spec = plan(make_job(nodes=3))
    head = spec["ranks"][0]["env"]
    assert set(MULTINODE_VARS) <= set(head)
    assert head["MULTINODE_NODE_IP"] == "10.0.0.1"
    assert head["MULTINODE_SSH_WRAPPER"] == WRAPPER
    assert head["MULTINODE_RSH_WRAPPER"] == WRAPPER
    for rank in spec["ranks"][1:]:
        assert not [key for key in rank["env"] if key.startswith("MULTINODE_")]


def test_rank_and_hostname_on_every_rank():
    spec = plan(make_job(nodes=3))
    for rank in spec["ranks"]:
        assert rank["env"]["RANK"] == str(rank["rank"])
        assert rank["env"]["HOSTNAME"] == rank["name"]


def test_job_env_on_every_rank():
    job = make_job(
        nodes=3, env=[("A", "1"), ("MULTINODE_WRAPPER_FORWARD_STREAMS", "1"), ("EMPTY", "")]
    )
    spec = plan(job)
    for rank in spec["ranks"]:
        env = rank["env"]
        assert env["A"] == "1"
        assert env["MULTINODE_WRAPPER_FORWARD_STREAMS"] == "1"
        assert env["EMPTY"] == ""
        assert list(env)[:3] == ["A", "MULTINODE_WRAPPER_FORWARD_STREAMS", "EMPTY"]


def test_runtime_wins_over_job_env():
    job = make_job(
        nodes=2,
        env=[
            ("HOSTNAME", "mine"),
            ("RANK", "9"),
            ("MULTINODE_HOSTLIST", "bogus"),
            ("MULTINODE_SSH_WRAPPER", "/bin/false"),
            ("KEEP", "x"),
        ],
        command=["echo", "$HOSTNAME", "$RANK", "$MULTINODE_HOSTLIST", "$MULTINODE_SSH_WRAPPER"],
    )
    spec = plan(job)
    head, worker = (r["env"] for r in spec["ranks"])
    assert head["HOSTNAME"] == "solve-0" and worker["HOSTNAME"] == "solve-1"
    assert head["RANK"] == "0" and worker["RANK"] == "1"
    assert head["MULTINODE_HOSTLIST"] == "solve-0:1,solve-1:1"
    assert head["MULTINODE_SSH_WRAPPER"] == WRAPPER
    assert "MULTINODE_HOSTLIST" not in worker and "MULTINODE_SSH_WRAPPER" not in worker
    assert head["KEEP"] == worker["KEEP"] == "x"
    assert spec["argv"] == ["echo", "solve-0", "0", "solve-0:1,solve-1:1", WRAPPER]
    assert spec["unsupported"] == [
        "jobs.solve.env: HOSTNAME is set by the runtime; the job's value is ignored",
        "jobs.solve.env: RANK is set by the runtime; the job's value is ignored",
        "jobs.solve.env: MULTINODE_HOSTLIST is set by the runtime; the job's value is ignored",
        "jobs.solve.env: MULTINODE_SSH_WRAPPER is set by the runtime; the job's value is "
        "ignored",
    ]


def test_job_unsupported_notes_are_carried():
    spec = plan(make_job(unsupported=["jobs.solve.mounts: ignored"], env=[("HOSTNAME", "x")]))
    assert spec["unsupported"] == [
        "jobs.solve.mounts: ignored",
        "jobs.solve.env: HOSTNAME is set by the runtime; the job's value is ignored",
    ]


def test_single_node_job_without_multinode():
    job = make_job(
        nodes=1,
        implementation=None,
        cores=4,
        env=[("RANK", "mine"), ("MULTINODE_HOSTLIST", "user-set")],
        command=["echo", "$HOSTNAME", "$RANK"],
    )
    spec = plan(job)
    assert spec["implementation"] is None
    assert spec["nodes"] == 1 and spec["total_slots"] == 4
    assert spec["ranks"][0]["name"] == "solve-0"
    assert spec["ranks"][0]["env"] == {
        "RANK": "mine",
        "MULTINODE_HOSTLIST": "user-set",
        "HOSTNAME": "solve-0",
    }
    assert spec["argv"] == ["echo", "solve-0", "mine"]
    assert spec["unsupported"] == []


def test_script_mode():
    script = '#!/bin/sh\necho "$1" $MULTINODE_HOSTLIST\n'
    job = make_job(command=None, script=script, args=["$MULTINODE_TOTAL_SLOTS", "a b", "${X}"])
    spec = plan(job)
    assert spec["mode"] == "script"
    assert spec["script"] == script
    assert spec["argv"] == ["2", "a b", ""]


def test_command_mode_appends_args():
    job = make_job(command=["echo", "$RANK"], args=["${HOSTNAME}", "x"])
    spec = plan(job)
    assert spec["mode"] == "command"
    assert spec["script"] is None
    assert spec["argv"] == ["echo", "0", "solve-0", "x"]


def test_the_run_id_expands_in_command_arguments_like_the_other_FB_variables():
    """$FB_WORKFLOW_ID / ${FB_WORKFLOW_ID} in `command` are the run's id, as
    every process of the run sees it (the runtime sets it, over a value of
    the job's own); the spec carries the run. Without a run: empty."""
    run = "20261201T165012Z-a1b2c3"
    job = make_job(command=["echo", "$FB_WORKFLOW_ID", "${FB_WORKFLOW_ID}", "id=${FB_WORKFLOW_ID}x"],
                   env=[("FB_WORKFLOW_ID", "the job's own")])
    spec = plan(job, run=run)
    assert spec["argv"] == ["echo", run, run, "id=%sx" % run]
    assert spec["run"] == run
    assert plan(make_job(command=["echo", "$FB_WORKFLOW_ID"]))["argv"] == ["echo", ""]
    assert "run" not in plan(make_job())


def test_args_with_spaces_stay_single():
    job = make_job(
        env=[("SPACED", "a b  c"), ("GLOB", "*")],
        command=["printf", "%s\n", "$SPACED", "${GLOB}", "two words", "$(ls)"],
    )
    assert plan(job)["argv"] == ["printf", "%s\n", "a b  c", "*", "two words", "$(ls)"]


def test_cwd_user_kill_grace():
    spec = plan(make_job(), user="alice", kill_grace=0)
    assert (spec["cwd"], spec["user"], spec["kill_grace"]) == ("/", "alice", 0)


def test_claim_lease_is_120_seconds_unless_given():
    assert plan(make_job())["claim_lease"] == 120
    assert plan(make_job(), claim_lease=15)["claim_lease"] == 15
    assert plan(make_job(cwd="/work"))["cwd"] == "/work"


def test_job_may_be_a_dict():
    job = make_job(env=[("A", "1")], cores=2)
    assert plan_job(
        job.to_dict(), nodes(2), user="fuzz", wrapper_path=WRAPPER, kill_grace=10
    ) == plan(job)


def test_ipv6_addresses():
    spec = plan_job(
        make_job(),
        [{"node": "a", "address": "fd00::1"}, {"node": "b", "address": "fd00:0::2"}],
        user="fuzz",
        wrapper_path=WRAPPER,
        kill_grace=10,
    )
    assert spec["ranks"][0]["env"]["MULTINODE_NODE_IP"] == "fd00::1"
    assert spec["ranks"][1]["address"] == "fd00::2"


# ---------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "count, message",
    [
        (1, "nodes: job 'solve' needs 2 node(s) (multinode.nodes), but 1 were given"),
        (3, "nodes: job 'solve' needs 2 node(s) (multinode.nodes), but 3 were given"),
        (0, "nodes: job 'solve' needs 2 node(s) (multinode.nodes), but 0 were given"),
    ],
)
def test_node_count_must_match(count, message):
    assert plan_error(make_job(nodes=2), count) == message


def test_single_node_job_needs_one_node():
    assert plan_error(make_job(nodes=1, implementation=None), 2) == (
        "nodes: job 'solve' needs 1 node(s) (multinode.nodes), but 2 were given"
    )


@pytest.mark.parametrize(
    "node_list, message",
    [
        ("node-1", "nodes: must be a list of {node, address} mappings"),
        (["node-1", "node-2"], "nodes[0]: must be a mapping with 'node' and 'address'"),
        (
            [{"node": "a", "address": "10.0.0.1"}, {"node": "a", "address": "10.0.0.2"}],
            "nodes[1].node: 'a' already runs rank 0; every rank needs its own node",
        ),
        (
            [{"node": "a", "address": "10.0.0.1"}, {"node": "", "address": "10.0.0.2"}],
            "nodes[1].node: must be a non-empty inventory host name",
        ),
        (
            [{"address": "10.0.0.1"}, {"node": "b", "address": "10.0.0.2"}],
            "nodes[0].node: must be a non-empty inventory host name",
        ),
        (
            [{"node": "a", "address": "node-a.example"}, {"node": "b", "address": "10.0.0.2"}],
            "nodes[0].address: must be an IP address, got 'node-a.example'",
        ),
        (
            [{"node": "a", "address": "10.0.0.1"}, {"node": "b"}],
            "nodes[1].address: must be an IP address, got None",
        ),
        (
            [{"node": "a", "address": "10.0.0.1", "rank": 0}, {"node": "b", "address": "10.0.0.2"}],
            "nodes[0].rank: unknown key; expected one of address, node",
        ),
    ],
)
def test_bad_nodes(node_list, message):
    with pytest.raises(FuzzfileError) as info:
        plan_job(make_job(), node_list, user="fuzz", wrapper_path=WRAPPER, kill_grace=10)
    assert str(info.value) == message


LEASE_COMPLAINT = "claim_lease (fuzz_multinode_claim_lease): must be a positive integer of seconds, got "


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(user=""), "user: must be a user name (e.g. 'fuzz'), got ''"),
        (dict(user="Root User"), "user: must be a user name (e.g. 'fuzz'), got 'Root User'"),
        (dict(user=None), "user: must be a user name (e.g. 'fuzz'), got None"),
        (
            dict(wrapper_path="ssh-wrapper"),
            "wrapper_path: must be an absolute path of letters, digits and ._+-/, got "
            "'ssh-wrapper'",
        ),
        (
            dict(wrapper_path="/multi node/w"),
            "wrapper_path: must be an absolute path of letters, digits and ._+-/, got "
            "'/multi node/w'",
        ),
        (dict(kill_grace=-1), "kill_grace: must be an integer >= 0, got -1"),
        (dict(kill_grace=True), "kill_grace: must be an integer >= 0, got True"),
        (dict(kill_grace="10"), "kill_grace: must be an integer >= 0, got '10'"),
        (dict(claim_lease=0), LEASE_COMPLAINT + "0"),
        (dict(claim_lease=-15), LEASE_COMPLAINT + "-15"),
        (dict(claim_lease=True), LEASE_COMPLAINT + "True"),
        (dict(claim_lease="15"), LEASE_COMPLAINT + "'15'"),
        (dict(claim_lease=1.5), LEASE_COMPLAINT + "1.5"),
    ],
)
def test_bad_options(kwargs, message):
    assert plan_error(make_job(), **kwargs) == message


def test_other_implementations_are_rejected():
    """Only gasnet is left: it cannot be run (or tested) here, and the
    message names the field, says why and how to run it as generic."""
    assert plan_error(make_job(implementation="gasnet")) == (
        "jobs.solve.multinode.implementation: 'gasnet' is not supported: fuzz.multinode has "
        "no GASNet launcher (GASNet is not packaged in Debian, the OS its tests run on, so one "
        "could not be tested); use implementation 'generic' and let GASNet's ssh spawner start "
        "the processes through the wrapper: run the program with "
        "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER, GASNET_SSH_SERVERS=$MULTINODE_HOSTLIST_NOSLOTS "
        "and GASNET_SPAWNFN=S (udp conduit; other conduits: GASNET_<CONDUIT>_SPAWNER=ssh)"
    )


# ---------------------------------------------------------------------------
# openmpi/ompi and mpich: the command runs under the MPI launcher (Fuzzball's
# wrapping; fuzzfile-reference.md section 3)


def openmpi(hostlist, total):
    return ["mpirun", "-H", hostlist, "--mca", "plm_rsh_agent", WRAPPER, "-np", str(total)]


def mpich(hostlist, total):
    return ["mpiexec", "-hosts", hostlist, "-launcher", "ssh", "-launcher-exec", WRAPPER,
            "-n", str(total)]


@pytest.mark.parametrize("implementation", ["openmpi", "ompi"])
def test_openmpi_command_runs_under_mpirun(implementation):
    """The vendor's example: only the per-rank program; mpirun over every
    rank's slots through the wrapper is put in front of it."""
    job = make_job(implementation=implementation, nodes=2,
                   command=["/bin/sh", "-c", "mpi_hello_world"])
    spec = plan(job)
    assert spec["launcher"] == openmpi("solve-0:1,solve-1:1", 2)
    assert spec["argv"] == ["/bin/sh", "-c", "mpi_hello_world"]
    assert spec["mode"] == "command" and spec["implementation"] == implementation


def test_mpich_command_runs_under_mpiexec():
    job = make_job(implementation="mpich", nodes=3, procs_per_node=2,
                   command=["/bin/sh", "-c", "mpi_hello_world"], args=["x y"])
    spec = plan(job)
    assert spec["launcher"] == mpich("solve-0:2,solve-1:2,solve-2:2", 6)
    assert spec["argv"] == ["/bin/sh", "-c", "mpi_hello_world", "x y"]


@pytest.mark.parametrize("fields, hostlist, total", [
    (dict(procs_per_node=3, cores=8), "solve-0:3,solve-1:3,solve-2:3,solve-3:3", 12),
    (dict(cores=2), "solve-0:2,solve-1:2,solve-2:2,solve-3:2", 8),
    (dict(), "solve-0:1,solve-1:1,solve-2:1,solve-3:1", 4),
])
@pytest.mark.parametrize("implementation, launcher", [
    ("openmpi", openmpi), ("ompi", openmpi), ("mpich", mpich)])
def test_launcher_slots_follow_procs_per_node_then_cores(implementation, launcher, fields,
                                                         hostlist, total):
    """The host list's slots and the process count agree (a mismatch is
    Open MPI's "not enough slots"), and equal the MULTINODE_* values."""
    spec = plan(make_job(implementation=implementation, nodes=4, **fields))
    assert spec["launcher"] == launcher(hostlist, total)
    head = spec["ranks"][0]["env"]
    assert (head["MULTINODE_HOSTLIST"], head["MULTINODE_TOTAL_SLOTS"]) == (hostlist, str(total))


@pytest.mark.parametrize("implementation, launcher", [
    ("openmpi", openmpi), ("ompi", openmpi), ("mpich", mpich)])
def test_script_mode_under_the_launcher(implementation, launcher):
    """In script mode the launcher runs the script (its path on the nodes is
    the runtime's business) with the expanded args; the script text is
    left alone."""
    script = "#!/bin/sh\necho \"$OMPI_COMM_WORLD_RANK $1\"\nexec mpi_allreduce\n"
    job = make_job(implementation=implementation, nodes=2, procs_per_node=2, command=None,
                   script=script, args=["$MULTINODE_TOTAL_SLOTS", "two words"])
    spec = plan(job)
    assert spec["mode"] == "script" and spec["script"] == script
    assert spec["launcher"] == launcher("solve-0:2,solve-1:2", 4)
    assert spec["argv"] == ["4", "two words"]


@pytest.mark.parametrize("implementation", ["openmpi", "ompi", "mpich"])
def test_mpi_jobs_keep_the_multinode_variables_and_rank_env(implementation):
    """Rank 0 still gets MULTINODE_* (useful in the command and harmless),
    every rank its HOSTNAME and RANK, as for generic."""
    spec = plan(make_job(implementation=implementation, nodes=3, env=[("A", "1")]))
    generic = plan(make_job(nodes=3, env=[("A", "1")]))
    assert [r["env"] for r in spec["ranks"]] == [r["env"] for r in generic["ranks"]]


def test_launcher_uses_the_wrapper_path_given():
    spec = plan(make_job(implementation="mpich"), wrapper_path="/opt/w/ssh")
    assert spec["launcher"][spec["launcher"].index("-launcher-exec") + 1] == "/opt/w/ssh"
    spec = plan(make_job(implementation="openmpi"), wrapper_path="/opt/w/ssh")
    assert spec["launcher"][spec["launcher"].index("plm_rsh_agent") + 1] == "/opt/w/ssh"


def test_generic_and_plain_jobs_have_no_launcher():
    assert plan(make_job())["launcher"] == []
    assert plan(make_job(implementation=None, nodes=1))["launcher"] == []


def test_job_objects_are_validated_too():
    with pytest.raises(FuzzfileError) as info:
        plan(make_job(name="Bad"))
    assert str(info.value).startswith("job.name: invalid job name 'Bad': ")
    with pytest.raises(FuzzfileError) as info:
        plan(make_job(implementation=None), 2)
    assert str(info.value) == (
        "job: a job without a multinode implementation runs on 1 node without "
        "procs_per_node, got nodes=2, procs_per_node=null"
    )


def test_bad_job_dict():
    data = make_job().to_dict()
    data["nodes"] = 0
    with pytest.raises(FuzzfileError) as info:
        plan_job(data, nodes(2), user="fuzz", wrapper_path=WRAPPER, kill_grace=10)
    assert str(info.value) == "job.nodes: must be an integer >= 1, got 0"
    with pytest.raises(FuzzfileError) as info:
        plan_job("solve", nodes(2), user="fuzz", wrapper_path=WRAPPER, kill_grace=10)
    assert str(info.value) == "job: must be a job mapping, got str"


def test_rank_host_names_fit_a_dns_label():
    assert plan(make_job(name="a" * 61, nodes=2))["ranks"][1]["name"] == "a" * 61 + "-1"
    assert plan_error(make_job(name="a" * 62, nodes=2)) == (
        "jobs.%s: rank host name '%s-1' is longer than 63 characters; use a shorter job name"
        % ("a" * 62, "a" * 62)
    )


# ---------------------------------------------------------------------------
# expansion

ENV = {"A": "alpha", "B_2": "bee", "_U": "under", "EMPTY": "", "DOLLAR": "$A", "SP": "x y"}


@pytest.mark.parametrize(
    "value, expected",
    [
        ("$A", "alpha"),
        ("${A}", "alpha"),
        ("${A}x", "alphax"),
        ("$Ax", ""),  # the name is Ax, unknown
        ("$A-x", "alpha-x"),
        ("$A/$B_2", "alpha/bee"),
        ("$A$B_2", "alphabee"),
        ("$_U", "under"),
        ("$NOPE", ""),
        ("${NOPE}", ""),
        ("pre${NOPE}post", "prepost"),
        ("$EMPTY", ""),
        ("$(ls)", "$(ls)"),
        ("$(echo $A)", "$(echo alpha)"),
        ("`ls`", "`ls`"),
        ("$", "$"),
        ("a$", "a$"),
        ("$$", "$$"),
        ("$$A", "$alpha"),
        ("$1", "$1"),
        ("$1A", "$1A"),
        ("$-", "$-"),
        ("$ A", "$ A"),
        ("${}", "${}"),
        ("${A", "${A"),
        ("${1A}", "${1A}"),
        ("${A B}", "${A B}"),
        ("${A:-x}", "${A:-x}"),
        ("\\$A", "\\alpha"),
        ("'$A'", "'alpha'"),
        ("$DOLLAR", "$A"),  # single pass
        ("${DOLLAR}${A}", "$Aalpha"),
        ("$SP", "x y"),
        ("*", "*"),
        ("~", "~"),
        ("", ""),
    ],
)
def test_expand(value, expected):
    assert expand(value, ENV) == expected


NO_DOLLAR = st.text(st.characters(blacklist_characters="$"))
ENVS = st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]*", fullmatch=True), st.text())


@settings(max_examples=500, deadline=None)
@given(value=NO_DOLLAR, env=ENVS)
def test_expand_leaves_text_without_dollar_alone(value, env):
    assert expand(value, env) == value


@settings(max_examples=300, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]*", fullmatch=True),
    value=st.text(),
    prefix=NO_DOLLAR,
)
def test_expand_is_single_pass(name, value, prefix):
    env = {name: value}
    assert expand(prefix + "${" + name + "}", env) == prefix + value


def test_plan_carries_the_execute_timeout():
    """policy.timeout.execute reaches the head's supervisor in seconds."""
    workflow = parse_workflow(
        "version: v4\njobs:\n  t:\n    image: {uri: docker://x}\n    command: [sleep, '60']\n"
        "    policy: {timeout: {execute: 1m30s}}\n"
    )
    spec = plan_job(select_job(workflow), [{"node": "n1", "address": "10.0.0.1"}],
                    user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10)
    assert spec["timeout"] == 90.0
