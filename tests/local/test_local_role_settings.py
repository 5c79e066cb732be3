"""A bad setting of the node, the workflow or the job role (an inventory
or -e variable of the wrong type) is refused by the role's argument spec,
named, before the job runs: run-job.yml enters the three roles at
`tasks_from: run`, which checks the spec once for all hosts instead of on
each when no host has settings of its own (guide_performance, "Run start at
scale"), on each host otherwise, and must still check it."""

import sys

import pytest
import yaml

import local_jobs as lj

ONE_JOB = """\
version: v4
jobs:
  settings-checked:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    command: [/bin/sh, -c, "echo settings-checked ran"]
"""


@pytest.mark.parametrize("setting, value", [
    ("fuzz_multinode_ssh_alive_count", "many"),  # the node role's
    ("fuzz_multinode_jobs_at_once", "many"),  # the workflow role's
    ("fuzz_multinode_kill_grace", "soon"),  # the job role's
])
def test_a_bad_role_setting_is_refused_naming_it(workdir, setting, value):
    directory = workdir / ("settings-" + setting)
    directory.mkdir()
    fuzzfile = directory / "settings.yml"
    fuzzfile.write_text(ONE_JOB)
    run = lj.run_job(fuzzfile, directory / "logs", {setting: value})
    assert run.rc != 0, run.output[-6000:]
    assert "argument '%s' is of type str and we were unable to convert to int" % setting in run.output, \
        run.output[-6000:]
    assert "settings-checked ran" not in run.output
    assert "Traceback" not in run.output


TWO_NODES = """\
version: v4
jobs:
  settings-checked:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    command: [/bin/sh, -c, "echo settings-checked ran"]
    multinode:
      nodes: 2
      implementation: generic
"""


def test_a_bad_setting_of_a_host_not_the_first_is_refused_naming_it(workdir):
    """A host's own value of a workflow role setting (host_vars), on a host
    that is not the play's first, is checked too: the roles' run.yml checks
    once only when every host has the same settings, and on each host
    otherwise. Local mode with two hosts: an inventory of localhost and
    127.0.0.1 (both this machine, still local mode), a job of 2 nodes so
    that both are the run's hosts, localhost first. Checked on the first
    host only, the bad value would pass and the job would run; a bad value
    on one host stops the whole run, as it does on every host.

    The job role's settings cannot be had this way: in local mode a job
    runs on one host (the first), so its role is never entered on another;
    tests/unit/plugins/filter/test_same_settings.py has the decision."""
    directory = workdir / "settings-host-vars"
    directory.mkdir()
    fuzzfile = directory / "settings.yml"
    fuzzfile.write_text(TWO_NODES)
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False}
    inventory = directory / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"multinode": {"hosts": {
        "localhost": dict(host), "127.0.0.1": dict(host)}}}}}, sort_keys=False))
    (directory / "host_vars").mkdir()
    (directory / "host_vars" / "127.0.0.1.yml").write_text("fuzz_multinode_jobs_at_once: many\n")
    # One host at a time: both hosts are this machine, whose node
    # preparation must not run twice at once.
    run = lj.run_job(fuzzfile, directory / "logs", args=("-i", str(inventory), "--forks", "1"))
    assert run.rc != 0, run.output[-6000:]
    refusal = "argument 'fuzz_multinode_jobs_at_once' is of type str and we were unable to convert to int"
    assert refusal in run.output, run.output[-6000:]
    refused_on = [line for line in run.output.splitlines() if line.startswith("fatal: [")]
    assert refused_on and all(line.startswith("fatal: [127.0.0.1]") for line in refused_on), run.output[-6000:]
    assert "settings-checked ran" not in run.output
    assert "Traceback" not in run.output
