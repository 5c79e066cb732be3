"""scripts/bench is not run by the suite (performance is measured there, not
asserted in tests), so this keeps it from rotting: it starts and shows its
rows, its jobs are runnable Fuzzfiles, and the driver's lines are what the
bench checks them against."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from test_every_fuzzfile import run_checks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench  # noqa: E402
import driver  # noqa: E402


def test_help_names_every_row_and_its_target():
    done = subprocess.run([str(ROOT / "scripts/bench"), "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    for row, target in [("one warm wrapper call", "<= 1.5x"), ("8 wrapper calls at once", "<= 1.5x"),
                        ("forwarded output", ">= 0.8x"), ("trivial job, run-job.yml, 9", "<= 2x"),
                        ("trivial job, run-job.yml, N", "<= 2x"),
                        ("trivial 4-rank local-mode job", "<= 3x"), ("Open MPI mpi_hello_world", "<= 1.1x"),
                        ("fan-out: 4 independent one-node", "<= 0.5x"), ("diamond: 1 -> 3 -> 1 one-node", "<= 0.8x")]:
        assert re.search(re.escape(row) + r".*" + re.escape(target), done.stdout), (row, done.stdout)


def test_scale_sizes_must_be_larger_than_the_bench_s_own_cluster():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench.py"), "--rows", "scale", "--scale", "33,5"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "each cluster size must be more than 9" in done.stderr, done.stderr


def test_the_scale_rows_job_runs_on_every_host_of_its_size(tmp_path):
    measured = bench.Bench("node-image", None, 20, 3, tmp_path, scale=[33, 64])
    measured.write_fuzzfile()
    jobs = run_checks(measured.fuzzfile).jobs
    assert {name: jobs[name].nodes for name in ("trivial", "trivial-33", "trivial-64")} == {
        "trivial": 9, "trivial-33": 33, "trivial-64": 64}


def test_a_row_waits_for_a_quiet_machine_but_not_forever(monkeypatch):
    monkeypatch.setattr(bench, "QUIET_WINDOW", 0.2)
    monkeypatch.setattr(bench, "QUIET_BUSY", 1.01)  # any machine is quiet enough
    assert "NOT QUIET" not in bench.quiet()
    monkeypatch.setattr(bench, "QUIET_BUSY", 0.0)  # no machine is
    monkeypatch.setattr(bench, "QUIET_LONGEST", 0.5)
    said = bench.quiet()
    assert "NOT QUIET" in said and re.search(r"\(\d s of waiting\)", said), said


def test_bench_jobs_are_runnable_fuzzfiles():
    jobs = set(run_checks(Path("bench/jobs.yml")).jobs)
    assert {"trivial", "trivial-local", "latency", "streams"} <= jobs


def test_bench_workflows_are_runnable_fuzzfiles_of_the_shapes_the_rows_name():
    """The fan-out: 4 independent one-node jobs; the diamond: 1 -> 3 -> 1.
    Every job one node of 10 s (the rows' titles say so)."""
    assert [name for name, _unused, _unused in bench.WORKFLOW_ROWS] == ["fan-out", "diamond"]
    fan = run_checks(ROOT / "bench" / "fan-out.yml")
    assert [(job.name, [dep.name for dep in job.depends_on]) for job in fan.jobs.values()] == [
        ("fan-%d" % index, []) for index in range(1, 5)]
    diamond = run_checks(ROOT / "bench" / "diamond.yml")
    assert [(job.name, [dep.name for dep in job.depends_on]) for job in diamond.jobs.values()] == [
        ("top", []), ("side-1", ["top"]), ("side-2", ["top"]), ("side-3", ["top"]),
        ("bottom", ["side-1", "side-2", "side-3"])]
    for job in list(fan.jobs.values()) + list(diamond.jobs.values()):
        assert (job.nodes, job.command) == (1, ["sleep", "10"]), job.name


def test_driver_lines_are_100_bytes_and_tell_their_place():
    assert {len(driver.bench_line(rep, n)) for rep in (0, 9) for n in (0, 1, driver.LINES - 1)} == {100}
    assert driver.LINES * driver.LINE_BYTES == 50_000_000 == bench.LINES * bench.LINE_BYTES
    assert driver.bench_line(3, 27) == b"3 000000027 " + b"b" * 87 + b"\n"


def test_node_side_code_is_stdlib_python_3_11():
    tree = ast.parse((ROOT / "bench/driver.py").read_text(), feature_version=(3, 11))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names
    compile(bench.WRITE_LINES_FILES, "WRITE_LINES_FILES", "exec")
