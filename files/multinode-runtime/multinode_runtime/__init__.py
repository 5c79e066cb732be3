"""The fuzz.multinode node runtime (Python 3 standard library only).

One concept per module; docs/design.md maps them. cli.py lists the
subcommands and dispatches to the module that carries each out.
"""
