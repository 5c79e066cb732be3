"""The one error the runtime reports to users."""

# The wrapper's name in its messages (a job's processes call it as ssh).
PROG = "multinode-ssh-wrapper"


class RuntimeFailure(Exception):
    """An error to report to the user as one clear line, never a traceback."""
