"""Why a run stopped, as an exit code and one sentence: the command line's contract with scripts and CI.

The codes (docs/cli.md has the table): 0 every study passed; 1 a claim failed; 2 bad input or environment (a
folder that cannot be written, a full disk, a file-size limit, a folder locked by another run, a malformed earlier
report); 3 no claim failed but one is inconclusive; 4 interrupted (SIGINT or SIGTERM); 5 the distributed engine was
lost (a scheduler that stopped responding, a worker that kept dying); 6 an unexpected error (a bug: ``--debug``
shows its traceback). A fault never leaves a report folder mixed (``verify._common.files``), and the blocks finished
before it stay cached for ``--resume``.
"""

from __future__ import annotations

import concurrent.futures
import errno
import signal
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from verify._common import FolderLocked


class Exit(IntEnum):
    """The exit codes of ``python -m convergence run`` and ``report``."""

    PASSED = 0
    FAILED = 1
    BAD_INPUT = 2
    INCONCLUSIVE = 3
    INTERRUPTED = 4
    ENGINE_LOST = 5
    UNEXPECTED = 6


WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG)


class Fault(Exception):
    """A run stopped for a reason outside the claims it checks: ``code`` and the sentence that says why."""

    def __init__(self, code: Exit, message: str):
        super().__init__(message)
        self.code = code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as an interruption (so every ``finally`` runs, as for Ctrl-C)."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the ``with``, SIGTERM raises ``Terminated`` in the main thread instead of ending the process at once."""

    def raise_terminated(number, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def as_fault(error: BaseException, scheduler: str, out: str, cache: str) -> Fault | None:
    """The fault ``error`` is, with its sentence (``scheduler``, the ``--out`` and ``--cache`` folders name where),
    or None for an unexpected error."""
    resume = f"finished blocks stay cached in {cache!r}: rerun with --resume"
    if isinstance(error, Fault):
        return error
    if isinstance(error, KeyboardInterrupt):
        how = "terminated (SIGTERM)" if isinstance(error, Terminated) else "interrupted"
        return Fault(
            Exit.INTERRUPTED, f"{how}: no report of this run was written, {out!r} holds the previous ones; {resume}"
        )
    if isinstance(error, FolderLocked):
        return Fault(Exit.BAD_INPUT, f"--out {error}: wait for it to finish or pass another --out")
    if isinstance(error, OSError) and error.errno in WRITE_ERRORS:
        return Fault(
            Exit.BAD_INPUT,
            f"cannot write {error.filename or 'a report or cache file'}: {error.strerror} (--out {out!r}, --cache "
            f"{cache!r}); {resume}",
        )
    if scheduler != "sync" and _engine_error(error):
        where = "the local Dask cluster" if scheduler == "processes" else f"the Dask scheduler at {scheduler}"
        return Fault(
            Exit.ENGINE_LOST,
            f"{where} stopped responding ({type(error).__name__}: {error or 'no message'}); {resume}",
        )
    return None


def _engine_error(error: BaseException) -> bool:
    """An error of the distributed engine itself: a cancelled future, a closed connection, a worker killed too
    often or at its start, a scheduler that cannot be reached (dask raises these from ``distributed``'s modules, as
    timeouts, or as plain errors raised inside ``distributed``, e.g. "Nanny failed to start")."""
    module = type(error).__module__ or ""
    return (
        module.startswith(("distributed", "tornado"))
        or isinstance(error, concurrent.futures.CancelledError)
        or "KilledWorker" in type(error).__name__
        or _raised_in(error, ("distributed", "tornado"))
    )


def _raised_in(error: BaseException, packages: tuple[str, ...]) -> bool:
    """Whether the innermost frame of ``error``'s traceback (or of its cause's) is in one of ``packages``."""
    while error is not None:
        frames = traceback.extract_tb(error.__traceback__)
        if frames and any(f"/{package}/" in frames[-1].filename for package in packages):
            return True
        error = error.__cause__
    return False
