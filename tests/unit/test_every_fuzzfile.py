"""Every Fuzzfile shipped in examples/ and tests/fuzzfiles/ is either
runnable (it passes every check run-job.yml makes before touching a host) or,
under tests/fuzzfiles/badinput/, refused. The badinput scenario checks each
refusal's exact message through the playbook."""

from pathlib import Path

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import (
    FuzzfileError,
    check_rank_names,
    parse_workflow,
    require_runnable,
    select_run,
)

ROOT = Path(__file__).resolve().parents[2]
# Refused before any host is touched. The other badinput Fuzzfiles are
# valid: hostile values that must arrive intact, and a job too big for the
# scenario's inventory.
REFUSED = {"tests/fuzzfiles/mpi/gasnet.yml",
           # molecule/workflow checks these refusals on its cluster
           "tests/fuzzfiles/workflow/mount-location-relative.yml",
           "tests/fuzzfiles/workflow/volume-path-escaping.yml"} | {
    "tests/fuzzfiles/badinput/%s.yml" % name for name in (
        "env-mapping", "env-name", "env-nul", "gasnet", "long-name", "malformed-yaml",
        "missing-job", "name-metacharacters", "python-tag", "unknown-key", "wrong-type")}


def fuzzfiles():
    found = sorted((ROOT / "examples").glob("*.yml")) + sorted((ROOT / "tests" / "fuzzfiles").rglob("*.yml"))
    return [path.relative_to(ROOT) for path in found]


def run_checks(path):
    """The checks of the fuzz.multinode.fuzzfile module, for the whole workflow."""
    text = (ROOT / path).read_text(encoding="utf-8", errors="strict")
    workflow = parse_workflow(text)
    for job in select_run(workflow):
        require_runnable(job)
        check_rank_names(job)
    return workflow


def test_there_are_fuzzfiles_to_check():
    assert len(fuzzfiles()) > 40
    assert REFUSED <= {str(path) for path in fuzzfiles()}


@pytest.mark.parametrize("path", fuzzfiles(), ids=str)
def test_fuzzfile_is_runnable_or_refused_as_intended(path):
    if str(path) in REFUSED:
        with pytest.raises(FuzzfileError):
            run_checks(path)
    else:
        assert run_checks(path).units
