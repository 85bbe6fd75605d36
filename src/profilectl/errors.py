"""Exit codes (the contract in README.md) and the errors that carry them.

Every failure a user can cause or meet ends as one line on stderr and one of these codes; the CLI
catches ProfilectlError at the top, so nothing below it prints tracebacks for expected failures.
"""

from __future__ import annotations

OK = 0
WORKLOAD_FAILED = 1
USAGE = 2
UNAVAILABLE = 3
PROFILER_FAILED = 4
DISK_FULL = 5  # the traces folder's file system ran out of space (status `disk-full`)
SLOWER = 6  # `compare --fail-if-slower PCT`: NEW is slower than BASE by more than PCT percent (the CI gate)
QUERY_MEMORY = 7  # `query`: the statement used up its memory budget (--memory-mb, $PROFILECTL_QUERY_MEMORY_MB)
TIMEOUT = 124  # the --timeout ran out (same code as coreutils `timeout`)
INTERRUPTED = 130


class ProfilectlError(Exception):
    exit_code = USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(ProfilectlError):
    exit_code = USAGE


class UnavailableError(ProfilectlError):
    exit_code = UNAVAILABLE


class FormatError(UsageError):
    """A file that cannot be read as what it claims to be: one line naming the file (and line)."""


class DataError(UsageError):
    """profilectl's own shipped data (profiling/) is missing or broken: an installation problem."""


class DiskFullError(ProfilectlError):
    """No space left where profilectl writes: one line naming the folder and its free space."""
    exit_code = DISK_FULL
