"""The same_settings filter: whether a role's settings are the same on
every host, so that its argument spec is checked once rather than on each."""

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError, AnsibleUndefinedVariable
from jinja2 import StrictUndefined
from jinja2.exceptions import TemplateSyntaxError, UndefinedError

from ansible_collections.fuzz.multinode.plugins.filter.same_settings import same_settings

NAMES = ["fuzz_multinode_job_user", "fuzz_multinode_ssh_alive_count"]


def test_hosts_without_settings_of_their_own_are_the_same():
    hostvars = {"a": {"other": 1}, "b": {"other": 2}}
    assert same_settings(["a", "b"], hostvars, NAMES)


def test_the_same_values_everywhere_are_the_same():
    hostvars = {host: {"fuzz_multinode_job_user": "fuzz", "fuzz_multinode_ssh_alive_count": "soon",
                       "other": host} for host in "abc"}
    assert same_settings(["a", "b", "c"], hostvars, NAMES)


def test_a_value_differing_on_one_host_is_not():
    hostvars = {host: {"fuzz_multinode_ssh_alive_count": 3} for host in "abc"}
    hostvars["c"]["fuzz_multinode_ssh_alive_count"] = "many"
    assert not same_settings(["a", "b", "c"], hostvars, NAMES)
    assert same_settings(["a", "b"], hostvars, NAMES)


def test_a_value_on_one_host_only_is_not():
    hostvars = {"a": {}, "b": {"fuzz_multinode_job_user": "fuzz"}}
    assert not same_settings(["a", "b"], hostvars, NAMES)
    assert not same_settings(["b", "a"], hostvars, NAMES)


def test_only_the_named_settings_count():
    hostvars = {"a": {"fuzz_multinode_job_user": "x"}, "b": {"fuzz_multinode_job_user": "y"}}
    assert same_settings(["a", "b"], hostvars, ["fuzz_multinode_ssh_alive_count"])
    assert not same_settings(["a", "b"], hostvars, iter(NAMES))


def test_nested_values_are_compared_whole():
    hostvars = {"a": {"fuzz_multinode_job_user": {"x": [1, 2]}}, "b": {"fuzz_multinode_job_user": {"x": [1, 2]}}}
    assert same_settings(["a", "b"], hostvars, NAMES)
    hostvars["b"]["fuzz_multinode_job_user"]["x"].append(3)
    assert not same_settings(["a", "b"], hostvars, NAMES)


def test_an_undefined_value_or_an_unknown_host_is_not():
    """Ansible 2.19 templates an undefined variable to a Marker (a jinja2
    Undefined), older versions raise: either way each host checks."""
    undefined = {host: {"fuzz_multinode_job_user": StrictUndefined(name="role_path")} for host in "ab"}
    assert not same_settings(["a", "b"], undefined, NAMES)
    nested = {host: {"fuzz_multinode_job_user": [StrictUndefined(name="role_path")]} for host in "ab"}
    assert not same_settings(["a", "b"], nested, NAMES)
    assert not same_settings(["a", "b"], {"a": {}, "b": StrictUndefined(name="hostvars['b']")}, NAMES)


class Raising(dict):
    """A host's variables whose templating raises `error`."""

    def __init__(self, error, **values):
        super().__init__(**values)
        self.error = error

    def __getitem__(self, key):
        raise self.error


@pytest.mark.parametrize("error", [
    AnsibleUndefinedVariable("'role_path' is undefined"),  # older Ansible raises rather than give a Marker
    AnsibleFilterError("a filter of the value failed"),
    UndefinedError("'dict object' has no attribute 'x'"),  # jinja2's own, through a lazy value
    TemplateSyntaxError("unexpected '}'", 1),
])
def test_a_value_that_cannot_be_templated_is_not(error):
    assert not same_settings(["a", "b"], {"a": Raising(error, fuzz_multinode_job_user=1), "b": {}}, NAMES)
    assert not same_settings(["a", "b"], {"a": {}, "b": Raising(error, fuzz_multinode_job_user=1)}, NAMES)


def test_a_value_ansible_cannot_template_is_not():
    """Ansible's own hostvars (2.19 and later): a trusted template that
    fails (a division by zero, an undefined variable) raises when read."""
    trust_as_template = pytest.importorskip("ansible.template").__dict__.get("trust_as_template")
    if trust_as_template is None:
        pytest.skip("Ansible before 2.19 trusts every template")
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVarsVars

    for template in ("{{ 1 // 0 }}", "{{ fuzz_multinode_nowhere }}"):
        hostvars = {"a": HostVarsVars({"fuzz_multinode_job_user": "fuzz"}, loader=DataLoader(), host="a"),
                    "b": HostVarsVars({"fuzz_multinode_job_user": trust_as_template(template)},
                                      loader=DataLoader(), host="b")}
        assert not same_settings(["a", "b"], hostvars, NAMES)


def test_an_error_that_is_no_templating_error_is_not_hidden():
    """Only what templating raises means "check on every host": anything
    else is a bug of the filter or its caller, and says so."""
    with pytest.raises(RuntimeError, match="a bug"):
        same_settings(["a", "b"], {"a": Raising(RuntimeError("a bug"), fuzz_multinode_job_user=1), "b": {}}, NAMES)


@pytest.mark.parametrize("hosts", ["node1", 3, None, {"a": 1}])
def test_hosts_that_are_no_list_of_hosts_are_not(hosts):
    """A job's hosts (fuzz_multinode_rank_hosts) set to something else: each
    host's own check says what is wrong with it."""
    assert not same_settings(hosts, {"a": {}, "n": {}}, NAMES)


def test_no_hosts_or_one_host_is_the_same():
    assert same_settings([], {}, NAMES)
    assert same_settings(["a"], {"a": {"fuzz_multinode_job_user": "x"}}, NAMES)


# The roles' run.yml: each checks its settings with validate_argument_spec,
# run_once as same_settings of its hosts says. Rendered here with jinja2 (the
# filter under its collection name) for hosts a local-mode run cannot have:
# a job's second host, and a host of the play that does not run the job.
ROLES = Path(__file__).resolve().parents[4] / "roles"


def _check_task(role):
    tasks = yaml.safe_load((ROLES / role / "tasks" / "run.yml").read_text())
    return next(task for task in tasks if "ansible.builtin.validate_argument_spec" in task)


def _checks_once(role, hostvars, **variables):
    """Whether the role's check runs once (run_once rendered) with
    `hostvars`, the role's own setting names as its options."""
    task = _check_task(role)
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    environment = jinja2.Environment()
    environment.filters["fuzz.multinode.same_settings"] = same_settings
    variables.update({name: options for name in task["vars"]}, hostvars=hostvars)
    rendered = environment.from_string(task["run_once"]).render(variables)
    assert rendered in ("True", "False"), rendered
    return rendered == "True"


@pytest.mark.parametrize("role", ["node", "workflow", "job"])
def test_every_role_checks_on_each_host_when_one_has_its_own_and_stops_on_any(role):
    task = _check_task(role)
    assert task["any_errors_fatal"] is True
    hosts = {"ansible_play_hosts_all": ["a", "b", "c"], "fuzz_multinode_rank_hosts": ["a", "b", "c"]}
    same = {host: {"fuzz_multinode_job_user": "fuzz"} for host in "abc"}
    assert _checks_once(role, same, **hosts)
    own = dict(same, b={"fuzz_multinode_job_user": "other"})  # a setting of all three roles
    assert not _checks_once(role, own, **hosts)


def test_the_job_role_compares_the_job_hosts_only():
    """The workflow role enters the job role on the job's hosts
    (fuzz_multinode_rank_hosts, step.yml): a job's second host with a value
    of its own is checked on each; a host of the play outside the job does
    not make every job check on each host."""
    hostvars = {host: {} for host in "abcd"}
    hostvars["d"] = {"fuzz_multinode_kill_grace": "soon"}
    play = {"ansible_play_hosts_all": ["a", "b", "c", "d"]}
    assert _checks_once("job", hostvars, fuzz_multinode_rank_hosts=["a", "b"], **play)
    assert not _checks_once("job", hostvars, fuzz_multinode_rank_hosts=["a", "d"], **play)
    assert not _checks_once("job", hostvars, fuzz_multinode_rank_hosts=["c", "d"], **play)
