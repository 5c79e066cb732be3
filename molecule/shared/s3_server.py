"""moto's standalone S3 server for the data movement tests (tests/local on
this machine, molecule/workflow on its scenario's network): the server with
an IAM user whose key every request after the setup is checked against,
and the S3 client of that user. The secrets a user would pass (-e @FILE)
are the test's own."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

# Requests are authenticated after the first three (the user, its policy,
# its key).
SETUP_REQUESTS = 3
USER_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


def free_port(address):
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def logged_requests(log):
    """[(client address, method, path without its query, status)] of the
    requests in a log of werkzeug's (moto's) or of Python's http.server,
    which write the same line (werkzeug in colours):
    172.18.0.3 - - [03/Dec/2026 10:45:55] "GET /bucket/key HTTP/1.1" 200 -"""
    found = []
    for line in re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines():
        match = re.match(r'(\S+) - - \[[^]]*\] "(\S+) (\S+) HTTP/[\d.]+" (\d+) ', line)
        if match:
            found.append((match.group(1), match.group(2), match.group(3).split("?")[0], int(match.group(4))))
    return found


class S3Server:
    """moto_server (this Python's) listening on `address`, its log (every
    request, with the client's address) in `log_path`. `s3` is the user's
    client, `key` the user's {access_key_id, secret_access_key}. Stop it
    with stop()."""

    def __init__(self, address, log_path):
        self.port = free_port(address)
        self.endpoint = "http://%s:%d" % (address, self.port)
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-H", address, "-p", str(self.port)],
            env=dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(SETUP_REQUESTS)),
            stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_for(address)
            iam = boto3.client("iam", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="setup", aws_secret_access_key="setup")
            iam.create_user(UserName="fmn")
            iam.put_user_policy(UserName="fmn", PolicyName="s3", PolicyDocument=json.dumps(USER_POLICY))
            created = iam.create_access_key(UserName="fmn")["AccessKey"]
        except BaseException:
            self.stop()
            raise
        self.key = {"access_key_id": created["AccessKeyId"], "secret_access_key": created["SecretAccessKey"]}
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id=created["AccessKeyId"],
                               aws_secret_access_key=created["SecretAccessKey"])

    def _wait_for(self, address):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("moto_server exited: see %s" % self.log_path)
            try:
                socket.create_connection((address, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("moto_server did not listen on %s:%d" % (address, self.port))

    def secrets(self):
        """fuzz_multinode_secrets of the tests: the user's key (user/s3), a
        key the server does not know (user/wrong-key) and the user's key
        with a wrong secret (user/wrong-secret)."""
        return {
            "user/s3": dict(self.key),
            "user/wrong-key": {"access_key_id": "AKIAFMNUNKNOWNKEY000", "secret_access_key": "not-a-secret"},
            "user/wrong-secret": {"access_key_id": self.key["access_key_id"], "secret_access_key": "not-the-secret"},
        }

    def requests(self):
        """The requests of the server's log so far (logged_requests)."""
        return logged_requests(self.log_path.read_text(errors="replace"))

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
