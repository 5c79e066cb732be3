"""Tests for files/generic-helper, the POSIX sh helper sourced by job scripts.

Each test runs a real script that sources the real helper, under dash and
under busybox sh, on a fake cluster on this machine: a `hostname` shim first
in PATH prints `job-0` (rank 0), MULTINODE_HOSTLIST_NOSLOTS is
`job-0,job-1,job-2`, and MULTINODE_SSH_WRAPPER is a stand-in with ssh's argv
contract (`WRAPPER HOST CMD [ARGS...]`) that runs the joined command locally
with `sh -c`, with a clean environment in which HOSTNAME and RANK are the
worker's own, as on a real worker.
"""

import os
import shutil
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "files", "generic-helper")
WORKERS = ["job-1", "job-2"]
NODES = ["job-0"] + WORKERS

SHELLS = {"dash": ["dash"], "busybox": ["busybox", "sh"]}

HOSTNAME_SHIM = """#!/bin/sh
echo job-0
"""

# The stand-in for MULTINODE_SSH_WRAPPER. Like a real worker, the remote
# command only sees the job environment (here SHARED) plus its own HOSTNAME and
# RANK; head-only variables (HEAD_ONLY, MULTINODE_*) do not reach it. It
# records the command it received and, when that command ends, its status.
FAKE_WRAPPER = """#!/bin/sh
host=$1
shift
case $host in
    job-0) rank=0 ;;
    job-1) rank=1 ;;
    job-2) rank=2 ;;
    *) echo "fake wrapper: unknown host $host" >&2; exit 255 ;;
esac
IFS=' '
printf '%s' "$*" > "$OUT/$host.cmd"
env -i PATH="$PATH" OUT="$OUT" SHARED="$SHARED" HOSTNAME="$host" RANK="$rank" \\
    $REMOTE_SH -c "$*"
echo $? > "$OUT/$host.status"
"""

# Byte-exact record of a node's positional parameters, one file per node.
DUMP_ARGS = """printf '%s\\0' "$@" > "$OUT/$HOSTNAME.args"
printf '%s' "$#" > "$OUT/$HOSTNAME.argc"
"""

NASTY_ARGS = [
    "two words",
    "it's",
    'say "hi"',
    "$x ${y} $(echo no) `echo no`",
    "back\\slash \\n \\\\",
    "*",
    "/*",
    "line1\nline2",
    "trailing newlines\n\n",
    "",
    "'",
    "'\\''",
    "  leading and trailing spaces  ",
    "tab\tand ; && | > < ~ # !",
    "unicode: \u00e9\u4e2d\U0001f600",
    # UTF-8 bytes 0x81-0x88 are dash's internal control characters
    "ctl: \u0081\u0088\u0441\u0448",
    "\n",
    "-",
    "--",
]


@pytest.fixture(params=sorted(SHELLS))
def shell(request):
    argv = SHELLS[request.param]
    if shutil.which(argv[0]) is None:
        pytest.fail(
            f"{argv[0]} is required for these tests (apt-get install -y {argv[0]})"
        )
    return argv


class Cluster:
    def __init__(self, tmp_path, shell):
        self.shell = shell
        self.tmp = tmp_path
        self.out = tmp_path / "out"
        self.out.mkdir()
        bindir = tmp_path / "bin"
        bindir.mkdir()
        self.hostname_shim = bindir / "hostname"
        self.set_hostname_shim(HOSTNAME_SHIM)
        self.wrapper = tmp_path / "fake-wrapper"
        self.wrapper.write_text(FAKE_WRAPPER)
        self.wrapper.chmod(0o755)
        self.env = {
            "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOSTNAME": "job-0",
            "OUT": str(self.out),
            "HELPER": HELPER,
            "SHARED": "job-env",
            "HEAD_ONLY": "head-value",
            "REMOTE_SH": " ".join(shell),
            "MULTINODE_SSH_WRAPPER": str(self.wrapper),
            "MULTINODE_HOSTLIST_NOSLOTS": ",".join(NODES),
        }

    def set_hostname_shim(self, text):
        self.hostname_shim.write_text(text)
        self.hostname_shim.chmod(0o755)

    def run(self, body, args=(), timeout=30):
        """Runs `. $HELPER` + body as a script; returns (status, stdout, stderr).

        Output goes to files, not pipes, so background workers that outlive
        the script do not hold up the return.
        """
        script = self.tmp / "job.sh"
        script.write_text('. "$HELPER"\n' + body)
        with open(self.tmp / "stdout", "wb") as so, open(self.tmp / "stderr", "wb") as se:
            proc = subprocess.run(
                self.shell + [str(script), *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=so,
                stderr=se,
                timeout=timeout, check=False,
            )
        return (
            proc.returncode,
            (self.tmp / "stdout").read_text(),
            (self.tmp / "stderr").read_text(),
        )

    def wait_workers(self, hosts=None, timeout=15):
        """Waits until the wrapper calls for `hosts` (every worker) have finished."""
        hosts = WORKERS if hosts is None else hosts
        deadline = time.monotonic() + timeout
        for host in hosts:
            status = self.out / f"{host}.status"
            while not status.exists() or not status.read_text().endswith("\n"):
                if time.monotonic() > deadline:
                    pytest.fail(f"worker {host} did not finish within {timeout}s")
                time.sleep(0.02)

    def read(self, name):
        return (self.out / name).read_text()

    def read_args(self, host):
        data = (self.out / f"{host}.args").read_bytes()
        argc = int(self.read(f"{host}.argc"))
        # printf '%s\0' with no arguments still prints one empty field
        args = [a.decode() for a in data.split(b"\0")[:-1]] if argc else []
        assert len(args) == argc
        return args

    def dispatched(self):
        """Hosts the wrapper was called for."""
        return sorted(p.name[: -len(".cmd")] for p in self.out.glob("*.cmd"))


@pytest.fixture
def cluster(tmp_path, shell):
    return Cluster(tmp_path, shell)


# exec_rank0 / wait_rank0


def test_exec_rank0_runs_in_background_with_rank_0(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rank0 'sleep 1; echo "$HOSTNAME $RANK" > "$OUT/rank0"'
case $rank0_pid in ''|*[!0-9]*) echo "bad pid: $rank0_pid"; exit 90 ;; esac
[ "$rank0_pid" != "$$" ] || exit 91
kill -0 "$rank0_pid" || exit 92
[ ! -e "$OUT/rank0" ] || exit 93   # still running: exec_rank0 did not wait
echo "caller RANK=${RANK-unset}"
wait_rank0
"""
    )
    assert (status, stderr) == (0, "")
    assert stdout == "caller RANK=unset\n"  # RANK=0 only inside the rank 0 script
    assert cluster.read("rank0") == "job-0 0\n"
    assert cluster.dispatched() == []


def test_exec_rank0_sees_callers_functions_and_variables(cluster):
    status, stdout, stderr = cluster.run(
        """
greeting=hello
greet() { echo "$greeting from $1"; }
exec_rank0 'greet "rank $RANK"'
wait_rank0
"""
    )
    assert (status, stdout, stderr) == (0, "hello from rank 0\n", "")


def test_exec_rank0_stdin_heredoc_and_args(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rank0 - "a b" "it's" <<'EOF'
echo "rank $RANK: $# [$1] [$2]"
echo 'single $quoted' "double \\"quoted\\""
EOF
wait_rank0
"""
    )
    assert (status, stderr) == (0, "")
    assert stdout == "rank 0: 2 [a b] [it's]\nsingle $quoted double \"quoted\"\n"


def test_exec_rank0_script_args_and_bare_stdin(cluster):
    # Not in the spec, chosen for consistency with exec_all: arguments after
    # a script string also become $1..., and no argument at all reads stdin.
    status, stdout, stderr = cluster.run(
        """
exec_rank0 'echo "$#:$1:$2"' x 'y z'
first=$rank0_pid
exec_rank0 <<'EOF'
echo "stdin $RANK"
EOF
wait "$first"
wait_rank0
"""
    )
    assert (status, stderr) == (0, "")
    assert sorted(stdout.splitlines()) == ["2:x:y z", "stdin 0"]


def test_wait_rank0_exits_with_rank0_status(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rank0 'sleep 0.2; exit 7'
wait_rank0
echo after > "$OUT/after"
"""
    )
    assert (status, stdout, stderr) == (7, "", "")
    assert not (cluster.out / "after").exists()


def test_wait_rank0_without_exec_rank0_fails(cluster):
    status, stdout, stderr = cluster.run(
        """
wait_rank0
echo after
"""
    )
    assert status == 1
    assert stdout == ""
    assert "wait_rank0" in stderr and "exec_rank0" in stderr


# exec_rankN


def test_exec_rankN_single_quotes_expand_on_each_worker(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'echo "$HOSTNAME $RANK ${HEAD_ONLY-unset} $SHARED" > "$OUT/$HOSTNAME.out"'
"""
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    assert cluster.dispatched() == WORKERS  # every worker once, never job-0
    for rank, host in enumerate(WORKERS, 1):
        assert cluster.read(f"{host}.out") == f"{host} {rank} unset job-env\n"
        assert cluster.read(f"{host}.status") == "0\n"


def test_exec_rankN_double_quotes_expand_on_head(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rankN "echo $HOSTNAME ${RANK-none} $HEAD_ONLY"' > "$OUT/$HOSTNAME.out"'
"""
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    assert cluster.dispatched() == WORKERS
    for host in WORKERS:
        assert cluster.read(f"{host}.out") == "job-0 none head-value\n"


def test_exec_rankN_returns_before_workers_finish(cluster):
    start = time.monotonic()
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'sleep 3; echo done > "$OUT/$HOSTNAME.late"'
echo returned
"""
    )
    elapsed = time.monotonic() - start
    assert (status, stdout, stderr) == (0, "returned\n", "")
    assert elapsed < 2.5
    assert not list(cluster.out.glob("*.late"))
    cluster.wait_workers()
    assert sorted(p.name for p in cluster.out.glob("*.late")) == [
        "job-1.late",
        "job-2.late",
    ]


def test_exec_rankN_does_not_report_worker_status(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'exit 5'
echo "rc=$?"
"""
    )
    assert (status, stdout, stderr) == (0, "rc=0\n", "")
    cluster.wait_workers()
    assert cluster.read("job-1.status") == "5\n"


def test_exec_rankN_stdin_is_forwarded_verbatim(cluster):
    script = (
        "echo \"$HOSTNAME $RANK\" > \"$OUT/$HOSTNAME.out\"\n"
        "x='single' y=\"double\" z=\\$ w=`echo tick`\n"
        "# a comment with 'quotes' and \\\\ backslashes\n"
        "\n\n"
    )
    status, stdout, stderr = cluster.run(
        f"exec_rankN - <<'EOF'\n{script}EOF\n"
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for rank, host in enumerate(WORKERS, 1):
        assert cluster.read(f"{host}.cmd") == script  # including trailing newlines
        assert cluster.read(f"{host}.out") == f"{host} {rank}\n"


def test_exec_rankN_unquoted_heredoc_expands_on_head(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_rankN - <<EOF
echo "$HOSTNAME $HEAD_ONLY" > "\\$OUT/\\$HOSTNAME.out"
EOF
"""
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for host in WORKERS:
        assert cluster.read(f"{host}.out") == "job-0 head-value\n"


def test_exec_rankN_stdin_with_args(cluster):
    status, stdout, stderr = cluster.run(
        "exec_rankN - \"$@\" <<'EOF'\n" + DUMP_ARGS + "EOF\n",
        args=NASTY_ARGS,
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for host in WORKERS:
        assert cluster.read_args(host) == NASTY_ARGS


def test_exec_rankN_leaves_caller_ifs_and_args_alone(cluster):
    status, stdout, stderr = cluster.run(
        """
IFS=:
set -- one two
exec_rankN 'true'
printf '[%s]' "$IFS" "$@"
"""
    )
    assert (status, stdout, stderr) == (0, "[:][one][two]", "")
    cluster.wait_workers()


@pytest.mark.parametrize(
    "variable", ["MULTINODE_SSH_WRAPPER", "MULTINODE_HOSTLIST_NOSLOTS"]
)
def test_exec_rankN_reports_missing_variable(cluster, variable):
    del cluster.env[variable]
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'echo ran > "$OUT/$HOSTNAME.out"'
echo "rc=$?"
"""
    )
    assert status == 0
    assert stdout.startswith("rc=") and stdout != "rc=0\n"
    assert variable in stderr and "exec_rankN" in stderr
    time.sleep(0.2)
    assert cluster.dispatched() == []


def test_exec_rankN_refuses_when_rank0_host_not_in_list(cluster):
    cluster.set_hostname_shim("#!/bin/sh\necho elsewhere\n")
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'true'
echo "rc=$?"
"""
    )
    assert status == 0 and stdout != "rc=0\n"
    assert "elsewhere" in stderr and "MULTINODE_HOSTLIST_NOSLOTS" in stderr
    assert cluster.dispatched() == []


# rank 0 host name capture


def test_hostname_command_takes_precedence_over_HOSTNAME(cluster):
    cluster.env["HOSTNAME"] = "job-2"
    status, stdout, stderr = cluster.run(
        """
exec_rankN 'true'
exec_rank0 'echo "$HOSTNAME"'
wait_rank0
"""
    )
    assert (status, stdout, stderr) == (0, "job-0\n", "")
    cluster.wait_workers()
    assert cluster.dispatched() == WORKERS


def test_hostname_falls_back_to_HOSTNAME(cluster):
    cluster.set_hostname_shim("#!/bin/sh\nexit 1\n")
    cluster.env["HOSTNAME"] = "job-1"
    status, stdout, stderr = cluster.run("exec_rankN 'true'\n")
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers(["job-0", "job-2"])  # job-1 is rank 0 here
    assert cluster.dispatched() == ["job-0", "job-2"]


# exec_all


def test_exec_all_runs_everywhere_and_exits_with_rank0_status(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_all 'echo "$HOSTNAME $RANK" > "$OUT/$HOSTNAME.out"; [ "$RANK" = 0 ] && exit 3; exit 4'
echo after > "$OUT/after"
"""
    )
    assert (status, stdout, stderr) == (3, "", "")
    assert not (cluster.out / "after").exists()
    cluster.wait_workers()
    for rank, host in enumerate(NODES):
        assert cluster.read(f"{host}.out") == f"{host} {rank}\n"


def test_exec_all_without_arguments_reads_stdin(cluster):
    status, stdout, stderr = cluster.run(
        """
exec_all <<'EOF'
echo "starting on $HOSTNAME" > "$OUT/$HOSTNAME.out"
echo "rank $RANK" >> "$OUT/$HOSTNAME.out"
EOF
"""
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for rank, host in enumerate(NODES):
        assert cluster.read(f"{host}.out") == f"starting on {host}\nrank {rank}\n"


def test_exec_all_round_trips_nasty_arguments(cluster):
    status, stdout, stderr = cluster.run(
        "exec_all - \"$@\" <<'EOF'\n" + DUMP_ARGS + "EOF\n", args=NASTY_ARGS
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for host in NODES:
        assert cluster.read_args(host) == NASTY_ARGS


def test_exec_all_args_from_head_variables(cluster):
    status, stdout, stderr = cluster.run(
        """
MODEL_PATH=/models/my-model
BATCH_SIZE=32
exec_all - "$MODEL_PATH" "$BATCH_SIZE" "$HEAD_ONLY" <<'EOF'
echo "node $HOSTNAME loading model $1 with batch size $2 from $3" > "$OUT/$HOSTNAME.out"
EOF
"""
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for host in NODES:
        assert cluster.read(f"{host}.out") == (
            f"node {host} loading model /models/my-model with batch size 32"
            " from head-value\n"
        )


def test_exec_all_fails_before_starting_anything_when_misconfigured(cluster):
    del cluster.env["MULTINODE_SSH_WRAPPER"]
    status, stdout, stderr = cluster.run(
        """
exec_all 'echo ran > "$OUT/$HOSTNAME.out"'
echo after
"""
    )
    assert status != 0 and stdout == ""
    assert "MULTINODE_SSH_WRAPPER" in stderr
    time.sleep(0.2)
    assert not list(cluster.out.iterdir())


def test_works_under_set_eu(cluster):
    cluster.env.pop("HOSTNAME")
    status, stdout, stderr = cluster.run(
        """
set -eu
exec_rank0 'echo "rank0 $RANK"'
exec_rankN 'echo "$HOSTNAME" > "$OUT/$HOSTNAME.out"'
wait_rank0
"""
    )
    assert (status, stdout, stderr) == (0, "rank0 0\n", "")
    cluster.wait_workers()
    status, stdout, stderr = cluster.run("set -eu\nexec_all - x <<'EOF'\nexit 0\nEOF\n")
    assert (status, stdout, stderr) == (0, "", "")


# the file itself


def test_helper_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is required (apt-get install -y shellcheck)")
    proc = subprocess.run(
        ["shellcheck", "-s", "sh", HELPER], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_helper_header():
    with open(HELPER) as f:
        text = f.read()
    assert text.startswith("#!/bin/sh\n")
    assert "# shellcheck shell=sh" in text


# property: any text argument survives exec_all - ARG on every node

ARG_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
    max_size=40,
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(args=st.lists(ARG_TEXT, max_size=4))
def test_exec_all_round_trips_any_text(tmp_path_factory, shell, args):
    cluster = Cluster(tmp_path_factory.mktemp("prop"), shell)
    status, stdout, stderr = cluster.run(
        "exec_all - \"$@\" <<'EOF'\n" + DUMP_ARGS + "EOF\n", args=args
    )
    assert (status, stdout, stderr) == (0, "", "")
    cluster.wait_workers()
    for host in NODES:
        assert cluster.read_args(host) == args
