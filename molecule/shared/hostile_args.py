"""The hostile arguments the quoting and busybox helper jobs pass with
exec_all - (the `set --` line of their Fuzzfiles), as the bytes every node
must receive, and their hex form as the jobs print it."""

ARGS = [
    "two words",
    "  lead and trail  ",
    "it's",
    'say "hi"',
    "'",
    "''",
    '"',
    "$HOME ${RANK} $(id -u) `id -u` $1 $@ $#",
    "back\\slash \\n \\\\ \\' \\",
    "*",
    "/*",
    "line1\nline2",
    "trailing newline\n",
    "\n",
    "",
    "-n",
    "--",
    "tab\there",
    "semi; echo injected",
    "h\u00e9llo \u2713",
    "ctl: \u0441\u0448",  # UTF-8 bytes 0x81 and 0x88: dash's and ash's internal quoting markers
    "%s %d",
    "",
]
ARGS_HEX = ",".join(arg.encode("utf-8").hex() for arg in ARGS)
