"""A service in the model: what it needs to run, read from the Fuzzfile
(its network.ports, network.endpoints, the readiness probe's port by name)
and from its JSON form, every refusal naming the field; and services in the
run (select_run, the fuzzfile task), each admitted or refused before any
host is touched."""

import json

import pytest
import yaml

from ansible_collections.fuzz.multinode.plugins.module_utils.controller_tasks import load_fuzzfile
from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    Endpoint,
    FuzzfileError,
    Port,
    admit,
    load_job,
    parse_workflow,
    require_runnable,
    select_run,
)

IMAGE = {"uri": "docker://example.org/api:1"}
TYPE_NOTE = ("ingress kinds are not supported (there is no ingress: an endpoint is reached at "
             "its service's rank 0 address); ignored")


def service(**fields):
    data = {"image": IMAGE, "command": ["serve"]}
    data.update(fields)
    return data


def workflow(services, jobs=None):
    data = {"version": "v4", "services": services}
    if jobs is not None:
        data["jobs"] = jobs
    return parse_workflow(yaml.safe_dump(data, sort_keys=False))


def api(ports=None, endpoints=None, **fields):
    network = {}
    if ports is not None:
        network["ports"] = ports
    if endpoints is not None:
        network["endpoints"] = endpoints
    fields = {key.replace("_", "-"): value for key, value in fields.items()}
    return workflow({"api": service(network=network, **fields)}).service_defs["api"]


def error(ports=None, endpoints=None, **fields):
    with pytest.raises(FuzzfileError) as info:
        api(ports, endpoints, **fields)
    return str(info.value)


TWO_PORTS = [{"name": "http", "port": 8080}, {"name": "admin", "port": 9090, "protocol": "tcp"}]


# -- network.ports ----------------------------------------------------------------


def test_ports_are_normalized_name_optional_protocol_upper_case_tcp_by_default():
    assert api(ports=[{"name": "http", "port": 8080}, {"port": 53, "protocol": "udp"},
                      {"port": 22, "protocol": "Tcp"}]).ports == [
        Port("http", 8080, "TCP"), Port(None, 53, "UDP"), Port(None, 22, "TCP")]
    assert api().ports == [] and api().endpoints == []


def test_two_ports_of_one_name_are_refused():
    assert error(ports=[{"name": "http", "port": 80}, {"name": "http", "port": 81}]) == (
        "services.api.network.ports[1].name: 'http' is the name of services.api.network.ports[0] "
        "too; port names must differ")


# -- network.endpoints: accepted forms ---------------------------------------------


def test_an_endpoints_port_is_its_port_name_its_port_or_the_services_only_port():
    endpoints = api(TWO_PORTS, [{"name": "web", "port-name": "admin"},
                                {"name": "raw", "port": 7000}]).endpoints
    assert endpoints == [Endpoint("web", 9090, "http", "/"), Endpoint("raw", 7000, "http", "/")]
    assert api([{"port": 8888}], [{"name": "web"}]).endpoints == [Endpoint("web", 8888, "http", "/")]


@pytest.mark.parametrize("protocol, normalized", [
    ("http", "http"), ("HTTPS", "https"), ("Tcp", "tcp"), ("udp", "udp"), ("gRPC", "grpc")])
def test_an_endpoints_protocol_is_any_case_stored_lower_case(protocol, normalized):
    assert api(TWO_PORTS, [{"name": "e", "port": 1, "protocol": protocol}]).endpoints[0].protocol == normalized


def test_an_endpoints_path_is_kept_and_slash_by_default():
    endpoints = api(TWO_PORTS, [{"name": "a", "port": 1, "path": "/lab/tree%20x/"},
                                {"name": "b", "port": 1}]).endpoints
    assert [e.path for e in endpoints] == ["/lab/tree%20x/", "/"]


def test_an_endpoints_type_is_accepted_and_noted_as_ignored():
    unit = api(TWO_PORTS, [{"name": "a", "port": 1, "type": "subdomain"}])
    assert unit.endpoints == [Endpoint("a", 1, "http", "/")]
    assert unit.unsupported == ["services.api.network.endpoints[0].type: %s" % TYPE_NOTE]


@pytest.mark.parametrize("name", ["a", "web", "Jupyter-Lab", "x9", "a" * 63])
def test_endpoint_names_are_dns_label_like(name):
    assert api(TWO_PORTS, [{"name": name, "port": 1}]).endpoints[0].name == name


# -- network.endpoints: refusals, each naming the field -------------------------------

NAME_RULE = ("must be letters, digits and '-', starting and ending with a letter or digit, at most "
             "63 characters (it names the variables FB_ENDPOINT_URL_<NAME> and "
             "FB_ENDPOINT_PATH_<NAME>), got %s")
E0 = "services.api.network.endpoints[0]"


@pytest.mark.parametrize("endpoint, message", [
    ({"port": 1}, E0 + ".name: required (a name such as web)"),
    ({"name": "", "port": 1}, E0 + ".name: must not be empty"),
    ({"name": 7, "port": 1}, E0 + ".name: must be a string, got 7 (quote it in YAML)"),
    ({"name": "a_b", "port": 1}, E0 + ".name: " + NAME_RULE % "'a_b'"),
    ({"name": "-a", "port": 1}, E0 + ".name: " + NAME_RULE % "'-a'"),
    ({"name": "a" * 64, "port": 1}, E0 + ".name: " + NAME_RULE % repr("a" * 57 + "...")),
    ({"name": "e", "url": "/"},
     E0 + ".url: unknown key; expected one of name, path, port, port-name, protocol, scope, type"),
    ({"name": "e", "port-name": "http", "port": 8080}, E0 + ": has both port-name and port; give one"),
    ({"name": "e", "port-name": "x"},
     E0 + ".port-name: no port named 'x' in services.api.network.ports (http, admin)"),
    ({"name": "e", "port-name": ""}, E0 + ".port-name: must not be empty"),
    ({"name": "e"}, E0 + ".port-name: needs port-name or port: services.api.network.ports has 2 "
     "ports, not one"),
    ({"name": "e", "port": 0}, E0 + ".port: must be a port number from 1 to 65535, got 0"),
    ({"name": "e", "port": "8080"}, E0 + ".port: must be a port number from 1 to 65535, got '8080'"),
    ({"name": "e", "port": 1, "protocol": "ftp"},
     E0 + ".protocol: must be one of http, https, tcp, udp, grpc (any case), got 'ftp'"),
    ({"name": "e", "port": 1, "path": "lab/"},
     E0 + ".path: must be an absolute URL path (/ and then printable ASCII without spaces, '?' or "
     "'#'), got 'lab/'"),
    ({"name": "e", "port": 1, "path": "/a b"},
     E0 + ".path: must be an absolute URL path (/ and then printable ASCII without spaces, '?' or "
     "'#'), got '/a b'"),
    ({"name": "e", "port": 1, "path": "/a?b=1"},
     E0 + ".path: must be an absolute URL path (/ and then printable ASCII without spaces, '?' or "
     "'#'), got '/a?b=1'"),
    ({"name": "e", "port": 1, "type": 3}, E0 + ".type: must be a string, got 3 (quote it in YAML)"),
])
def test_a_bad_endpoint_is_refused_naming_the_field(endpoint, message):
    assert error(TWO_PORTS, [endpoint]) == message


def test_an_endpoint_without_a_port_needs_a_service_with_one_port():
    assert error(None, [{"name": "e"}]) == (
        E0 + ".port-name: needs port-name or port: services.api.network.ports has no ports")


def test_endpoint_names_differ_within_a_service_and_across_the_workflow_in_any_case():
    assert error(TWO_PORTS, [{"name": "web", "port": 1}, {"name": "WEB", "port": 2}]) == (
        "services.api.network.endpoints[1].name: 'WEB' is the name of "
        "services.api.network.endpoints[0] too; endpoint names must differ (in any case)")
    with pytest.raises(FuzzfileError) as info:
        workflow({"a": service(network={"ports": [{"port": 1}], "endpoints": [{"name": "web"}]}),
                  "b": service(network={"ports": [{"port": 2}],
                                        "endpoints": [{"name": "x"}, {"name": "Web"}]})})
    assert str(info.value) == (
        "services.b.network.endpoints[1].name: 'Web' is the name of services.a.network.endpoints[0] "
        "too; a workflow's endpoint names must differ (in any case): each names the variables "
        "FB_ENDPOINT_URL_<NAME> and FB_ENDPOINT_PATH_<NAME>")


def test_a_job_has_no_ports_or_endpoints():
    with pytest.raises(FuzzfileError) as info:
        workflow({}, jobs={"a": service(network={"endpoints": []})})
    assert str(info.value) == (
        "jobs.a.network.endpoints: unknown key; expected one of expose-tcp, expose-udp, isolated")


# -- what of network is carried out, what is noted -------------------------------------


def test_a_services_ports_endpoints_and_host_networking_are_carried_out_the_rest_noted():
    assert api(TWO_PORTS, [{"name": "e", "port": 1}], ).unsupported == []
    assert workflow({"api": service(network={"host": True, "ports": TWO_PORTS})}
                    ).service_defs["api"].unsupported == []
    unit = workflow({"api": service(network={"host": False, "isolated": True, "expose-tcp": [80]})}
                    ).service_defs["api"]
    assert unit.unsupported == [
        "services.api.network.isolated: network settings are not supported yet; ignored",
        "services.api.network.expose-tcp: network settings are not supported yet; ignored",
        "services.api.network.host: false is not supported: a service runs on its nodes' own "
        "network, as with host: true; ignored"]
    # a job's network section is noted as before
    job = workflow({}, jobs={"a": service(network={"isolated": True})}).jobs["a"]
    assert job.unsupported == ["jobs.a.network: network settings are not supported yet; ignored"]


# -- the readiness probe's port by name ------------------------------------------------


@pytest.mark.parametrize("handler", ["http-get", "tcp-socket"])
def test_a_probes_port_given_by_name_is_resolved_to_its_number(handler):
    unit = api(TWO_PORTS, readiness_probe={handler: {"port": "admin"}, "period-seconds": 2})
    assert unit.readiness_probe[handler]["port"] == 9090
    assert unit.readiness_probe["period-seconds"] == 2


def test_a_probes_port_number_need_not_be_a_declared_port():
    assert api(TWO_PORTS, readiness_probe={"tcp-socket": {"port": 5432}}).readiness_probe == {
        "tcp-socket": {"port": 5432}}


def test_a_probes_unknown_port_name_is_refused_naming_the_field_and_the_ports():
    assert error(TWO_PORTS, readiness_probe={"http-get": {"port": "x"}}) == (
        "services.api.readiness-probe.http-get.port: no port named 'x' in "
        "services.api.network.ports (http, admin)")
    assert error(None, readiness_probe={"tcp-socket": {"port": "db"}}) == (
        "services.api.readiness-probe.tcp-socket.port: no port named 'db' in "
        "services.api.network.ports (none)")


# -- the JSON form -----------------------------------------------------------------------


def form(**changes):
    data = json.loads(json.dumps(api(TWO_PORTS, [{"name": "web", "port-name": "http"}],
                                     readiness_probe={"http-get": {"port": "http"}}).to_dict()))
    data.update(changes)
    return data


def test_the_json_form_keeps_ports_endpoints_and_the_resolved_probe():
    data = form()
    assert data["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"},
                             {"name": "admin", "port": 9090, "protocol": "TCP"}]
    assert data["endpoints"] == [{"name": "web", "port": 8080, "protocol": "http", "path": "/", "scope": None}]
    assert data["readiness_probe"] == {"http-get": {"port": 8080, "scheme": "HTTP"}}
    unit = load_job(data)
    assert unit.ports[0] == Port("http", 8080, "TCP") and unit.endpoints == [Endpoint("web", 8080, "http", "/")]


def test_an_older_form_without_ports_or_endpoints_still_loads():
    data = form()
    del data["ports"], data["endpoints"]
    data["readiness_probe"] = {"tcp-socket": {"port": 8080}}
    unit = load_job(data)
    assert (unit.ports, unit.endpoints) == ([], [])


@pytest.mark.parametrize("changes, message", [
    ({"endpoints": [{"name": "web", "port": 8080, "protocol": "http"}]}, "job.endpoints[0].path: required"),
    ({"endpoints": [{"name": "web", "port": 8080, "protocol": "ftp", "path": "/"}]},
     "job.endpoints[0].protocol: must be one of http, https, tcp, udp, grpc (any case), got 'ftp'"),
    ({"endpoints": [{"name": "web", "port": 1, "protocol": "http", "path": "/", "port-name": "x"}]},
     "job.endpoints[0].port-name: unknown key; expected one of name, path, port, protocol, scope "
     "(did you mean 'port'?)"),
    ({"ports": [{"name": "a", "port": 1, "protocol": "SCTP"}]},
     "job.ports[0].protocol: must be TCP or UDP (any case), got 'SCTP'"),
    ({"readiness_probe": {"http-get": {"port": "nope"}}},
     "job.readiness_probe.http-get.port: no port named 'nope' in job.ports (http, admin)"),
])
def test_a_bad_json_form_is_refused_naming_the_field(changes, message):
    with pytest.raises(FuzzfileError) as info:
        load_job(form(**changes))
    assert str(info.value) == message


def test_a_probe_port_by_name_in_a_form_made_by_hand_is_resolved():
    assert load_job(form(readiness_probe={"tcp-socket": {"port": "admin"}})).readiness_probe == {
        "tcp-socket": {"port": 9090}}


# -- services in the run --------------------------------------------------------------

MIXED = {
    "version": "v4",
    "jobs": {"client": {"image": IMAGE, "command": ["curl", "${FB_ENDPOINT_URL_WEB}"],
                        "depends-on": [{"name": "api", "status": "RUNNING"}]}},
    "services": {"api": service(network={"ports": [{"port": 8080}], "endpoints": [{"name": "web"}]})},
}


def test_the_run_holds_services_and_jobs_in_dependency_order(tmp_path):
    path = tmp_path / "mixed.yml"
    path.write_text(yaml.safe_dump(MIXED))
    result, warnings = load_fuzzfile({"path": str(path), "job": None, "secret_names": []})
    assert [(unit["name"], unit["kind"]) for unit in result["run"]] == [("api", "service"), ("client", "job")]
    assert result["run"][0]["endpoints"] == [{"name": "web", "port": 8080, "protocol": "http", "path": "/",
                                              "scope": None}]
    assert all(unit["admitted"] for unit in result["run"])
    assert result["job"]["name"] == "client"  # the only job
    assert not any("service" in warning for warning in warnings), warnings
    one, _unused = load_fuzzfile({"path": str(path), "job": "api", "secret_names": []})
    assert [unit["name"] for unit in one["run"]] == ["api"] and one["job"]["kind"] == "service"


def test_a_service_without_command_or_script_is_refused_before_any_host_is_touched(tmp_path):
    data = dict(MIXED, services={"api": {"image": IMAGE}})
    path = tmp_path / "bare.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(FuzzfileError) as info:
        load_fuzzfile({"path": str(path), "job": None, "secret_names": []})
    assert str(info.value) == (
        "%s: services.api: needs a command or a script to run here: fuzz.multinode starts a "
        "service's command in its image, not the image's own entry point" % path)


def test_a_service_that_is_a_task_array_is_refused():
    unit = workflow({"api": service(**{"task-array": {"start": 1, "end": 2}})}).service_defs["api"]
    with pytest.raises(FuzzfileError) as info:
        require_runnable(unit)
    assert str(info.value) == (
        "services.api.task-array: a service cannot be a task array: a service is one long-running "
        "process, ready and reached at its rank 0; use multinode for a service on several nodes")


def test_a_services_refusals_name_it_as_a_service():
    unit = workflow({"api": service(env=["TOKEN=secret://user/token"])}).service_defs["api"]
    with pytest.raises(FuzzfileError) as info:
        admit(unit, secret_names=[])
    assert str(info.value).startswith(
        "services.api.env.TOKEN: secret://user/token is not defined in fuzz_multinode_secrets")
    long_name = "s" * 62
    unit = workflow({long_name: service(multinode={"nodes": 11, "implementation": "generic"})}
                    ).service_defs[long_name]
    with pytest.raises(FuzzfileError) as info:
        admit(unit)
    assert str(info.value) == ("services.%s: rank host name '%s-10' is longer than 63 characters; use "
                               "a shorter service name" % (long_name, long_name))


def test_a_workflow_of_services_only_runs_them():
    wf = workflow({"db": service(), "api": service(**{"depends-on": [{"name": "db", "status": "RUNNING"}]})})
    assert [unit.name for unit in select_run(wf)] == ["db", "api"]
