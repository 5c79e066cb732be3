"""Local mode, hostile jobs that try to outlive their run (issue 12, hole
1; docs/docsite/rst/guide_security.rst, "No survivors"): each job is an attacker's script
(tests/fuzzfiles/security/survivor-*.yml, the security scenario's), run as
one workflow through run-job.yml. When the play ends no process of any of
them is left, the ones that leave a trace have stopped leaving it, and the
job user cannot leave work for cron or at."""

import os
import subprocess
import time
from pathlib import Path

import pytest

import local_jobs as lj

SECURITY = lj.FUZZFILES / "security"
SOURCES = [(SECURITY / name, None) for name in
           ("survivor-hopper.yml", "survivor-nested.yml", "survivor-later.yml")]
# What the surviving processes would write, a line at each hop or turn.
TRACES = {"survivor-hopper": Path("/tmp/fmn-survivor-hopper"),
          "survivor-nested": Path("/tmp/fmn-survivor-nested")}


@pytest.fixture(scope="module")
def attacks(workdir):
    for trace in TRACES.values():
        trace.unlink(missing_ok=True)
    directory = workdir / "survivors"
    directory.mkdir()
    fuzzfile = lj.combine(directory / "survivors.yml", SOURCES)
    run = lj.run_job(fuzzfile, directory / "logs", {"fuzz_multinode_kill_grace": 1})
    yield run
    lj.unregister(run.jobs)
    if any(lj.job_processes(run.jobs).values()):
        # Survivors (the hole reopened): the machine is put right, as the
        # job user, for the tests after these; a process that forks on is
        # stopped only by a kill of all the job user's processes at once.
        for _unused in range(3):
            subprocess.run(["su", lj.JOB_USER, "-s", "/bin/sh", "-c", "kill -9 -1"], check=False)
            time.sleep(0.5)
    for trace in TRACES.values():
        trace.unlink(missing_ok=True)


def test_every_attack_ran_and_finished(attacks):
    assert attacks.rc == 0, attacks
    assert "survivor-hopper-1 hops" in (attacks.rank_log("survivor-hopper", 1) or ""), attacks
    for job in TRACES:
        assert TRACES[job].exists(), (job, attacks)


@pytest.mark.parametrize("job", ["survivor-hopper", "survivor-nested"])
def test_no_process_of_the_job_is_left(attacks, job):
    assert attacks.state["processes"][job] == [], attacks


@pytest.mark.parametrize("job", sorted(TRACES))
def test_nothing_of_the_job_runs_on(attacks, job):
    """The trace stops growing: nothing of the job is left anywhere, also
    outside its host name."""
    before = TRACES[job].stat().st_size
    time.sleep(1)
    assert TRACES[job].stat().st_size == before, TRACES[job].read_text()[-500:]


@pytest.mark.parametrize("deny", ["/etc/cron.deny", "/etc/at.deny"])
def test_the_job_user_may_not_leave_work_for_later(attacks, deny):
    assert lj.JOB_USER in Path(deny).read_text().split(), deny
    for allow in (deny.replace(".deny", ".allow"),):
        assert not os.path.exists(allow) or lj.JOB_USER not in Path(allow).read_text().split()
    log = attacks.log("survivor-later")
    assert "crontab installed" not in log and "at job queued" not in log, log
