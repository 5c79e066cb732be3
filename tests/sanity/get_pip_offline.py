# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""A stand-in for pip's get-pip.py, which ansible-test downloads to put pip
into the virtual environments of its sanity tests: that download needs a
host only the internet has, while the package index is reachable. It runs
ensurepip, then installs the pip (and anything else) it is given from the
index. scripts/setup puts it where ansible-test looks for its cached copy
(~/.ansible/test/cache/get_pip_<version>.py)."""

import subprocess
import sys

# get-pip.py's own options that pip install does not know.
GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")

subprocess.run([sys.executable, "-m", "ensurepip", "--upgrade"], check=True)
wanted = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
if wanted:
    subprocess.run([sys.executable, "-m", "pip", "install"] + wanted, check=True)
