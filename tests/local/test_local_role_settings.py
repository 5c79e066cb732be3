"""A bad setting of the node, the workflow or the job role (an inventory
or -e variable of the wrong type) is refused by the role's argument spec,
named, before the job runs: run-job.yml enters the three roles at
`tasks_from: run`, which checks the spec once for all hosts instead of on
each (guide_performance, "Run start at scale"; the node role's once when no
host has settings of its own), and must still check it."""

import pytest

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
