"""A worker node's agent: the wrapper calls that ranks on a worker make
(Open MPI's tree spawn: an orted on a worker starts the next ones), from
the run's sandbox, where there is no key to reach a node over ssh (and in
an image no Python wrapper or ssh client to fall back on).

It is the head's agent (agent.py; the same sh client and agent directory)
with two differences: it is started by the head's hold on the node
(launch.hold) and ends with it; and it opens its channels when a call first
needs one, a fresh `hold` over ssh to another node (transport.py), or
calls forked here for a rank of this node, as the hold forks the head's.
"""

import os

from .agent import Agent
from .transport import open_transports


class WorkerAgent(Agent):
    def __init__(self, spec, user, node):
        super().__init__(spec, user, {}, node=node)

    def channel_to(self, target):
        channel = super().channel_to(target)  # a rank of this node's: forked here
        if channel is None:  # RuntimeFailure: the node could not be reached, the client is told why
            self.transports.update(open_transports(self.spec, self.user, {target.node: target}))
            channel = self.channels[target.node] = self.transports[target.node].channel()
        return channel

    def serve(self, supervisor):
        # Forked from the hold: its stdin and stdout are the head's ssh
        # session, which must end when the hold does.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        super().serve(supervisor)
