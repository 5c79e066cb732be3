"""Local mode, volumes (on the bare host, in the run's sandbox): a workflow
whose first job writes into an ephemeral volume, in `cwd` on its mount,
and whose second job, 2 ranks, reads it there; a persistent volume keeps
what every run adds. The volumes are at their locations for the jobs only:
a host directory at a mount location keeps what it had, one the host
lacked stays empty; the run's ephemeral volume is gone when it ends, the
persistent one is not. Run twice, as a user would."""

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

import local_jobs as lj

FUZZFILE = """\
version: v1
volumes:
  data:
    reference: volume://user/ephemeral
  keep:
    reference: volume://user/persistent/fmn-local-keep
jobs:
  write-case:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    cwd: DATA
    mounts:
      data: {location: DATA}
      keep: {location: KEEP}
    script: |
      #!/bin/sh
      echo "case of $FB_WORKFLOW_ID" >case.txt
      echo "$FB_WORKFLOW_ID" >>KEEP/runs
      echo "write-case: in $(pwd) as $(id -un): $(ls)"
  read-case:
    image:
      uri: docker://mirror.gcr.io/library/debian:bookworm
    depends-on:
      - name: write-case
    cwd: DATA
    mounts:
      data: {location: DATA}
      keep: {location: KEEP}
    env:
      - MULTINODE_WRAPPER_FORWARD_STREAMS=1
    script: |
      #!/bin/sh
      . /multinode/generic-helper
      exec_all 'echo "$HOSTNAME: $(cat case.txt) runs=$(wc -l <KEEP/runs)"'
    multinode:
      nodes: 2
      implementation: generic
"""


@pytest.fixture(scope="module")
def volume_runs(workdir):
    """Two runs of the workflow; the volume root, the host's directory at
    the mount location DATA (with a file of its own) and KEEP (which the
    host lacks) in a directory of the test's."""
    base = Path(tempfile.mkdtemp(prefix="fmn-local-volumes-", dir="/var/tmp"))
    base.chmod(0o755)
    root, data, keep = base / "volumes", base / "host-data", base / "host-lacks" / "keep"
    data.mkdir()
    (data / "hosts-own").write_text("the host's file\n")
    fuzzfile = workdir / "volumes.yml"
    fuzzfile.write_text(FUZZFILE.replace("DATA", str(data)).replace("KEEP", str(keep)))
    runs = []
    try:
        for number in (1, 2):
            logs = workdir / ("volumes-logs-%d" % number)
            run = lj.run_job(fuzzfile, logs, {"fuzz_multinode_volume_root": str(root)})
            runs.append(run)
            run.ephemeral_after = sorted(os.listdir(root / "ephemeral")) if (root / "ephemeral").exists() else []
            run.host_data_after = sorted(os.listdir(data))
        yield {"runs": runs, "root": root, "data": data, "keep": keep}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_id(run):
    return re.findall(r"Register the job on its nodes for run (\S+)\]", run.output)[0]


def test_both_runs_finish(volume_runs):
    for run in volume_runs["runs"]:
        assert run.rc == 0, run
        assert run.state == lj.cleaned(run.state, run.jobs), run


def test_a_job_works_in_its_volume_as_the_job_user(volume_runs):
    """cwd on the mount, entered by the job user, who writes there; the
    volume holds only what the run put in it."""
    for run in volume_runs["runs"]:
        assert run.lines("write-case") == ["write-case: in %s as fuzz: case.txt" % volume_runs["data"]], run


def test_a_later_job_of_the_run_reads_what_an_earlier_wrote_on_every_rank(volume_runs):
    """The ephemeral volume is the run's: each run's second job reads its own
    run's case; the persistent volume holds one line per run so far."""
    for count, run in enumerate(volume_runs["runs"], 1):
        assert sorted(run.lines("read-case")) == [
            "read-case-%d: case of %s runs=%d" % (rank, run_id(run), count) for rank in (0, 1)], run


def test_the_hosts_own_paths_never_see_the_volumes(volume_runs):
    """The host's directory at the mount location keeps its file and gets
    none of the job's; the location the host lacked is an empty directory."""
    for run in volume_runs["runs"]:
        assert run.host_data_after == ["hosts-own"], run
    assert os.listdir(volume_runs["keep"]) == []


def test_the_ephemeral_volume_ends_with_its_run_and_the_persistent_one_stays(volume_runs):
    root = volume_runs["root"]
    for run in volume_runs["runs"]:
        assert run.ephemeral_after == [], run
    runs = (root / "persistent" / "fmn-local-keep" / "runs").read_text().split()
    assert runs == [run_id(run) for run in volume_runs["runs"]]
