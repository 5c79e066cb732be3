"""The errors the runtime reports to users: RuntimeFailure, and a transfer
item's TransferError (why one attempt failed; transfers.py tries again or
reports it as a RuntimeFailure)."""

# The wrapper's name in its messages (a job's processes call it as ssh).
PROG = "multinode-ssh-wrapper"


class RuntimeFailure(Exception):
    """An error to report to the user as one clear line, never a traceback."""


class TransferError(Exception):
    """Why an attempt of a transfer item failed, said for the user (never a
    secret's value)."""
