"""scripts/bench: the performance targets of the launch path, measured
beside their baselines in one run on one 9-node container cluster (head + 8
workers) that this creates and removes again.

Run it through scripts/bench (which installs what it needs and builds the
node image); see --help. The head's half is bench/driver.py, the jobs are in
bench/jobs.yml; everything goes through run-job.yml, the wrapper and the
job's environment, as a user's job does."""

import argparse
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

TOP = Path(__file__).resolve().parent.parent
BENCH = TOP / "bench"
CLUSTER = "fmn-bench"
NODES = 9
JOB_USER = "fuzz"  # the node role's default job user (the bench keeps it)
LINES = 500_000  # per file, as bench/driver.py sends them
LINE_BYTES = 100
# The image of the container rows: the Debian minbase of scripts/build-test-
# images with python3 (bench/driver.py's), built here with Debian's archive
# (no registry) and loaded into every node's Podman store under this name,
# which the jobs' image URI names: cached, as the rows require.
IMAGE_REPO = "localhost/fmn-bench-python"
IMAGE_RECIPE = ("apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 >/dev/null"
                " && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin")
IMAGE_BUILDER = CLUSTER + "-image-build"
IMAGE_ARCHIVE = "/tmp/fmn-bench-image.tar"  # on a node, while it is loaded
# Each row's samples start on a quiet machine, as the targets are stated:
# once the CPUs were less than QUIET_BUSY busy over QUIET_WINDOW seconds
# (what an uncounted run before leaves behind settles first), or after
# QUIET_LONGEST seconds of waiting, which the bench then says.
QUIET_BUSY = 0.10
QUIET_WINDOW = 2.0
QUIET_LONGEST = 90.0

# Run on the streams job's rank 1 node: files 0..N-1 of bench/driver.py's lines.
WRITE_LINES_FILES = """\
import sys
sys.path.insert(0, "/opt/fmn-bench")
import driver
for rep in range(int(sys.argv[1])):
    with open(driver.LINES_FILE % rep, "wb") as out:
        out.write(b"".join(driver.bench_line(rep, n) for n in range(driver.LINES)))
"""

USAGE = """\
Creates a 9-node container cluster (head + 8 workers, the node image of
scripts/build-node-image, prepared by run-job.yml itself), measures each
target of the fast launch path beside its baseline in the same run, prints
a table of medians and ratios, and removes the cluster (also on failure or
Ctrl-C). Needs root and Docker; takes about 3 minutes on 2 cores. Runs
jobs in local mode on this machine too (the 4-rank row). Each row's
samples start once the machine is quiet (its CPUs less than 10% busy over
2 s; after 90 s of waiting it says NOT QUIET and goes on).

  rows (measured vs baseline, target ratio):
    one warm wrapper call           vs one multiplexed ssh call       <= 1.5x
    8 wrapper calls at once         vs 8 multiplexed ssh at once      <= 1.5x
    forwarded output, 50 MB of      vs the same lines through ssh     >= 0.8x
      100-byte lines from a worker     into a file on the head           (throughput)
    trivial job, run-job.yml, 9     vs ansible multinode -m command   <= 2x
      prepared hosts
    trivial 4-rank local-mode job   vs ansible localhost -m command   <= 3x
    Open MPI mpi_hello_world, 2     vs the same with plain ssh        <= 1.1x
      nodes, wrapper as rsh agent

  rows of whole workflows (row group workflows), each beside the same
  workflow one job at a time (fuzz_multinode_jobs_at_once=1), on the bare
  host:
    fan-out: 4 independent one-node vs one job at a time              <= 0.5x
      jobs of 10 s (bench/fan-out.yml)
      on 4 hosts
    diamond: 1 -> 3 -> 1 one-node   vs one job at a time              <= 0.8x
      jobs of 10 s (bench/diamond.yml)

  the scale rows (row group scale, measured last: it grows the cluster to
  each size of --scale, 33 by default, and prepares the new nodes first):
    trivial job, run-job.yml, N     vs ansible multinode -m command   <= 2x
      prepared hosts                   on the same N hosts

  rows of jobs in their images (fuzz_multinode_execution=container), each
  beside the same job on the bare host (=host), in the same run:
    trivial job, 1 host, in its     vs the same job on the bare host  <= +1.0 s
      image (cached on the node)       (added seconds per job start: what
                                       a node's containers add there)
    trivial job, 9 hosts, in its    vs the same job on the bare host  <= +1.0 s
      image (cached on every node)     (the nodes start their containers
                                       in parallel, but here share this
                                       machine's CPUs)
    one warm wrapper call into a    vs the same call on the bare host <= 1.2x
      running rank container
    8 wrapper calls at once into    vs the same on the bare host      <= 1.2x
      rank containers
  Their image is Debian minbase (scripts/build-test-images) with python3,
  for bench/driver.py; it is built once (Debian's archive, no registry) and
  loaded into every node's Podman store before they are measured. The node
  role prepares the nodes again when the execution mode changes (its
  fingerprint holds the mode), so each mode's samples are taken together,
  after one uncounted run in that mode.
"""


def say(message):
    print("bench: " + message, flush=True)


class Failed(Exception):
    """A step of the bench failed; the message says which and why."""


def median(samples):
    return statistics.median(samples)


class Bench:
    def __init__(self, image, job_image, reps, job_reps, work, scale=()):
        self.image = image
        self.job_image = job_image  # the container rows' (bench_image), None without them
        self.execution = "host"  # the mode the nodes were last prepared for
        self.job_image_loaded = False
        self.reps = reps
        self.job_reps = job_reps
        self.work = work
        self.logs = work / "logs"
        self.output = work / "ansible.log"
        self.inventory = work / "inventory"
        self.fuzzfile = work / "jobs.yml"
        self.nodes = ["%s-node-%d" % (CLUSTER, i) for i in range(1, NODES + 1)]
        self.scale = list(scale)  # the cluster sizes of the scale rows
        self.scale_inventory = work / "inventory-scale"
        self.env = dict(os.environ, ANSIBLE_CONFIG=str(TOP / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(TOP))

    # -- the cluster -------------------------------------------------------------------

    def cluster_is_up(self):
        done = docker("inspect", "-f", "{{.State.Running}}", *self.nodes, check=False)
        return done.returncode == 0 and done.stdout.split() == [b"true"] * NODES

    def create_cluster(self, reuse=False):
        """Create the cluster, or with `reuse` keep one a --keep-cluster run
        left (run-job.yml prepares its nodes again if the collection changed)."""
        if reuse and self.cluster_is_up():
            say("reusing the nodes %s-node-1..%d (--keep-cluster)" % (CLUSTER, NODES))
            self.write_inventory()
            return
        self.remove_cluster()
        say("creating %d nodes (%s-node-1..%d) on network %s" % (NODES, CLUSTER, NODES, CLUSTER))
        docker("network", "create", CLUSTER)
        for node in self.nodes:
            self.start_node(node)
        self.write_inventory()

    def write_inventory(self, path=None, nodes=None):
        """The inventory of `nodes` (the bench's 9) at `path` (inventory).
        The rows measure the bare-host launch path (the container rows set
        their own execution)."""
        (path or self.inventory).write_text(
            "[multinode]\n%s\n[multinode:vars]\nansible_connection=community.docker.docker\n"
            "ansible_become=false\nfuzz_multinode_execution=host\n" % "\n".join(nodes or self.nodes[:NODES]))

    def start_node(self, node):
        # SYS_ADMIN lets the runtime give each rank its own host name;
        # Podman's overlay store needs a file system other than Docker's
        # overlay root (scripts/build-node-image).
        docker("run", "-d", "--name", node, "--hostname", node, "--network", CLUSTER, "--cap-add", "SYS_ADMIN",
               "--tmpfs", "/var/lib/containers", self.image, "bash", "-c", "while true; do sleep 10000; done")

    def grow_cluster(self, size):
        """The cluster's nodes 1..size (the scale rows): the missing ones
        started; their inventory is inventory-scale."""
        for number in range(1, size + 1):
            node = "%s-node-%d" % (CLUSTER, number)
            if node not in self.nodes:
                self.nodes.append(node)
            if docker("inspect", "-f", "{{.State.Running}}", node, check=False).stdout.strip() != b"true":
                docker("rm", "-f", node, check=False)
                self.start_node(node)
        self.write_inventory(self.scale_inventory, self.nodes[:size])

    def remove_cluster(self):
        # The scale rows' nodes too, also those a --keep-cluster run left.
        listed = docker("ps", "-aq", "--filter", "name=^%s-node-[0-9]+$" % CLUSTER, check=False).stdout.split()
        for node in set(self.nodes) | {name.decode() for name in listed}:
            docker("rm", "-f", node, check=False)
        docker("network", "rm", CLUSTER, check=False)

    def install_baseline(self):
        """The driver on every node, and a key of the bench's own that the
        job user accepts on every node, for the plain-ssh baselines."""
        key = self.work / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fmn-bench", "-f", str(key)], check=True)
        for node in self.nodes:
            docker("exec", node, "mkdir", "-p", "/opt/fmn-bench")
            docker("cp", str(BENCH / "driver.py"), node + ":/opt/fmn-bench/driver.py")
            docker("cp", str(key), node + ":/opt/fmn-bench/key")
            docker("exec", node, "chmod", "0644", "/opt/fmn-bench/key", "/opt/fmn-bench/driver.py")
            docker("exec", "-i", node, "sh", "-c", 'set -e; home=$(getent passwd "$1" | cut -d: -f6); '
                   'mkdir -p "$home/.ssh"; cat >>"$home/.ssh/authorized_keys"; chown -R "$1" "$home/.ssh"; '
                   'chmod 700 "$home/.ssh"; chmod 600 "$home/.ssh/authorized_keys"', "-", JOB_USER,
                   input=(key.with_suffix(".pub")).read_bytes())
        # The streams job's rank 1 is the second host: its lines files.
        docker("exec", self.nodes[1], "python3", "-I", "-c", WRITE_LINES_FILES, str(self.job_reps + 1))

    def load_job_image(self):
        """The container rows' image into every node's Podman store (once;
        a node that has it, kept by --keep-cluster, is left as it is)."""
        if self.job_image_loaded:
            return
        started = time.monotonic()
        archive = self.work / "image.tar"
        for node in self.nodes:
            if docker("exec", node, "podman", "image", "exists", self.job_image, check=False).returncode == 0:
                continue
            if not archive.exists():
                docker("save", "-o", str(archive), self.job_image)
            docker("cp", str(archive), node + ":" + IMAGE_ARCHIVE)
            docker("exec", node, "sh", "-c", 'podman load --quiet --input "$1" >/dev/null && rm -f "$1"',
                   "-", IMAGE_ARCHIVE)
            docker("exec", node, "podman", "image", "exists", self.job_image)
        say("  %s in every node's Podman store (%.1f s)" % (self.job_image, time.monotonic() - started))
        self.job_image_loaded = True

    def write_fuzzfile(self):
        """bench/jobs.yml with --reps in the driver jobs' BENCH_REPS, the
        container rows' image, and bench/driver.py as the file `driver`."""
        text = (BENCH / "jobs.yml").read_text()
        text = text.replace("BENCH_REPS=20", "BENCH_REPS=%d" % self.reps)
        text = text.replace("BENCH_REPS=3", "BENCH_REPS=%d" % self.job_reps)
        text = text.replace("BENCH_IMAGE", self.job_image or IMAGE_REPO + ":unbuilt")
        workflow = yaml.safe_load(text)
        workflow["files"]["driver"] = (BENCH / "driver.py").read_text()
        for size in self.scale:  # the scale rows' trivial job on `size` hosts
            workflow["jobs"]["trivial-%d" % size] = dict(workflow["jobs"]["trivial"], multinode=dict(
                workflow["jobs"]["trivial"]["multinode"], nodes=size))
        self.fuzzfile.write_text(yaml.safe_dump(workflow, sort_keys=False, width=1000))

    # -- running things ----------------------------------------------------------------

    def timed(self, what, argv):
        """Seconds argv took; its output goes to ansible.log."""
        with open(self.output, "ab") as out:
            out.write(("\n### %s: %s\n" % (what, " ".join(argv))).encode())
            out.flush()
            start = time.monotonic()
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env=self.env, cwd=self.work, check=False)
            took = time.monotonic() - start
        if done.returncode != 0:
            tail = self.output.read_bytes()[-3000:].decode(errors="replace")
            raise Failed("%s failed (exit %d); the end of %s:\n%s" % (what, done.returncode, self.output, tail))
        return took

    def run_job(self, job, local=False, execution="host", inventory=None):
        argv = ["ansible-playbook", str(TOP / "run-job.yml"), "-e", "fuzzfile=%s" % self.fuzzfile,
                "-e", "job=%s" % job, "-e", "log_dir=%s" % self.logs,
                "-e", "fuzz_multinode_execution=%s" % execution]
        return self.timed("job %s (%s)" % (job, execution),
                          argv if local else argv + ["-i", str(inventory or self.inventory)])

    def prepared_for(self, execution):
        """Have the nodes prepared for `execution`: the node role prepares
        them again when the mode changes, which one uncounted run does."""
        if execution != self.execution:
            say("  preparing the nodes for fuzz_multinode_execution=%s (not counted): %.1f s" % (
                execution, self.run_job("trivial-image", execution=execution)))
            self.execution = execution

    def modes(self):
        """Both execution modes, the nodes' present one first (one change)."""
        return sorted(("host", "container"), key=lambda mode: mode != self.execution)

    def run_workflow(self, name, at_once):
        """Seconds the whole workflow bench/NAME.yml took through run-job.yml,
        at most `at_once` jobs at a time (0: as many as the hosts allow)."""
        argv = ["ansible-playbook", str(TOP / "run-job.yml"), "-i", str(self.inventory),
                "-e", "fuzzfile=%s" % (BENCH / (name + ".yml")), "-e", "log_dir=%s" % self.logs,
                "-e", "fuzz_multinode_execution=host", "-e", "fuzz_multinode_jobs_at_once=%d" % at_once]
        return self.timed("workflow %s (at once: %s)" % (name, at_once or "as the hosts allow"), argv)

    def ad_hoc(self, local=False, inventory=None):
        argv = ["ansible", "localhost"] if local else ["ansible", "multinode", "-i", str(inventory or self.inventory)]
        return self.timed("ansible -m command -a true", argv + ["-m", "command", "-a", "true"])

    def driver_result(self, job):
        """The job's last bench-result line (a job that runs twice in one
        bench writes the same log again)."""
        results = [line for line in (self.logs / (job + ".log")).open("rb") if line.startswith(b"bench-result ")]
        if results:
            return json.loads(results[-1][len(b"bench-result "):])
        raise Failed("job %s printed no bench-result line (log: %s)" % (job, self.logs / (job + ".log")))

    def forwarded_lines(self):
        """Lost, torn and duplicated lines of the forwarded repetitions in the
        streams job's log (any other line there is the driver's own)."""
        seen = bytearray(LINES * self.job_reps)
        torn = 0
        whole = re.compile(rb"([1-9]) ([0-9]{9}) ([a-z])\3{86}\n")
        for line in (self.logs / "streams.log").open("rb"):
            match = whole.fullmatch(line)
            if match and 1 <= int(match[1]) <= self.job_reps and int(match[2]) < LINES \
                    and match[3][0] == 97 + int(match[2]) % 26:
                index = (int(match[1]) - 1) * LINES + int(match[2])
                seen[index] = min(seen[index] + 1, 255)
            elif not line.startswith(b"bench"):
                torn += 1
        return dict(lost=seen.count(0), torn=torn, duplicated=sum(count > 1 for count in seen))

    # -- the rows ----------------------------------------------------------------------

    def prepare(self):
        say("preparing the 9 nodes: the trivial job once through run-job.yml (not counted)")
        say("  %.1f s" % self.run_job("trivial"))
        self.install_baseline()

    def measure(self, rows_wanted):
        """The rows of ROWS in rows_wanted, in ROWS' order: (rows, checks,
        whether every checked line was intact)."""
        rows, checks, intact = [], [], True
        for name in ROWS:
            if name in rows_wanted:
                say(quiet())
                more_rows, more_checks, more_intact = getattr(self, "measure_" + name.replace("-", "_"))()
                rows += more_rows
                checks += more_checks
                intact = intact and more_intact
        return rows, checks, intact

    def measure_calls(self):
        rows = []
        say("wrapper calls and Open MPI beside ssh (job latency, %d repetitions)" % self.reps)
        self.run_job("latency")
        lat = self.driver_result("latency")
        rows.append(("one warm wrapper call", "ms", 1000 * median(lat["wrapper_1"]), 1000 * median(lat["ssh_1"]),
                     "one multiplexed ssh call", "<=", 1.5))
        rows.append(("8 wrapper calls at once", "ms", 1000 * median(lat["wrapper_8"]), 1000 * median(lat["ssh_8"]),
                     "8 multiplexed ssh calls at once", "<=", 1.5))
        rows.append(("Open MPI hello, 2 nodes, wrapper", "ms", 1000 * median(lat["mpi_wrapper"]),
                     1000 * median(lat["mpi_ssh"]), "plm_rsh_agent plain ssh", "<=", 1.1))
        return rows, [], True

    def measure_forward(self):
        say("forwarded output beside ssh into a file (job streams, %d repetitions of 50 MB)" % self.job_reps)
        self.run_job("streams")
        streams = self.driver_result("streams")
        mb = LINES * LINE_BYTES / 1e6
        rows = [("forwarded output, 50 MB", "MB/s", mb / median(streams["forward"]),
                 mb / median(streams["ssh_file"]), "ssh into a file on the head", ">=", 0.8)]
        say("  seconds per 50 MB: forwarded %s, ssh %s" % (
            " ".join("%.3f" % t for t in streams["forward"]), " ".join("%.3f" % t for t in streams["ssh_file"])))
        forwarded = self.forwarded_lines()
        checks = ["forwarded lines: %(lost)d lost, %(torn)d torn, %(duplicated)d duplicated" % forwarded,
                  "ssh file lines wrong: %d" % streams["ssh_file_bad_lines"]]
        return rows, checks, not any(forwarded.values()) and not streams["ssh_file_bad_lines"]

    def measure_job(self):
        say("trivial job through run-job.yml on 9 prepared hosts beside ansible -m command (%d each)"
            % self.job_reps)
        job, ad_hoc = [], []
        for _unused in range(self.job_reps):
            job.append(self.run_job("trivial"))
            ad_hoc.append(self.ad_hoc())
        say("  run-job.yml %s s; ansible -m command %s s" % (
            " ".join("%.1f" % t for t in job), " ".join("%.1f" % t for t in ad_hoc)))
        return [("trivial job, 9 hosts", "s", median(job), median(ad_hoc), "ansible multinode -m command",
                 "<=", 2.0)], [], True

    def measure_scale(self):
        rows = []
        for size in self.scale:
            say("growing the cluster to %d nodes; the trivial job on all of them once (not counted)" % size)
            self.grow_cluster(size)
            say("  %.1f s" % self.run_job("trivial-%d" % size, inventory=self.scale_inventory))
            say(quiet())
            say("trivial job through run-job.yml on %d prepared hosts beside ansible -m command (%d each)"
                % (size, self.job_reps))
            job, ad_hoc = [], []
            for _unused in range(self.job_reps):
                job.append(self.run_job("trivial-%d" % size, inventory=self.scale_inventory))
                ad_hoc.append(self.ad_hoc(inventory=self.scale_inventory))
            say("  run-job.yml %s s; ansible -m command %s s" % (
                " ".join("%.1f" % t for t in job), " ".join("%.1f" % t for t in ad_hoc)))
            rows.append(("trivial job, %d hosts" % size, "s", median(job), median(ad_hoc),
                         "ansible multinode -m command", "<=", 2.0))
        return rows, [], True

    def measure_local(self):
        say("trivial 4-rank job in local mode beside ansible localhost -m command (%d each)" % self.job_reps)
        job, ad_hoc = [], []
        for _unused in range(self.job_reps):
            job.append(self.run_job("trivial-local", local=True))
            ad_hoc.append(self.ad_hoc(local=True))
        return [("trivial 4-rank local-mode job", "s", median(job), median(ad_hoc),
                 "ansible localhost -m command", "<=", 3.0)], [], True

    def measure_workflows(self):
        rows = []
        self.prepared_for("host")
        for name, title, target in WORKFLOW_ROWS:
            say("workflow bench/%s.yml whole, jobs at once beside one at a time (%d each)" % (name, self.job_reps))
            at_once, one_by_one = [], []
            for _unused in range(self.job_reps):
                at_once.append(self.run_workflow(name, 0))
                one_by_one.append(self.run_workflow(name, 1))
            say("  at once: %s s; one at a time: %s s" % (" ".join("%.1f" % t for t in at_once),
                                                          " ".join("%.1f" % t for t in one_by_one)))
            rows.append((title, "s", median(at_once), median(one_by_one), "the same one job at a time", "<=", target))
        return rows, [], True

    def measure_container_start(self):
        reps = max(5, self.job_reps)
        say("trivial job through run-job.yml on 9 hosts and on 1 in its image (cached on every node) beside the same "
            "on the bare host (%d each)" % reps)
        self.load_job_image()
        took, one_host = {}, {}
        for execution in self.modes():
            self.prepared_for(execution)
            say(quiet())
            took[execution] = [self.run_job("trivial-image", execution=execution) for _unused in range(reps)]
            say("  %s, 9 hosts: %s s" % (execution, " ".join("%.2f" % t for t in took[execution])))
            # Its one host is prepared as a set of its own first (not counted).
            self.run_job("trivial-image-1", execution=execution)
            say(quiet())
            one_host[execution] = [self.run_job("trivial-image-1", execution=execution) for _unused in range(reps)]
            say("  %s, 1 host: %s s" % (execution, " ".join("%.2f" % t for t in one_host[execution])))
            self.execution = None  # the 9 hosts are prepared again before their next job
        return [("trivial job, 1 host, in its image", "s", median(one_host["container"]),
                 median(one_host["host"]), "the same on the bare host", "+<=", 1.0),
                ("trivial job, 9 hosts sharing %d CPUs, in its image" % os.cpu_count(), "s", median(took["container"]),
                 median(took["host"]), "the same on the bare host", "+<=", 1.0)], [], True

    def measure_container_calls(self):
        say("wrapper calls into running rank containers beside the same on the bare host (job wrapper-calls, "
            "%d repetitions)" % self.reps)
        self.load_job_image()
        calls = {}
        for execution in self.modes():
            self.prepared_for(execution)
            self.run_job("wrapper-calls", execution=execution)
            calls[execution] = self.driver_result("wrapper-calls")
        container, host = calls["container"], calls["host"]
        return [("one warm wrapper call, in its image", "ms", 1000 * median(container["wrapper_1"]),
                 1000 * median(host["wrapper_1"]), "the same on the bare host", "<=", 1.2),
                ("8 wrapper calls at once, in its image", "ms", 1000 * median(container["wrapper_8"]),
                 1000 * median(host["wrapper_8"]), "the same on the bare host", "<=", 1.2)], [], True


# --rows: the names of the row groups, in the order they are measured.
ROWS = {
    "calls": "one and 8 wrapper calls, Open MPI (the latency job)",
    "forward": "forwarded output (the streams job)",
    "job": "trivial job on 9 hosts",
    "local": "trivial 4-rank local-mode job",
    "workflows": "a fan-out and a diamond of 10 s jobs, at once beside one at a time",
    "container-start": "trivial job on 1 and on 9 hosts in its image, beside the bare host",
    "container-calls": "wrapper calls into rank containers, beside the bare host",
    "scale": "trivial job on each cluster size of --scale (the cluster grows to it)",
}
# The workflows of the row group `workflows` (bench/NAME.yml): their row's
# title and target ratio (ideal: 0.25 for the fan-out, 3 of 5 jobs' time,
# 0.6, for the diamond; each job's own playbook and registration add).
WORKFLOW_ROWS = [
    ("fan-out", "fan-out: 4 one-node jobs of 10 s, 4 hosts", 0.5),
    ("diamond", "diamond 1 -> 3 -> 1, one-node jobs of 10 s", 0.8),
]
# The row groups whose jobs run in the bench's image.
IMAGE_ROWS = ("container-start", "container-calls")


def table(rows):
    lines = ["| measured | median | baseline | median | ratio | target | met |",
             "|---|---:|---|---:|---:|---:|---|"]
    for title, unit, measured, baseline, baseline_title, direction, target in rows:
        number = "%.0f %s" if unit == "ms" or unit == "MB/s" else "%.1f %s"
        if direction == "+<=":  # a difference, in the row's unit
            added = measured - baseline
            met = added <= target
            compared, goal = "%+.2f %s" % (added, unit), "<= %+.1f %s" % (target, unit)
        else:
            ratio = measured / baseline
            met = ratio <= target if direction == "<=" else ratio >= target
            compared, goal = "%.2fx" % ratio, "%s %.1fx" % (direction, target)
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            title, number % (measured, unit), baseline_title, number % (baseline, unit), compared, goal,
            "yes" if met else "no"))
    return "\n".join(lines)


def load():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def cpu_ticks():
    """(busy, all) CPU ticks since boot, from /proc/stat (idle and iowait
    are not busy)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:9]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def quiet():
    """Waits until the machine is quiet (QUIET_BUSY), at most QUIET_LONGEST
    seconds; says how busy it was and how long that took."""
    started = time.monotonic()
    while True:
        busy_before, all_before = cpu_ticks()
        time.sleep(QUIET_WINDOW)
        busy_after, all_after = cpu_ticks()
        share = (busy_after - busy_before) / max(all_after - all_before, 1)
        waited = time.monotonic() - started
        if share < QUIET_BUSY or waited >= QUIET_LONGEST:
            return "CPUs %.0f%% busy over %.0f s%s (%.0f s of waiting); %s" % (
                100 * share, QUIET_WINDOW, "" if share < QUIET_BUSY else ", NOT QUIET", waited, load())


def bench_image():
    """The container rows' image (IMAGE_REPO:tag, the tag a hash of its
    recipe and base), built unless Docker has it."""
    built = subprocess.run([str(TOP / "scripts" / "build-test-images")], stdout=subprocess.PIPE, check=False)
    if built.returncode != 0:
        raise Failed("scripts/build-test-images failed (exit %d)" % built.returncode)
    base = dict(line.split(" ", 1) for line in built.stdout.decode().splitlines())["debian"]
    image = "%s:%s" % (IMAGE_REPO, hashlib.sha256((base + "\n" + IMAGE_RECIPE).encode()).hexdigest()[:12])
    if docker("image", "inspect", image, check=False).returncode == 0:
        return image
    say("building %s: %s and python3 from Debian's archive" % (image, base))
    docker("rm", "-f", IMAGE_BUILDER, check=False)
    try:
        docker("run", "--name", IMAGE_BUILDER, base, "sh", "-c", IMAGE_RECIPE)
        docker("commit", IMAGE_BUILDER, image)
    finally:
        docker("rm", "-f", IMAGE_BUILDER, check=False)
    return image


def docker(*args, check=True, input=None):
    done = subprocess.run(["docker", *args], input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False)
    if check and done.returncode != 0:
        raise Failed("docker %s failed: %s" % (" ".join(args[:3]), done.stderr.decode(errors="replace").strip()))
    return done


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20, metavar="N",
                        help="samples of each wrapper/ssh call measurement (default 20; Open MPI: N/4, at least 3)")
    parser.add_argument("--job-reps", type=int, default=3, metavar="N", choices=range(1, 10),
                        help="runs of each job and ansible command, and 50 MB transfers (default 3)")
    parser.add_argument("--rows", default=",".join(ROWS), metavar="NAME,...",
                        help="the rows to measure (default all): " + "; ".join(
                            "%s: %s" % item for item in ROWS.items()))
    parser.add_argument("--scale", default="33", metavar="N,...",
                        help="the cluster sizes of the scale rows (default 33), each more than %d" % NODES)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the cluster (%s-node-*) in place afterwards, and use one left so before "
                             "instead of creating it anew (saves most of the preparation)" % CLUSTER)
    args = parser.parse_args()
    rows_wanted = args.rows.split(",")
    try:
        scale = sorted({int(size) for size in args.scale.split(",")})
    except ValueError:
        parser.error("--scale takes cluster sizes, numbers separated by commas (not %r)" % args.scale)
    if scale and scale[0] <= NODES:
        parser.error("--scale: each cluster size must be more than %d (the bench's own cluster)" % NODES)
    unknown = [name for name in rows_wanted if name not in ROWS]
    if unknown:
        parser.error("unknown row %s (rows: %s)" % (", ".join(unknown), ", ".join(ROWS)))
    image = os.environ.get("FUZZ_MULTINODE_NODE_IMAGE")
    if not image:
        sys.exit("bench: FUZZ_MULTINODE_NODE_IMAGE is not set (run scripts/bench, which builds the node image)")
    # SIGTERM ends the bench like Ctrl-C: through the finally that removes the cluster.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="fmn-bench-"))
    started = time.monotonic()
    status = 1
    bench = Bench(image, None, args.reps, args.job_reps, work, scale if "scale" in rows_wanted else ())
    say(load())
    try:
        if any(name in IMAGE_ROWS for name in rows_wanted):
            bench.job_image = bench_image()
        bench.create_cluster(reuse=args.keep_cluster)
        bench.write_fuzzfile()
        bench.prepare()
        rows, checks, intact = bench.measure(rows_wanted)
        say(load())
        print()
        print(table(rows))
        print()
        for check in checks:
            print(check)
        status = 0 if intact else 1
    except Failed as failed:
        say(str(failed))
    except KeyboardInterrupt:
        say("interrupted")
        status = 130
    finally:
        if args.keep_cluster:
            say("leaving the cluster in place (--keep-cluster)")
        else:
            say("removing the cluster")
            bench.remove_cluster()
        if args.keep:
            say("logs kept in %s" % work)
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)
        say("%.0f s in all" % (time.monotonic() - started))
    return status


if __name__ == "__main__":
    sys.exit(main())
