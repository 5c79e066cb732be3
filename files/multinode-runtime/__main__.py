"""fuzz.multinode node runtime: `/usr/bin/python3 -I DIR SUBCOMMAND ...`.

Python runs this file when given the runtime's directory; the work is done by
the package beside it (multinode_runtime), whose bytecode the node role
compiles at install. Only this file is compiled on every call: keep it small.
"""

import sys

from multinode_runtime.cli import main

sys.exit(main(sys.argv))
