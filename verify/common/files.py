"""Atomic file writes: a reader (or a resumed run) never sees a half-written report or cache entry, nor a report set
whose files come from two runs."""

from __future__ import annotations

import os
import re
import signal
import tempfile
import threading
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, flushed to disk, and a rename."""
    atomic_write_set({path: data})


def atomic_write_set(files: dict[Path, bytes]) -> None:
    """Write several files as a unit: every file goes to a temporary name first (flushed to disk); only then are all
    renamed into place, with Ctrl-C held back during the renames (in the main thread), so an interrupted write
    leaves the previous set whole, never files of two runs side by side."""
    temporaries: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temporaries.append((tmp, path))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
        main = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
        if main:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for tmp, path in temporaries:
                os.replace(tmp, path)
        finally:
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    except BaseException:
        for tmp, _ in temporaries:
            Path(tmp).unlink(missing_ok=True)
        raise


def file_stem(title: str) -> str:
    """A file name made from ``title``: every character other than letters, digits, '.', '_', '-' becomes '-'
    (so ``"two-head (d-2)/2"`` is one file, ``two-head--d-2--2``, never a folder)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", title).strip(".")
    if not stem:
        raise ValueError(f"title must contain a letter or digit to name a report file, got {title!r}")
    return stem
