"""The same_settings filter: whether a role's settings are the same on
every host, so that its argument spec is checked once rather than on each."""

from jinja2 import StrictUndefined

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
        def __getitem__(self, key):
            raise RuntimeError("cannot template")

    assert not same_settings(["a", "b"], {"a": Raising(fuzz_multinode_job_user=1), "b": {}}, NAMES)


def test_no_hosts_or_one_host_is_the_same():
    assert same_settings([], {}, NAMES)
    assert same_settings(["a"], {"a": {"fuzz_multinode_job_user": "x"}}, NAMES)
