"""The job spec of a service and what a job's spec says of the services of
its run (rank_plan): a service's readiness probe and ready timeout; every
rank's FB_ENDPOINT_URL_<NAME> and FB_ENDPOINT_PATH_<NAME> of the services
RUNNING when it starts (and a service's own), their <service>.svc host
names (extra_hosts); the rank_plan options that carry them, checked."""

import json

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import (
    RANK_PLAN_ARGUMENT_SPEC,
    plan_ranks,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError, parse_workflow
from ansible_collections.fuzz.multinode.plugins.module_utils.job_spec import plan_job, plan_task_array

RUN = "20261201T165012Z-a1b2c3"
WORKFLOW = """
version: v4
jobs:
  client:
    image: {uri: "docker://alpine"}
    command: [/bin/sh, -c, 'wget -qO- "$1"', client, "${FB_ENDPOINT_URL_WEB}", "$FB_ENDPOINT_PATH_JUPYTER_LAB"]
    env: [FB_ENDPOINT_URL_WEB=mine, LEVEL=1]
    multinode: {nodes: 2, implementation: generic}
    depends-on: [{name: api, status: RUNNING}, {name: lab, status: RUNNING}]
  sweep:
    image: {uri: "docker://alpine"}
    command: [echo, "$FB_TASK_ID", "$FB_ENDPOINT_URL_WEB"]
    task-array: {start: 1, end: 3}
services:
  api:
    image: {uri: "docker://example.org/api:1"}
    command: [api-server, --root, "${FB_ENDPOINT_PATH_WEB}"]
    multinode: {nodes: 2, implementation: generic}
    network:
      ports: [{name: http, port: 8080}, {name: admin, port: 9090}]
      endpoints:
        - {name: web, port-name: http, path: /api/}
        - {name: admin, port-name: admin, protocol: HTTPS}
    readiness-probe:
      http-get: {port: http, path: /healthz}
      period-seconds: 2
  lab:
    image: {uri: "docker://example.org/lab:1"}
    command: [lab]
    network:
      ports: [{port: 8888}]
      endpoints: [{name: jupyter-lab, path: /lab/}]
"""
WF = parse_workflow(WORKFLOW)
NODES = [{"node": "node-1", "address": "10.0.0.1"}, {"node": "node-2", "address": "10.0.0.2"}]
OPTIONS = dict(user="fuzz", wrapper_path="/multinode/ssh-wrapper", kill_grace=10, run=RUN)


def form(name):
    return json.loads(json.dumps(WF.units[name].to_dict()))


def running(name, address):
    """A service as the workflow runner passes it: from its JSON form."""
    return {"name": name, "address": address, "endpoints": form(name)["endpoints"]}


API = running("api", "10.0.0.7")
LAB = running("lab", "fd00:0::8")


def plan(name, nodes=None, **options):
    nodes = NODES if nodes is None else nodes
    return plan_job(form(name), nodes[:WF.units[name].nodes], **dict(OPTIONS, **options))


# -- a service's own spec --------------------------------------------------------


def test_a_services_spec_has_its_probe_port_a_number_and_its_ready_timeout():
    spec = plan("api")
    assert spec["service"] == {
        "readiness_probe": {"http-get": {"port": 8080, "path": "/healthz", "scheme": "HTTP"},
                            "period-seconds": 2},
        "ready_timeout": 300,
        # as its ready line shows them
        "endpoints": [{"name": "web", "url": "http://10.0.0.1:8080/api/", "scope": None},
                      {"name": "admin", "url": "https://10.0.0.1:9090/", "scope": None}],
    }
    assert plan("api", service_ready_timeout=45)["service"]["ready_timeout"] == 45


def test_a_service_without_a_probe_is_ready_once_started():
    assert plan("lab")["service"] == {"readiness_probe": None, "ready_timeout": 300,
                                      "endpoints": [{"name": "jupyter-lab", "url": "http://10.0.0.1:8888/lab/",
                                                     "scope": None}]}


def test_a_jobs_spec_has_no_service_part():
    spec = plan("client", services=[API, LAB])
    assert spec["service"] is None


def test_a_services_ranks_get_its_own_endpoints_and_name_from_its_rank_0():
    spec = plan("api")
    for rank in spec["ranks"]:
        assert {k: v for k, v in rank["env"].items() if k.startswith("FB_ENDPOINT_")} == {
            "FB_ENDPOINT_URL_WEB": "http://10.0.0.1:8080/api/",
            "FB_ENDPOINT_PATH_WEB": "/api/",
            "FB_ENDPOINT_URL_ADMIN": "https://10.0.0.1:9090/",
            "FB_ENDPOINT_PATH_ADMIN": "/",
        }
    assert spec["extra_hosts"] == [["api.svc", "10.0.0.1"]]
    # as the vendor's files use them: in the service's own command
    assert spec["argv"] == ["api-server", "--root", "/api/"]


def test_a_service_gets_the_running_services_before_its_own():
    spec = plan("lab", services=[API])
    assert spec["extra_hosts"] == [["api.svc", "10.0.0.7"], ["lab.svc", "10.0.0.1"]]
    env = spec["ranks"][0]["env"]
    assert (env["FB_ENDPOINT_URL_WEB"], env["FB_ENDPOINT_URL_JUPYTER_LAB"]) == (
        "http://10.0.0.7:8080/api/", "http://10.0.0.1:8888/lab/")


# -- a job and the running services --------------------------------------------------


def test_every_rank_gets_the_endpoints_of_the_running_services_and_their_host_names():
    spec = plan("client", services=[API, LAB])
    expected = {
        "FB_ENDPOINT_URL_WEB": "http://10.0.0.7:8080/api/",
        "FB_ENDPOINT_PATH_WEB": "/api/",
        "FB_ENDPOINT_URL_ADMIN": "https://10.0.0.7:9090/",
        "FB_ENDPOINT_PATH_ADMIN": "/",
        # an IPv6 address in brackets, normalized; '-' in the name as '_'
        "FB_ENDPOINT_URL_JUPYTER_LAB": "http://[fd00::8]:8888/lab/",
        "FB_ENDPOINT_PATH_JUPYTER_LAB": "/lab/",
    }
    for rank in spec["ranks"]:
        assert {k: v for k, v in rank["env"].items() if k.startswith("FB_ENDPOINT_")} == expected
        assert rank["env"]["LEVEL"] == "1"
    assert spec["extra_hosts"] == [["api.svc", "10.0.0.7"], ["lab.svc", "fd00::8"]]


def test_the_endpoint_variables_expand_in_the_command():
    spec = plan("client", services=[API, LAB])
    assert spec["argv"] == ["/bin/sh", "-c", 'wget -qO- "$1"', "client", "http://10.0.0.7:8080/api/", "/lab/"]


def test_a_jobs_own_value_of_an_endpoint_variable_is_dropped_with_a_note():
    spec = plan("client", services=[API])
    assert spec["ranks"][1]["env"]["FB_ENDPOINT_URL_WEB"] == "http://10.0.0.7:8080/api/"
    assert "jobs.client.env: FB_ENDPOINT_URL_WEB is set by the runtime; the job's value is ignored" in (
        spec["unsupported"])
    # without the service running it is the job's own variable
    alone = plan("client")
    assert alone["ranks"][1]["env"]["FB_ENDPOINT_URL_WEB"] == "mine"
    assert alone["extra_hosts"] == [] and not any("FB_ENDPOINT" in note for note in alone["unsupported"])
    assert alone["argv"][4:] == ["mine", ""]


def test_a_secret_value_of_an_endpoint_variable_is_dropped_with_it():
    # (no argument may expand a secret: the run policy refuses it)
    wf = parse_workflow(WORKFLOW.replace("FB_ENDPOINT_URL_WEB=mine", "FB_ENDPOINT_URL_WEB=secret://user/x")
                        .replace('client, "${FB_ENDPOINT_URL_WEB}", ', "client, "))
    client = json.loads(json.dumps(wf.jobs["client"].to_dict()))
    assert plan_job(client, NODES, **OPTIONS)["secret_env"] == {"FB_ENDPOINT_URL_WEB": "user/x"}
    spec = plan_job(client, NODES, services=[API], **OPTIONS)
    assert spec["secret_env"] == {}
    assert spec["ranks"][0]["env"]["FB_ENDPOINT_URL_WEB"] == "http://10.0.0.7:8080/api/"


def test_each_task_of_a_task_array_gets_them_and_expands_them():
    spec = plan_task_array(form("sweep"), NODES[:1], services=[API], **OPTIONS)
    assert [task["argv"] for task in spec["ranks"]] == [
        ["echo", str(task), "http://10.0.0.7:8080/api/"] for task in (1, 2, 3)]
    assert all(task["env"]["FB_ENDPOINT_PATH_ADMIN"] == "/" for task in spec["ranks"])
    assert spec["extra_hosts"] == [["api.svc", "10.0.0.7"]] and spec["service"] is None


# -- the options, checked ---------------------------------------------------------------


@pytest.mark.parametrize("services, message", [
    ("api", "services: must be a list of services, got str"),
    (["api"], "services[0]: must be a mapping of name, address and endpoints, got str"),
    ([{"name": "api", "address": "10.0.0.7"}],
     "services[0]: must be a mapping of name, address and endpoints, got ['address', 'name']"),
    ([dict(API, name="API")],
     "services[0].name: invalid service name 'API': use at most 63 lowercase letters, digits and "
     "'-', starting and ending with a letter or digit (the name becomes a host name)"),
    ([dict(API, address="node-7")], "services[0].address: must be an IP address, got 'node-7'"),
    ([dict(API, address=None)], "services[0].address: must be an IP address, got None"),
    ([API, dict(API, address="10.0.0.9")], "services[1].name: 'api' is listed twice"),
    ([dict(API, endpoints=[{"name": "web", "port": 80, "protocol": "ftp", "path": "/"}])],
     "services[0].endpoints[0].protocol: must be one of http, https, tcp, udp, grpc (any case), "
     "got 'ftp'"),
    ([dict(API, endpoints="web")], "services[0].endpoints: must be a list, got 'web'"),
    ([API, dict(LAB, endpoints=[{"name": "WEB", "port": 1, "protocol": "tcp", "path": "/"}])],
     "services[1].endpoints: FB_ENDPOINT_URL_WEB is set by service api already; endpoint names "
     "must differ across the run's services"),
])
def test_bad_running_services_are_refused_naming_the_field(services, message):
    with pytest.raises(FuzzfileError) as info:
        plan("client", services=services)
    assert str(info.value) == message


def test_the_service_being_planned_is_not_among_the_running_ones():
    with pytest.raises(FuzzfileError) as info:
        plan("lab", services=[LAB])
    assert str(info.value) == "services[0].name: 'lab' is the one being planned; its own endpoints come from its rank 0"


def test_a_running_service_may_not_set_a_variable_of_the_services_own_endpoints():
    clash = dict(API, name="other", endpoints=[{"name": "jupyter-lab", "port": 1, "protocol": "tcp", "path": "/"}])
    with pytest.raises(FuzzfileError) as info:
        plan("lab", services=[clash])
    assert str(info.value) == (
        "lab's endpoints: FB_ENDPOINT_URL_JUPYTER_LAB is set by service other already; endpoint names "
        "must differ across the run's services")


@pytest.mark.parametrize("timeout", [0, -5, True, 1.5, "300", None])
def test_the_ready_timeout_is_a_positive_number_of_seconds(timeout):
    with pytest.raises(FuzzfileError) as info:
        plan("api", service_ready_timeout=timeout)
    assert str(info.value) == (
        "service_ready_timeout (fuzz_multinode_service_ready_timeout): must be a positive integer "
        "of seconds, got %r" % (timeout,))


def validated(**params):
    result = ArgumentSpecValidator(RANK_PLAN_ARGUMENT_SPEC).validate(
        dict({"job": form("client"), "nodes": NODES}, **params))
    return result.validated_parameters, [str(error) for error in result.errors]


def test_rank_plan_takes_no_running_services_and_300_seconds_by_default():
    params, errors = validated()
    assert errors == []
    assert (params["services"], params["service_ready_timeout"]) == ([], 300)
    spec = plan_ranks(params)[0]["spec"]
    assert (spec["service"], spec["extra_hosts"]) == (None, [])


def test_rank_plan_passes_the_running_services_on():
    params, errors = validated(services=[{"name": "api", "address": "10.0.0.7",
                                          "endpoints": API["endpoints"]}])
    assert errors == []
    spec = plan_ranks(params)[0]["spec"]
    assert spec["extra_hosts"] == [["api.svc", "10.0.0.7"]]
    assert spec["ranks"][0]["env"]["FB_ENDPOINT_URL_ADMIN"] == "https://10.0.0.7:9090/"
    # a service's endpoints may be left out: it has none
    params, errors = validated(services=[{"name": "api", "address": "10.0.0.7"}])
    assert errors == [] and params["services"][0]["endpoints"] == []
    assert plan_ranks(params)[0]["spec"]["extra_hosts"] == [["api.svc", "10.0.0.7"]]
    params, errors = validated(job=form("api"), service_ready_timeout=20)
    assert plan_ranks(params)[0]["spec"]["service"]["ready_timeout"] == 20


@pytest.mark.parametrize("params, message", [
    ({"services": [{"name": "api"}]}, "missing required arguments: address found in services"),
    ({"services": "api"}, "Elements value for option 'services' is of type str and we were "
                          "unable to convert to dict"),
    ({"service_ready_timeout": "soon"}, "argument 'service_ready_timeout' is of type str and "
                                        "we were unable to convert to int"),
])
def test_rank_plan_refuses_options_of_the_wrong_shape_naming_them(params, message):
    _unused, errors = validated(**params)
    assert any(message in error for error in errors), errors
