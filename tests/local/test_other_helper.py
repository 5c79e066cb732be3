"""The conformance suite can check another implementation of the helper:
`fuzz_multinode_helper_source` (FUZZ_MULTINODE_HELPER for the suite) installs
that file as /multinode/generic-helper, and the jobs use it. The other
helper here is ours with one line added, so the job shows which one ran."""

import os
import shutil

import local_jobs as lj

MARK = "another generic-helper was sourced on $(hostname)"


def test_another_helper_is_installed_and_used(workdir):
    ours = (lj.REPO / "files" / "generic-helper").read_text()
    other = workdir / "other-generic-helper"
    first, rest = ours.split("\n", 1)
    other.write_text("%s\necho \"%s\"\n%s" % (first, MARK, rest))
    os.chmod(other, 0o755)
    logs = workdir / "other-helper-logs"
    # A copy: run_job keeps the playbook's output beside the Fuzzfile.
    fuzzfile = shutil.copy(lj.EXAMPLES / "generic-multinode-helper.yml", workdir / "other-helper.yml")
    run = lj.run_job(fuzzfile, logs,
                     {"fuzz_multinode_helper_source": str(other)})
    assert run.rc == 0, run
    assert run.lines("generic-multinode-helper") == [
        "another generic-helper was sourced on generic-multinode-helper-0",
        "generic-multinode-helper-0 is the head node",
        "generic-multinode-helper-1 is a worker node",
    ], run
