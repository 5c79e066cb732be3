"""What the node image's MPI programs print (scripts/node-image/
mpi_hello_world.c and mpi_allreduce.c), parsed, and what they print when all
went well. One definition for the container tier (molecule/mpi) and the local
tier (tests/local/test_local_mpi.py), so both judge MPI runs alike."""

import re

HELLO = re.compile(r"^Hello world from processor (\S+), rank (\d+) out of (\d+) processors$")
ALLREDUCE = re.compile(r"^allreduce rank (\d+) of (\d+) on (\S+): "
                       r"sum (\d+) \(expected (\d+)\), ring (\d+) \(expected (\d+)\): (\S+)$")


def hello_ranks(lines):
    """{MPI rank: (processor name, size)} from the hello world's lines. Every
    line must be a hello line, and there must be some: the logs looked at
    hold nothing else, so anything else is a fault of the run."""
    found = [HELLO.match(line) for line in lines]
    assert lines and all(found), lines
    return {int(m.group(2)): (m.group(1), int(m.group(3))) for m in found}


def allreduce_results(lines):
    """[(rank, size, processor name, sum, ring, verdict)] of mpi_allreduce,
    sorted; other lines (a job's own output beside the ranks') are passed
    over, but every `allreduce rank` line must be whole."""
    found = [ALLREDUCE.match(line) for line in lines if line.startswith("allreduce rank")]
    assert all(found), lines
    return sorted((int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)),
                   int(m.group(6)), m.group(8)) for m in found)


def communicated(job, nodes, per_node):
    """What every rank of mpi_allreduce prints when all went well: ranks
    placed per_node at a time on the job's rank host names, the allreduce
    of rank + 1 and the ring's sum of ranks right on every rank."""
    size = nodes * per_node
    return [(r, size, "%s-%d" % (job, r // per_node), size * (size + 1) // 2,
             size * (size - 1) // 2, "ok") for r in range(size)]
