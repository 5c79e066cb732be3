"""Debian's chromium, headless, opening a page as a user's browser would
(the run's report.html): what it built of the page (--dump-dom) or a
screenshot, and the console messages it logged (errors, blocked
requests). Each call has a profile of its own: tests run side by side."""

import subprocess

BROWSER = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
           "--window-size=1280,1600"]


def browse(profile, page, *what):
    """(chromium's stdout, its console lines) for `page` (a path), with
    more chromium arguments `what` (--dump-dom, --screenshot=PATH)."""
    done = subprocess.run(BROWSER + ["--user-data-dir=%s" % profile] + list(what) + ["file://%s" % page],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
