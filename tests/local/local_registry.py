"""A real registry on this machine for the tests that pull images: Debian's
docker-registry (the Distribution registry) on a free port of 127.0.0.1,
optionally asking for credentials (htpasswd)."""

import socket
import subprocess
import time
import warnings
from contextlib import contextmanager

import pytest


@contextmanager
def registry(directory, htpasswd=None):
    """A Distribution registry on a free port of 127.0.0.1, storing in
    directory (its log: directory/registry.log); yields its HOST:PORT."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = directory / "config.yml"
    lines = ["version: 0.1", "storage:", "  filesystem:", "    rootdirectory: %s" % (directory / "data"),
             "http:", "  addr: 127.0.0.1:%d" % port]
    if htpasswd:
        lines += ["auth:", "  htpasswd:", "    realm: fmn", "    path: %s" % htpasswd]
    config.write_text("\n".join(lines) + "\n")
    with open(directory / "registry.log", "wb") as log:
        server = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the registry did not start: %s" % (directory / "registry.log").read_text())
                time.sleep(0.05)
        yield "127.0.0.1:%d" % port
    finally:
        server.terminate()
        server.wait(timeout=20)


def htpasswd(path, user, password):
    """An htpasswd file of one user, bcrypt as the registry wants it."""
    with warnings.catch_warnings():  # deprecated (3.11), gone in 3.13: then Debian's apache2-utils htpasswd
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # glibc's crypt, which makes bcrypt hashes
    path.write_text("%s:%s\n" % (user, crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))))
    return path
