"""Running run-job.yml in local mode exactly as a user does, and looking at
what it leaves on this machine.

A user runs, from the repository root and without an inventory:
    ansible-playbook run-job.yml -e fuzzfile=FILE -e log_dir=DIR
so every run here is that command, with the repository's ansible.cfg (the
working directory is the repository root; ANSIBLE_CONFIG and the like from
the caller's environment are dropped) and a fresh log directory.

Each run-job.yml run costs several seconds of Ansible, so the tier runs a
few workflows, each holding many jobs (a Fuzzfile with many jobs is what a
user runs as a workflow: every job, one at a time), and each test module
looks at its share of one (`Part`). A workflow is put together from the
conformance scenarios' own Fuzzfiles, their job sections copied byte for
byte (`combine`), so the same jobs are judged in local mode.

The job's processes are found by namespace, not by user name alone: every
rank runs in a UTS namespace named after it (`<job>-<r>`, a task array's
supervisor in `<job>`), and a process can leave that namespace only with
root's help. Other local-mode runs on the same machine (a developer's) have
namespaces of other names and are not counted; processes of other
containers are in other mount namespaces and are not looked at.
"""

import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "molecule" / "shared"))
# The node runtime's registry names the node-side paths (this machine is the
# node), and the collection says where the runtime is installed.
for path in (REPO, REPO / "files" / "multinode-runtime"):
    sys.path.insert(0, str(path))
from multinode_runtime import registry  # noqa: E402

from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import RUNTIME_PATH  # noqa: E402

import fuzz_playbook  # noqa: E402  (run_with_timeout, shared with molecule/mpi)

FUZZFILES = REPO / "tests" / "fuzzfiles"
LOCAL_FUZZFILES = FUZZFILES / "local"
EXAMPLES = REPO / "examples"
JOB_USER = "fuzz"
RUNTIME = RUNTIME_PATH
# Where the tier's runs leave their records (conftest.py's workdir sets it),
# not the user's ~/.fuzz-multinode/runs.
RUNS_DIR = None
# A run takes 10-60 s on a loaded 2-core machine; one that hangs (an MPI run
# that never ends) must fail its tests, not hang the tier.
PLAYBOOK_TIMEOUT = 400


# -- Fuzzfiles -------------------------------------------------------------------

def fuzzfile_jobs(path):
    """[(job name, its text)] of a Fuzzfile whose top level is only
    `version: v4` and `jobs:` (comments aside), in file order; each job's
    text is its lines exactly as written (tabs and anchors included)."""
    lines = Path(path).read_text().splitlines(keepends=True)
    top = [line.rstrip() for line in lines if line[:1] not in ("", " ", "\t", "#", "\n")]
    assert top == ["version: v4", "jobs:"], "%s: top level %r" % (path, top)
    body = lines[lines.index("jobs:\n") + 1:]
    jobs = []
    for line in body:
        found = re.match(r"^  ([A-Za-z0-9][^:\s]*):\s*$", line)
        if found:
            jobs.append([found.group(1), ""])
        elif jobs:
            jobs[-1][1] += line
        else:
            assert line.strip() == "" or line.lstrip().startswith("#"), (path, line)
    return [(name, "  %s:\n%s" % (name, text)) for name, text in jobs]


def combine(dest, sources, replace=None):
    """Write one v4 Fuzzfile at `dest` holding the jobs of `sources`, a list
    of (Fuzzfile path, job names or None for all of them), each job's text
    unchanged except for `replace` ({old: new}, e.g. where this machine has
    a program the node image has elsewhere). Returns dest."""
    parts = ["# Put together by tests/local from:\n"]
    parts += ["#   %s\n" % Path(path).relative_to(REPO) for path, _unused in sources]
    parts.append("version: v4\njobs:\n")
    for path, names in sources:
        jobs = fuzzfile_jobs(path)
        found = [name for name, _unused in jobs]
        for name in names or []:
            assert name in found, "%s has no job %s" % (path, name)
        parts += [text for name, text in jobs if names is None or name in names]
    text = "".join(parts)
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    Path(dest).write_text(text)
    return Path(dest)


def job_names(fuzzfile):
    """The names of a Fuzzfile's jobs (then its services), in file order: by its lines when its
    top level is only `version` and `jobs` (which may hold the tabs the spec's
    examples have, which YAML forbids), else as YAML."""
    text = Path(fuzzfile).read_text()
    top = [line.rstrip() for line in text.splitlines() if line[:1] not in ("", " ", "\t", "#")]
    if top == ["version: v4", "jobs:"]:
        return [name for name, _unused in fuzzfile_jobs(fuzzfile)]
    data = yaml.safe_load(text)
    return list(data.get("jobs") or {}) + list(data.get("services") or {})


# -- looking at this machine -----------------------------------------------------

def _read(path, default=""):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return default


def _ns(pid, kind):
    try:
        return os.readlink("/proc/%s/ns/%s" % (pid, kind))
    except OSError:
        return None


def _same_root(pid):
    """Whether a process's root directory is ours (a container's is not)."""
    try:
        theirs, ours = os.stat("/proc/%s/root" % pid), os.stat("/")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def _uts_name(pid):
    """The host name of the UTS namespace process `pid` is in (None: gone)."""
    done = subprocess.run(["nsenter", "--target", str(pid), "--uts", "hostname"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def belongs_to(name, jobs):
    """Whether a UTS host name is one of these jobs' (rank, task or task-array
    supervisor names)."""
    return any(name == job or re.fullmatch(re.escape(job) + r"-\d+", name) for job in jobs)


def job_processes(jobs):
    """{job: [process description]} of every process on this machine that
    belongs to one of `jobs`: any user's process in a UTS namespace named
    after the job, zombies included (their namespace can no longer be read:
    a zombie of the job user counts for every job), and any process of the
    job user left in this machine's own UTS namespace (a job process there
    escaped its rank's name; attributed to every job)."""
    own_mnt, own_uts = _ns("self", "mnt"), _ns("self", "uts")
    job_uid = pwd.getpwnam(JOB_USER).pw_uid
    found = {job: [] for job in jobs}
    names = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        status = _read("/proc/%s/status" % entry)
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
        state = re.search(r"^State:\s+(\S)", status, re.M)
        if not uid:
            continue  # gone
        args = _read("/proc/%s/cmdline" % entry).replace("\0", " ").strip()
        what = "pid %s uid %s state %s: %s" % (entry, uid.group(1), state.group(1) if state else "?",
                                               args or "[" + _read("/proc/%s/comm" % entry).strip() + "]")
        mnt, uts = _ns(entry, "mnt"), _ns(entry, "uts")
        if mnt is None or uts is None:
            if int(uid.group(1)) == job_uid and (state and state.group(1) == "Z"):
                for job in jobs:
                    found[job].append(what + " (zombie)")
            continue
        if mnt != own_mnt and not _same_root(entry):
            continue  # a container's (a job's sandbox on this machine has our root)
        if uts == own_uts:
            if int(uid.group(1)) == job_uid:
                for job in jobs:
                    found[job].append(what + " (in this machine's own UTS namespace)")
            continue
        if uts not in names:
            names[uts] = _uts_name(entry)
        name = names[uts]
        for job in jobs:
            if name and belongs_to(name, [job]):
                found[job].append("%s (host name %s)" % (what, name))
    return found


def host_pid(job, pid):
    """The host pid of a process of the job's sandbox (its ranks' PID
    namespace) that the job knows as `pid` (its `$$`, `$!`), or None."""
    from multinode_runtime.sandbox import job_sandbox
    sandbox = job_sandbox(job)
    return sandbox.host_pid(int(pid)) if sandbox is not None else None


def hosts_blocks():
    """{job: [lines]} of the fuzz.multinode blocks in /etc/hosts."""
    blocks, current = {}, None
    for line in Path("/etc/hosts").read_text().splitlines():
        begin = re.fullmatch(r"# BEGIN fuzz\.multinode job (\S+)", line)
        if begin:
            current = blocks.setdefault(begin.group(1), [])
        elif re.fullmatch(r"# END fuzz\.multinode job (\S+)", line):
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def machine_state(jobs):
    """What the jobs left on this machine: their processes, /etc/hosts blocks
    and job directories, and the machine's own host name."""
    blocks = hosts_blocks()
    return {
        "processes": job_processes(jobs),
        "hosts": {job: blocks[job] for job in jobs if job in blocks},
        "job_dirs": sorted(job for job in jobs if os.path.exists(registry.job_dir(job))),
        "hostname": socket.gethostname(),
    }


def cleaned(state, jobs):
    """The state a user must be left with after these jobs."""
    return {"processes": {job: [] for job in jobs}, "hosts": {}, "job_dirs": [],
            "hostname": state["hostname"]}


# -- running the playbook like a user -----------------------------------------------

def playbook(fuzzfile, logs, extra_vars=None, args=()):
    """argv and environment of `ansible-playbook run-job.yml -e fuzzfile=FILE
    -e log_dir=DIR` from the repository root, no inventory; `args`: more
    ansible-playbook arguments (`-e @secrets.yml`)."""
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "run-job.yml",
            "-e", "fuzzfile=%s" % fuzzfile, "-e", "log_dir=%s" % logs]
    # The tier checks local mode on the bare host, whether or not this
    # machine has Podman (molecule/containers runs jobs in their images).
    argv += ["-e", "fuzz_multinode_execution=host"]
    # The conformance suite against another implementation of the helper.
    if os.environ.get("FUZZ_MULTINODE_HELPER"):
        argv += ["-e", "fuzz_multinode_helper_source=" + os.path.abspath(os.environ["FUZZ_MULTINODE_HELPER"])]
    if RUNS_DIR is not None:
        argv += ["-e", "fuzz_multinode_runs_dir=%s" % RUNS_DIR]
    for name, value in (extra_vars or {}).items():
        argv += ["-e", "%s=%s" % (name, value)]
    argv += list(args)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "MOLECULE_")) and key not in ("PY_COLORS",)}
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = "%s:%s" % (Path(sys.executable).parent, env.get("PATH", "/usr/bin:/bin"))
    return argv, env


class Run:
    """One finished run of run-job.yml: exit status, output, duration, the
    logs it fetched, and the state of this machine the moment it returned."""

    def __init__(self, fuzzfile, logs, rc, output, seconds, hostname_before):
        self.fuzzfile, self.logs, self.rc, self.output, self.seconds = fuzzfile, logs, rc, output, seconds
        self.jobs = job_names(fuzzfile)
        self.hostname_before = hostname_before
        self.state = machine_state(self.jobs)

    def log(self, job):
        path = self.logs / (job + ".log")
        return path.read_text() if path.exists() else ""

    def lines(self, job):
        return self.log(job).splitlines()

    def rank_log(self, job, rank, kind="rank"):
        path = self.logs / job / ("%s-%d.log" % (kind, rank))
        return path.read_text() if path.exists() else None

    def failure(self):
        """The message the play failed with (its last task), as Ansible
        prints it on its [ERROR] line, whitespace runs made one space."""
        found = re.findall(r"^\[ERROR\]: Task failed: Action failed: (.*(?:\n(?!\S).*)*)", self.output, re.M)
        return " ".join(found[-1].split()) if found else ""

    def failed_jobs(self):
        """{job: message} of the jobs the workflow reports as not FINISHED
        (`workflow failed: JOB STATUS: MESSAGE; JOB STATUS: MESSAGE`)."""
        text = self.failure()
        if not text.startswith("workflow failed: "):
            return {}
        names = "|".join(re.escape(job) for job in self.jobs)
        parts = re.split(r"(?:^|; )(%s) (FAILED|NOT_RUN|CANCELED|TIMEOUT)(?:: |$)" % names,
                         text[len("workflow failed: "):])
        return {parts[i]: parts[i + 2] for i in range(1, len(parts) - 2, 3)}

    def __repr__(self):  # shown by pytest when an assertion fails
        return "Run(%s, rc=%s, %.1f s)\n--- playbook output ---\n%s" % (
            self.fuzzfile.name, self.rc, self.seconds, self.output[-12000:])


class Part:
    """The jobs of one source of a combined run (a test module's share):
    the run, seen as if it had held these jobs only."""

    def __init__(self, run, jobs):
        self.run, self.jobs = run, list(jobs)
        missing = set(self.jobs) - set(run.jobs)
        assert not missing, missing
        state = run.state
        self.state = dict(state, processes={job: state["processes"][job] for job in self.jobs},
                          hosts={job: lines for job, lines in state["hosts"].items() if job in self.jobs},
                          job_dirs=[job for job in state["job_dirs"] if job in self.jobs])

    def failed_jobs(self):
        return {job: message for job, message in self.run.failed_jobs().items() if job in self.jobs}

    def __getattr__(self, name):
        return getattr(self.run, name)

    def __repr__(self):
        return repr(self.run)


def run_job(fuzzfile, logs, extra_vars=None, timeout=PLAYBOOK_TIMEOUT, args=()):
    """Run run-job.yml on a Fuzzfile to the end; a run that hangs gets
    Ctrl-C after `timeout` seconds, as a user would give it."""
    argv, env = playbook(fuzzfile, logs, extra_vars, args)
    hostname = socket.gethostname()
    rc, output, seconds = fuzz_playbook.run_with_timeout(argv, env, REPO, timeout, grace=60)
    run = Run(Path(fuzzfile), Path(logs), rc, output, seconds, hostname)
    Path(fuzzfile).with_suffix(".out").write_text(output)  # for a look after the tests
    print("%s: run-job.yml took %.1f s" % (Path(fuzzfile).name, run.seconds))
    return run


def start_playbook(fuzzfile, logs, out_path, extra_vars=None):
    """run-job.yml on a Fuzzfile, started in a session of its own (a
    terminal's process group, for signals to it) with its output going to
    `out_path`; the process."""
    argv, env = playbook(fuzzfile, logs, extra_vars)
    with open(out_path, "w") as out:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_for_output(proc, out_path, ready, within):
    """Until ready(the output so far), the playbook running all along, for
    at most `within` seconds."""
    deadline = time.monotonic() + within
    while not ready(out_path.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
        time.sleep(0.05)


def end_playbook(proc, jobs):
    """After a test that stopped a playbook: kill it if it still runs, and
    restore this machine (unregister) whatever the test saw."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    unregister(jobs)


def unregister(jobs):
    """Restore this machine after a run whose play could not clean up (an
    interrupted one): the runtime's own cleanup, as the play runs it."""
    for job in jobs:
        if os.path.exists(registry.job_dir(job)):
            subprocess.run(["/usr/bin/python3", "-I", RUNTIME, "cleanup", job],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
