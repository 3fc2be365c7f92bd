"""Atomic file writes: a reader (or a resumed run) never sees a half-written report or cache entry, nor a report set
whose files come from two runs.

A set of files in one folder is committed in three steps: every file is written under a temporary name (flushed to
disk); a journal naming the renames is made visible by one atomic rename (the commit point); the renames follow,
then the journal goes. SIGINT and SIGTERM are held back for the whole process from the commit point to the last
rename, so only SIGKILL or a power loss can stop the renames half-way; then the journal is still there and
``recover_folder``, run at the next start, completes them. Before the commit point nothing is visible: the previous
set stays whole and ``recover_folder`` removes the temporaries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

JOURNAL = ".commit.json"  # a set's journal: .commit.json.<random>.journal (one per set, so writers never share one)
_TEMPORARY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # mkstemp's names: .<final name>.<random>.tmp
StepHook = Callable[[str], None]


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, flushed to disk, and one rename (no
    journal: safe beside other writers of the same folder, e.g. a shared cache)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temporary(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_set(files: dict[Path, bytes], fault: StepHook | None = None) -> None:
    """Write ``files`` (all in one folder) as one set: the previous set stays whole until the commit point, and the
    new one is whole after it (module docstring). ``fault(step)`` is called before each step (``"write <name>"``,
    ``"commit"``, ``"rename <name>"``, ``"done"``): a test's hook to interrupt the sequence anywhere."""
    folders = {Path(path).parent for path in files}
    if len(folders) > 1:
        raise ValueError(f"files must lie in one folder to be committed as one set, got {sorted(map(str, folders))}")
    if not files:
        return
    (folder,) = folders
    step = fault or (lambda name: None)
    temporaries: list[tuple[Path, Path]] = []
    committed = False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, data in files.items():
            step(f"write {path.name}")
            temporaries.append((_write_temporary(path, data), path))
        journal = {"renames": [[tmp.name, path.name] for tmp, path in temporaries]}
        journal_tmp = _write_temporary(folder / JOURNAL, json.dumps(journal).encode())
        journal_path = folder / f"{journal_tmp.name[1:-4]}.journal"  # .commit.json.<random>.journal
        temporaries.append((journal_tmp, journal_path))
        with deferred_signals():
            step("commit")
            os.replace(journal_tmp, journal_path)
            committed = True
            _sync_folder(folder)
            for tmp, path in temporaries[:-1]:
                step(f"rename {path.name}")
                os.replace(tmp, path)
            _sync_folder(folder)
            step("done")
            journal_path.unlink()
    except BaseException:
        if not committed:
            for tmp, _ in temporaries:
                tmp.unlink(missing_ok=True)
        else:  # past the commit point the new set is what must become whole
            _complete(journal_path)
        raise


def recover_folder(folder: Path, stale_after: float | None = None) -> list[str]:
    """Complete a set whose renames were stopped after its commit point (the journal is there), then remove every
    temporary this module left behind; return what was done, one sentence per action. Call it only while no other
    process writes into ``folder`` (under ``exclusive_folder``), or with ``stale_after`` (seconds): then only
    temporaries older than that are removed and no journal is touched (a folder other writers share)."""
    folder = Path(folder)
    journals = [] if stale_after is not None else sorted(folder.glob(f"{JOURNAL}.*.journal"))
    done = [sentence for journal in journals for sentence in _complete(journal)]
    now = time.time()
    for path in folder.glob(".*.tmp") if folder.is_dir() else []:
        if not _TEMPORARY.match(path.name):
            continue
        with contextlib.suppress(FileNotFoundError):
            if stale_after is not None and now - path.stat().st_mtime < stale_after:
                continue
        path.unlink(missing_ok=True)
        done.append(f"removed the temporary {path} of an interrupted write")
    return done


def _complete(journal: Path) -> list[str]:
    """Do the renames of ``journal`` that are not yet done, then remove it. Only plain names of this module's
    temporaries are renamed (a journal cannot move files out of its folder); an unreadable journal is left in place
    with its temporaries, and said."""
    folder = journal.parent
    if not journal.exists():  # its renames are done
        return []
    try:
        renames = json.loads(journal.read_text())["renames"]
        if not all(
            isinstance(t, str)
            and isinstance(f, str)
            and _TEMPORARY.match(t)
            and "/" not in t + f
            and f not in ("", ".", "..")
            for t, f in renames
        ):
            raise ValueError("names")
    except (OSError, ValueError, KeyError, TypeError):
        raise OSError(
            f"{journal} is not a journal this tool wrote: move it and its folder's .*.tmp files away"
        ) from None
    done = []
    for tmp_name, final_name in renames:
        if (folder / tmp_name).exists():
            os.replace(folder / tmp_name, folder / final_name)
            done.append(f"completed {folder / final_name} from an interrupted write")
    _sync_folder(folder)
    journal.unlink(missing_ok=True)
    return done


def _write_temporary(path: Path, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entries (the renames) to disk, where the platform allows it."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def deferred_signals(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Hold ``signals`` back for the whole process inside the ``with``, then act on the first one received.

    Python runs signal handlers in the main thread whichever thread the signal reached (BLAS and dask threads
    included), so replacing the handlers defers them process-wide; masking the main thread alone does not. Outside
    the main thread (where handlers cannot be set) the block runs undeferred."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {number: signal.getsignal(number) for number in signals}
    for number in signals:
        signal.signal(number, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if received:
            _deliver(received[0], previous[received[0]])


def _deliver(number: int, handler) -> None:
    """Act on a held-back signal as its handler would have."""
    if callable(handler):
        handler(number, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), number)


@contextlib.contextmanager
def exclusive_folder(folder: Path, owner: str) -> Iterator[None]:
    """Hold an advisory lock on ``folder`` (``fcntl.flock`` on ``folder/.lock``, released by the system when the
    process ends, even by SIGKILL). Raise ``FolderLocked`` naming the holder's ``owner`` text (e.g. its pid and
    start time) when another process holds it."""
    import fcntl

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "a process that has not yet written its name"
            raise FolderLocked(folder, holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, owner.encode())
        yield
    finally:
        os.close(fd)  # releases the lock


class FolderLocked(RuntimeError):
    """Another process holds the folder's lock."""

    def __init__(self, folder: Path, holder: str):
        super().__init__(f"{str(folder)!r} is in use by another run ({holder})")
        self.folder, self.holder = folder, holder


def file_stem(title: str) -> str:
    """A file name made from ``title``: every character other than letters, digits, '.', '_', '-' becomes '-'
    (so ``"two-head (d-2)/2"`` is one file, ``two-head--d-2--2``, never a folder)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", title).strip(".")
    if not stem:
        raise ValueError(f"title must contain a letter or digit to name a report file, got {title!r}")
    return stem
