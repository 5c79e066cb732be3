"""Verifier of the badinput scenario: malformed and hostile Fuzzfiles
(tests/fuzzfiles/badinput/) run through run-job.yml exactly as a user runs
them, against a real 2-node container cluster.

Refused Fuzzfiles: ansible-playbook exits non-zero, its one failure says
which field (or the inventory) is wrong and how, no traceback, and nothing
is written to any node. "Nothing written" is checked on every node by
comparing, before and after the run, a listing (type, mode, owner, size,
mtime, ctime) of everything fuzz.multinode or an Ansible connection would
create or change (/run/fuzz-multinode, /var/log/fuzz-multinode,
/etc/fuzz-multinode, /opt/fuzz-multinode, /multinode, /home, /root with
~/.ansible, /etc/ssh, /tmp), hashes of /etc/hosts, /etc/passwd, /etc/group and
/etc/shadow, and the node's process names; and by asking `find` for any
file in the node's file system modified or changed since the run started.
The first refusals run on nodes that were never prepared (where preparing
them would write a lot), the later ones on nodes prepared by the hostile
job (where only the job's registration or an Ansible connection would).

Hostile but valid Fuzzfiles run: every value that a shell, the runtime or
Ansible's templating could execute would create a /tmp/fmn-badinput-pwned-*
file; none may ever exist on a node or on the controller, and the values
must reach the job's environment byte for byte on the head and, through
exec_all, on the worker.

Containers share the host's clock, so the verifier's time.time() compares
with the nodes' file times.
"""

import collections
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "shared"))
import node_runtime  # noqa: E402  (what the nodes' runtime holds of a job, and its paths)

import fuzz_playbook as user_playbook  # noqa: E402  (run-job.yml as a user runs it)

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
FUZZFILES = PROJECT / "tests" / "fuzzfiles" / "badinput"
NODES = ["fmn-badinput-node-1", "fmn-badinput-node-2"]
MARKER = "fmn-badinput-pwned"  # every hostile value would create /tmp/<MARKER>-*

# -- the nodes' state ---------------------------------------------------------

STATE_PATHS = [node_runtime.registry.STATE_DIR, node_runtime.registry.LOG_DIR, "/etc/fuzz-multinode",
               "/opt/fuzz-multinode", "/multinode", "/home", "/root", "/etc/ssh", "/tmp"]
SNAPSHOT = r"""
for path in %s; do
  if [ -e "$path" ]; then
    find "$path" -xdev -printf '%%p %%y %%m %%u:%%g %%s %%T@ %%C@ %%l\n'
  else
    echo "$path absent"
  fi
done | LC_ALL=C sort
sha256sum /etc/hosts /etc/passwd /etc/group /etc/shadow
echo "user fuzz: $(getent passwd fuzz || echo absent)"
# every process but this script and its children
echo "processes: $(ps -e -o pid=,ppid=,comm= | awk -v me=$$ '
  { parent[$1] = $2; name[$1] = $3 }
  END { for (p in name) { q = p; while (q != me && q > 1 && (q in parent)) q = parent[q];
                          if (q != me) print name[p] } }' | LC_ALL=C sort | tr '\n' ' ')"
""" % " ".join(STATE_PATHS)


def on_nodes(script):
    """Run a shell script as root on every node at once (docker exec, no
    Ansible: it must not change what it looks at); returns {node: stdout}."""
    procs = {node: subprocess.Popen(["docker", "exec", node, "sh", "-c", script],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for node in NODES}
    return {node: proc.communicate()[0] for node, proc in procs.items()}


def node_states(started=None):
    """{node: (state, changed)}: the SNAPSHOT listing of the node, and when
    `started` (the controller's clock) is given, every file of the node's
    own file system modified or changed (mtime or ctime) since then."""
    script = SNAPSHOT
    if started is not None:
        stamp = "@%.6f" % started
        script += "echo '--- changed since the run started:'\n"
        script += "find / -xdev \\( -newermt '%s' -o -newerct '%s' \\) -print\n" % (stamp, stamp)
    states = {}
    for node, out in on_nodes(script).items():
        state, _unused, changed = out.partition("--- changed since the run started:\n")
        states[node] = (state, sorted(changed.splitlines()))
    return states


def never_prepared(state):
    """Whether the node role never prepared this node (from its state)."""
    return all(line in state.splitlines() for line in (
        "/etc/fuzz-multinode absent", "/opt/fuzz-multinode absent", "user fuzz: absent"))


def controller_markers():
    """Marker files on the controller: /tmp, the project directory where
    the playbook runs, and $HOME."""
    found = []
    for directory in ("/tmp", str(PROJECT), os.path.expanduser("~")):
        found += sorted(str(path) for path in Path(directory).glob(MARKER + "*"))
    return found


def markers():
    """Marker files that hostile values would have created: anywhere in the
    nodes' file systems, and on the controller."""
    found = []
    for node, out in on_nodes("find / -xdev -name '%s*' -print" % MARKER).items():
        found += ["%s:%s" % (node, line) for line in out.split()]
    return found + controller_markers()


@pytest.fixture(scope="session", autouse=True)
def no_markers_before():
    """Leftovers of an earlier run would say nothing about this one."""
    on_nodes("rm -f /tmp/%s*" % MARKER)
    for path in Path("/tmp").glob(MARKER + "*"):
        path.unlink()
    assert markers() == []


# -- running the playbook like a user -------------------------------------------

class Run:
    def __init__(self, job, logs, rc, output):
        self.job, self.logs, self.rc, self.output = job, logs, rc, output

    @property
    def log(self):
        if self.job is None:
            return ""
        path = self.logs / (self.job + ".log")
        return path.read_text() if path.exists() else ""

    @property
    def lines(self):
        return self.log.splitlines()

    def failures(self):
        """The results Ansible reported as failed: [(host, result)]."""
        found = []
        lines = self.output.splitlines()
        for index, line in enumerate(lines):
            match = re.match(r"fatal: \[([^]]+)\]: FAILED! => ?(.*)$", line)
            if not match:
                continue
            if match.group(2).strip():  # a JSON result on the same line
                found.append((match.group(1), json.loads(match.group(2))))
                continue
            block = []
            for follow in lines[index + 1:]:
                if follow.strip() and not follow.startswith(" "):
                    break
                block.append(follow)
            found.append((match.group(1), yaml.safe_load(textwrap.dedent("\n".join(block)))))
        return found

    def __str__(self):  # the assertion message: what the user saw
        return "Run(%s, rc=%s)\n--- output ---\n%s\n--- job log ---\n%s" % (
            self.job, self.rc, self.output[-8000:], self.log)


def run_job(fuzzfile, logs, name, job=None):
    """run-job.yml for a Fuzzfile (-e job= when `job` is given); `name` is
    the job whose log the play fetches."""
    rc, output, _unused = user_playbook.run_job(FUZZFILES / fuzzfile, logs, job)
    return Run(name, logs, rc, output)


# -- refused Fuzzfiles --------------------------------------------------------------

HOSTILE_JOB = "0--hostile-values--the-longest-name-whose-rank-names-fit-in63"
LONG_JOB = "job-name-of-62-characters-so-its-rank-names-have-64-characters"
BAD_NAME = ("x'\n;touch /tmp/fmn-badinput-pwned-name-semi;$(touch /tmp/fmn-badinput-pwned-name-subst)"
            "`touch /tmp/fmn-badinput-pwned-name-tick`"
            "{{ lookup('ansible.builtin.pipe', 'touch /tmp/fmn-badinput-pwned-name-jinja') }}")
BAD_SELECTION = "x;touch${IFS}/tmp/fmn-badinput-pwned-select;`touch${IFS}/tmp/fmn-badinput-pwned-select2`"
NAME_RULE = ("use at most 63 lowercase letters, digits and '-', starting and ending with a letter "
             "or digit (the name becomes the ranks' host names)")


def in_file(fuzzfile, message):
    """The fuzzfile module's messages start with the Fuzzfile's path."""
    return "%s: %s" % (FUZZFILES / fuzzfile, message)


# (id, Fuzzfile, -e job=, the exact message a user gets)
FRESH_CASES = [
    ("malformed-yaml", "malformed-yaml.yml", None, in_file(
        "malformed-yaml.yml", "line 8, column 5: invalid YAML: expected ',' or ']', but got "
        "'<scalar>' (while parsing a flow sequence)")),
    ("python-tag", "python-tag.yml", None, in_file(
        "python-tag.yml", "line 7, column 14: invalid YAML: could not determine a constructor "
        "for the tag 'tag:yaml.org,2002:python/object/apply:os.system'")),
    ("wrong-type", "wrong-type.yml", None, in_file(
        "wrong-type.yml", "jobs.wrong-type.multinode.nodes: must be an integer >= 1, got 'two'")),
    ("env-mapping", "env-mapping.yml", None, in_file(
        "env-mapping.yml", "jobs.env-mapping.env: must be a list of KEY=VALUE strings, got a mapping")),
    ("unknown-key", "unknown-key.yml", None, in_file(
        "unknown-key.yml", "jobs.unknown-key.multinode.node: unknown key; expected one of "
        "implementation, nodes, procs-per-node (did you mean 'nodes'?)")),
    ("name-metacharacters", "name-metacharacters.yml", None, in_file(
        "name-metacharacters.yml", "jobs: invalid job name %r: %s" % (BAD_NAME, NAME_RULE))),
    ("env-nul", "env-nul.yml", None, in_file(
        "env-nul.yml", "jobs.env-nul.env[0]: must not contain a NUL character")),
    ("long-name", "long-name.yml", None, in_file(
        "long-name.yml", "jobs.%s: rank host name '%s-1' is longer than 63 characters; use a "
        "shorter job name" % (LONG_JOB, LONG_JOB))),
]
PREPARED_CASES = [
    ("missing-job", "missing-job.yml", None, in_file(
        "missing-job.yml", "jobs: must contain at least one job")),
    ("hostile-selection", "hostile.yml", BAD_SELECTION, in_file(
        # (a long name is shown shortened)
        "hostile.yml", "jobs: no job named %r; jobs: %s" % (BAD_SELECTION[:57] + "...", HOSTILE_JOB))),
    ("env-name", "env-name.yml", None, in_file(
        "env-name.yml", "jobs.env-name.env[0]: 'X;touch /tmp/fmn-badinput-pwned-env-name-key' is "
        "not a valid variable name (letters, digits and '_', not starting with a digit)")),
    ("too-many-nodes", "too-many-nodes.yml", None,
     "job too-many-nodes needs 3 nodes but the inventory group multinode has 2 hosts"),
    # Refused by the fuzzfile module, before any host is touched.
    ("gasnet", "gasnet.yml", None, in_file(
        "gasnet.yml", "jobs.chapel.multinode.implementation: 'gasnet' is not supported: "
        "fuzz.multinode has no GASNet launcher (GASNet is not packaged in Debian, the OS its "
        "tests run on, so one could not be tested); use implementation 'generic' and let "
        "GASNet's ssh spawner start the processes through the wrapper: run the program with "
        "GASNET_SSH_CMD=$MULTINODE_SSH_WRAPPER, GASNET_SSH_SERVERS=$MULTINODE_HOSTLIST_NOSLOTS "
        "and GASNET_SPAWNFN=S (udp conduit; other conduits: GASNET_<CONDUIT>_SPAWNER=ssh)")),
]


def check_refusal(tmp_path, fuzzfile, job, message, before):
    """Run a Fuzzfile that must be refused; `before` is node_states() just
    before. (A marker could only have been created by executing a value:
    on the nodes, `changed` would list it.)"""
    logs = tmp_path / "logs"  # must not even be created
    started = time.time()
    time.sleep(0.1)  # file times come from a coarse clock: keep them clearly after `started`
    run = run_job(fuzzfile, logs, job, job)
    after = node_states(started)
    # Nothing was written: not on any node, not even the log directory.
    assert {node: changed for node, (_unused, changed) in after.items()} == \
        {node: [] for node in NODES}, str(run)
    assert {node: state for node, (state, _unused) in after.items()} == \
        {node: state for node, (state, _unused) in before.items()}, str(run)
    assert not logs.exists(), str(run)
    assert controller_markers() == [], str(run)
    # Refused, saying what is wrong and where, before any node was reached.
    assert run.rc != 0, str(run)
    assert "Traceback" not in run.output and "MODULE FAILURE" not in run.output, str(run)
    failures = run.failures()
    assert [host for host, _unused in failures] == ["localhost"], str(run)
    assert failures[0][1]["msg"] == message, str(run)


@pytest.mark.parametrize("fuzzfile, job, message", [case[1:] for case in FRESH_CASES],
                         ids=[case[0] for case in FRESH_CASES])
def test_refused_on_never_prepared_nodes_without_writing_anything(tmp_path, fuzzfile, job, message):
    before = node_states()
    assert all(never_prepared(state) for state, _unused in before.values()), \
        "run on fresh nodes: molecule destroy/create (or molecule test)"
    check_refusal(tmp_path, fuzzfile, job, message, before)


# -- hostile values that are valid ------------------------------------------------

# The env of hostile.yml, as the bytes every rank's environment must hold.
HOSTILE_ENV = {
    "MULTINODE_WRAPPER_FORWARD_STREAMS": "1",
    "SUBST": "$(touch /tmp/fmn-badinput-pwned-subst)",
    "TICKS": "`touch /tmp/fmn-badinput-pwned-ticks`",
    "SEMI": "x; touch /tmp/fmn-badinput-pwned-semi; echo",
    "OPS": "x && touch /tmp/fmn-badinput-pwned-and || touch /tmp/fmn-badinput-pwned-or "
           "& touch /tmp/fmn-badinput-pwned-bg",
    "REDIR": "| touch /tmp/fmn-badinput-pwned-pipe > /tmp/fmn-badinput-pwned-redir < /etc/passwd",
    "SQUOTE": "it's '$(touch /tmp/fmn-badinput-pwned-sq)' ''",
    "DQUOTE": 'say "$(touch /tmp/fmn-badinput-pwned-dq)" "',
    "NEWLINES": "line1\n$(touch /tmp/fmn-badinput-pwned-nl)\ntouch /tmp/fmn-badinput-pwned-nl2\n",
    "ONLY_NEWLINE": "\n",
    "BACKSLASH": "back\\slash \\n \\\\ \\' \\",
    "DOLLARS": "$HOME ${RANK} $1 $@ $# $$ ${MULTINODE_NODE_IP} $",
    "GLOB": "* /* ?",
    "JINJA": "{{ lookup('ansible.builtin.pipe', 'touch /tmp/fmn-badinput-pwned-jinja') }}",
    "JINJA_BLOCK": "{% for x in [lookup('ansible.builtin.pipe', 'touch /tmp/fmn-badinput-pwned-jinja-block')] %}"
                   "{{ x }}{% endfor %}{# comment #}",
    "EQUALS": "a=b=c",
    "EMPTY": "",
    "DASHES": "-n -e --",
    "UTF8": "h\u00e9llo \u2713 \u0441\u0448",
    "CONTROL": "\t\x01\x1b[31m\x7f\r",
    "PERCENT": "%s %d %n %%",
}
# The args of hostile.yml after expansion ($SUBST once, from rank 0's env).
HOSTILE_ARGS = [
    "$(touch /tmp/fmn-badinput-pwned-arg)",
    "`touch /tmp/fmn-badinput-pwned-arg-ticks`; touch /tmp/fmn-badinput-pwned-arg-semi",
    "{{ lookup('ansible.builtin.pipe', 'touch /tmp/fmn-badinput-pwned-arg-jinja') }}",
    "it's \"two\"\nlines",
    HOSTILE_ENV["SUBST"],
]
HOSTILE_RANKS = ["%s-%d" % (HOSTILE_JOB, rank) for rank in range(2)]


def hexed(text):
    return text.encode("utf-8").hex()


def test_the_hostile_fuzzfile_declares_the_values_checked_here():
    job = yaml.safe_load((FUZZFILES / "hostile.yml").read_text())["jobs"][HOSTILE_JOB]
    assert [entry.split("=", 1) for entry in job["env"]] == [[k, v] for k, v in HOSTILE_ENV.items()]
    assert job["args"] == HOSTILE_ARGS[:-1] + ["$SUBST"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return run_job("hostile.yml", tmp_path_factory.mktemp("hostile"), HOSTILE_JOB)


def test_hostile_values_run(hostile):
    assert hostile.rc == 0, str(hostile)
    assert "Traceback" not in hostile.output, str(hostile)


def test_no_hostile_value_was_executed_or_templated(hostile):
    """Not by Ansible on the controller (env, args and script text are
    templated nowhere, nor is the job log the play shows), not by the
    runtime, not by any shell on either node."""
    assert markers() == [], str(hostile)


def test_env_values_arrive_byte_exact_in_every_rank_shell(hostile):
    """As $NAME in the job's shell on the head, and in the worker's shell
    that runs what exec_all sent."""
    want = sorted("env %s on=%s hex=[%s]" % (name, rank, hexed(value))
                  for rank in HOSTILE_RANKS for name, value in HOSTILE_ENV.items()
                  if name != "MULTINODE_WRAPPER_FORWARD_STREAMS")
    assert sorted(line for line in hostile.lines if line.startswith("env ")) == want, str(hostile)


def test_env_values_arrive_byte_exact_in_every_rank_process_environment(hostile):
    """/proc/<pid>/environ of the head's script and of the worker's shell:
    the environment the runtime gave them, read without any shell parsing."""
    seen = {}
    for line in hostile.lines:
        match = re.fullmatch(r"environ on=(\S+) hex=([0-9a-f]*)", line)
        if match:
            entries = bytes.fromhex(match.group(2)).split(b"\0")
            environ = dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)
            seen[match.group(1)] = {name: environ.get(name.encode()) for name in HOSTILE_ENV}
    want = {name: value.encode("utf-8") for name, value in HOSTILE_ENV.items()}
    assert seen == {rank: want for rank in HOSTILE_RANKS}, str(hostile)


def test_args_arrive_byte_exact_on_every_rank(hostile):
    hexes = ",".join(hexed(arg) for arg in HOSTILE_ARGS)
    want = sorted("args on=%s n=%d hex=%s" % (rank, len(HOSTILE_ARGS), hexes) for rank in HOSTILE_RANKS)
    assert sorted(line for line in hostile.lines if line.startswith("args ")) == want, str(hostile)


def test_the_job_log_holds_only_what_the_ranks_printed(hostile):
    labels = collections.Counter(line.split(" ", 1)[0] for line in hostile.lines)
    assert labels == {"env": 2 * (len(HOSTILE_ENV) - 1), "environ": 2, "args": 2}, str(hostile)


def test_a_hostile_program_name_fails_the_job_naming_it_literally(tmp_path):
    """command[0] is a Jinja expression and a command substitution: the job
    fails because no such program exists, and says so with the name as
    written; neither Ansible (which shows the message) nor a shell ran it."""
    run = run_job("hostile-command.yml", tmp_path, "hostile-command")
    program = ("{{ lookup('ansible.builtin.pipe', 'touch /tmp/fmn-badinput-pwned-command-jinja') }}"
               "$(touch /tmp/fmn-badinput-pwned-command-subst)")
    assert run.rc != 0, str(run)
    assert "Traceback" not in run.output, str(run)
    assert [msg for _unused, result in run.failures() for msg in [result.get("msg")]] == \
        ["cannot run %r: No such file or directory" % program], str(run)
    assert markers() == [], str(run)


# -- refused Fuzzfiles on prepared nodes ---------------------------------------

@pytest.mark.parametrize("fuzzfile, job, message", [case[1:] for case in PREPARED_CASES],
                         ids=[case[0] for case in PREPARED_CASES])
def test_refused_on_prepared_nodes_without_writing_anything(tmp_path, hostile, fuzzfile, job, message):
    assert hostile.rc == 0, hostile  # it prepared the nodes
    before = node_states()
    assert not any(never_prepared(state) for state, _unused in before.values())
    check_refusal(tmp_path, fuzzfile, job, message, before)


# -- nodes are left as they were --------------------------------------------------

def test_nothing_of_the_jobs_is_left_on_the_nodes(hostile):
    out = on_nodes("ps -e -o user=,pid=,stat=,args= | awk '$1 == \"fuzz\"'; "
                   "grep -c 'fuzz.multinode job' /etc/hosts")
    assert out == {node: "0\n" for node in NODES}
    assert {node: node_runtime.show(node)["jobs"] for node in NODES} == {node: [] for node in NODES}


def test_no_marker_file_exists_anywhere():
    """After every run above: nothing any hostile value could create."""
    assert markers() == []
