"""A job whose rank host names `<job>-<rank>` cannot fit a DNS label is
refused by the fuzzfile module, the first task of run-job.yml, before any
host is touched (it used to pass the module and be refused by rank_plan
only after the nodes were prepared; molecule/badinput checks that on real
nodes). The job name alone may still be 63 characters: that is a valid
Fuzzfile, and test_fuzzfile.py keeps it so."""

import pytest
import yaml

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    check_rank_names,
    parse_workflow,
    select_job,
)

from test_fuzzfile import adhoc


def job(name, nodes):
    text = yaml.safe_dump({"version": "v4", "jobs": {name: {
        "image": {"uri": "docker://alpine"}, "command": ["true"],
        "multinode": {"nodes": nodes, "implementation": "generic"}}}})
    return select_job(parse_workflow(text))


def message(name, last):
    return ("jobs.%s: rank host name '%s' is longer than 63 characters; use a shorter job name"
            % (name, last))


@pytest.mark.parametrize("name, nodes", [("a" * 61, 2), ("a" * 61, 10), ("a" * 60, 11), ("a", 10**8)])
def test_rank_names_that_fit(name, nodes):
    check_rank_names(job(name, nodes))


@pytest.mark.parametrize("name, nodes, last", [
    ("a" * 62, 2, "a" * 62 + "-1"),
    ("a" * 61, 11, "a" * 61 + "-10"),
    ("a" * 63, 1, "a" * 63 + "-0"),
])
def test_rank_names_too_long(name, nodes, last):
    with pytest.raises(FuzzfileError) as info:
        check_rank_names(job(name, nodes))
    assert str(info.value) == message(name, last)


def test_the_fuzzfile_module_refuses_them(tmp_path):
    name = "b" * 62
    path = tmp_path / "long.yml"
    path.write_text(yaml.safe_dump({"version": "v4", "jobs": {name: {
        "image": {"uri": "docker://alpine"}, "command": ["true"],
        "multinode": {"nodes": 2, "implementation": "generic"}}}}))
    rc, result = adhoc("fuzz.multinode.fuzzfile", "path=%s" % path)
    assert rc != 0
    assert result["msg"] == "%s: %s" % (path, message(name, name + "-1"))
