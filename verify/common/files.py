"""Atomic file writes: a reader (or a resumed run) never sees a half-written report or cache entry."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, flushed to disk, and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; reports are for every reader
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_stem(title: str) -> str:
    """A file name made from ``title``: every character other than letters, digits, '.', '_', '-' becomes '-'
    (so ``"two-head (d-2)/2"`` is one file, ``two-head--d-2--2``, never a folder)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", title).strip(".")
    if not stem:
        raise ValueError(f"title must contain a letter or digit to name a report file, got {title!r}")
    return stem
