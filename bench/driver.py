"""The head's half of scripts/bench: runs as a job's command on rank 0 and
times the wrapper beside plain OpenSSH to the same nodes, in the same job.

    python3 driver.py latency KEY REPS   wrapper calls (one, eight at once)
                                         and Open MPI, wrapper vs ssh
    python3 driver.py streams KEY REPS   forwarded output vs ssh into a file
    python3 driver.py wrapper REPS       the wrapper calls of latency alone
                                         (what a job in an image with
                                         python3 but no ssh can time)

KEY is a private key the bench authorized for the job user on every node
(the baseline's own, so that the baseline does not borrow the collection's
ssh setup). It prints one line `bench-result {json}`: seconds per sample, by
measurement. Only what a job sees is used: MULTINODE_SSH_WRAPPER,
MULTINODE_HOSTLIST_NOSLOTS and the rank names.

Node-side: Python 3 standard library only."""

import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

LINES_FILE = "/tmp/fmn-bench-lines-%d"  # written on rank 1's node by scripts/bench
LINE_BYTES = 100
LINES = 500_000  # 50 MB


def bench_line(rep, n):
    """Line n of repetition rep, 100 bytes with its newline; its padding
    letter follows n, so a torn or merged line does not look whole."""
    return b"%d %09d %s\n" % (rep, n, bytes([97 + n % 26]) * (LINE_BYTES - 13))


class Nodes:
    """The job's ranks, the wrapper, and (given a key) a plain ssh with the
    bench's key, multiplexed (one master per node, opened before timing) or
    not."""

    def __init__(self, key=None):
        self.wrapper = os.environ["MULTINODE_SSH_WRAPPER"]
        self.ranks = os.environ["MULTINODE_HOSTLIST_NOSLOTS"].split(",")
        self.workers = self.ranks[1:]
        self.tmp = tempfile.mkdtemp(prefix="fmn-bench-")
        self.ssh_plain = self.ssh_mux = None
        if key is None:
            return
        # ssh wants the key to be the user's own and private.
        self.key = os.path.join(self.tmp, "key")
        shutil.copyfile(key, self.key)
        os.chmod(self.key, 0o600)
        # Host keys are not checked: the baseline addresses nodes by rank
        # name, which the nodes' known_hosts does not know.
        self.ssh_plain = ["ssh", "-i", self.key, "-l", getpass.getuser(), "-o", "IdentitiesOnly=yes",
                          "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                          "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
        self.ssh_mux = self.ssh_plain + ["-o", "ControlMaster=auto", "-o", "ControlPersist=600",
                                         "-o", "ControlPath=%s/%%C" % self.tmp]

    def wrapper_call(self, node, *command):
        return [self.wrapper, node, *command]

    def ssh_call(self, node, *command):
        return self.ssh_mux + [node, *command]

    def warm(self):
        """The first wrapper call and each ssh master, before any timing."""
        for node in self.workers:
            run(self.wrapper_call(node, "true"))
            if self.ssh_mux:
                run(self.ssh_call(node, "true"))

    def close(self):
        for node in self.workers if self.ssh_mux else []:
            subprocess.run(self.ssh_mux + ["-O", "exit", node], stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(argv, stdout=subprocess.DEVNULL):
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        sys.exit("bench: %s exited with %d: %s" % (argv[:3], done.returncode, done.stderr.decode()[-500:]))


def timed(argv, stdout=subprocess.DEVNULL):
    start = time.perf_counter()
    run(argv, stdout)
    return time.perf_counter() - start


def timed_at_once(argvs):
    """Seconds until every one of argvs, started together, has ended."""
    start = time.perf_counter()
    procs = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for argv in argvs]
    for argv, proc in zip(argvs, procs, strict=True):
        err = proc.communicate()[1]
        if proc.returncode != 0:
            sys.exit("bench: %s exited with %d: %s" % (argv[:3], proc.returncode, err.decode()[-500:]))
    return time.perf_counter() - start


def latency(nodes, reps):
    """Alternating samples, so that a load that comes and goes meets both."""
    results = {key: [] for key in ("wrapper_1", "ssh_1", "wrapper_8", "ssh_8", "mpi_wrapper", "mpi_ssh")}
    one = nodes.workers[0]
    for _unused in range(reps):
        results["wrapper_1"].append(timed(nodes.wrapper_call(one, "true")))
        results["ssh_1"].append(timed(nodes.ssh_call(one, "true")))
    for _unused in range(reps):
        results["wrapper_8"].append(timed_at_once([nodes.wrapper_call(w, "true") for w in nodes.workers]))
        results["ssh_8"].append(timed_at_once([nodes.ssh_call(w, "true") for w in nodes.workers]))
    # Open MPI over the first two ranks, as implementation openmpi runs it,
    # with the wrapper or a plain ssh (a new connection) as the rsh agent.
    hosts = "%s:1,%s:1" % (nodes.ranks[0], nodes.ranks[1])
    for _unused in range(max(3, reps // 4)):
        for key, agent in (("mpi_wrapper", nodes.wrapper), ("mpi_ssh", " ".join(nodes.ssh_plain))):
            results[key].append(timed(["mpirun", "-H", hosts, "--mca", "plm_rsh_agent", agent, "-np", "2",
                                       "/usr/lib64/openmpi/bin/mpi_hello_world"]))
    return results


def wrapper_latency(nodes, reps):
    """The wrapper samples of latency() alone, taken the same way."""
    results = {"wrapper_1": [], "wrapper_8": []}
    one = nodes.workers[0]
    for _unused in range(reps):
        results["wrapper_1"].append(timed(nodes.wrapper_call(one, "true")))
    for _unused in range(reps):
        results["wrapper_8"].append(timed_at_once([nodes.wrapper_call(w, "true") for w in nodes.workers]))
    return results


def streams(nodes, reps):
    """50 MB of lines from rank 1 through the wrapper (forwarded to its
    stdout, the job log: the controller checks them there) and through ssh
    into a file here,
    checked now. ssh sends LINES_FILE % 0 each time; forwarded repetition r
    (1..reps) sends LINES_FILE % r, whose lines start with r, so that the
    job log shows a line that came twice."""
    results = {"forward": [], "ssh_file": [], "ssh_file_bad_lines": 0}
    one = nodes.workers[0]
    out = os.path.join(nodes.tmp, "lines")
    for _unused in range(reps):
        with open(out, "wb") as into:
            results["ssh_file"].append(timed(nodes.ssh_call(one, "cat", LINES_FILE % 0), into))
        with open(out, "rb") as got:
            results["ssh_file_bad_lines"] += sum(line != bench_line(0, n) for n, line in enumerate(got))
        results["ssh_file_bad_lines"] += abs(os.path.getsize(out) - LINES * LINE_BYTES) // LINE_BYTES
    for rep in range(1, reps + 1):
        # Forwarded output comes out of the wrapper's stdout: here, the job log.
        results["forward"].append(timed(nodes.wrapper_call(one, "cat", LINES_FILE % rep), stdout=None))
    return results


def main():
    mode = sys.argv[1]
    if mode == "wrapper":
        key, reps, measure = None, int(sys.argv[2]), wrapper_latency
    else:
        key, reps, measure = sys.argv[2], int(sys.argv[3]), latency if mode == "latency" else streams
    nodes = Nodes(key)
    try:
        nodes.warm()
        results = measure(nodes, reps)
    finally:
        nodes.close()
    print("bench-result " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
