"""The block cache that makes long runs resumable.

Inside ``execution.caching(directory, scope, resume)`` each finished task is written atomically to ``directory`` as
an ``.npz`` holding its blocks' arrays, the full key they were computed for (scope, block label, block ranges,
package fingerprint) and an HMAC-SHA256 of all of it under the cache's secret (``cache_secret``: ``directory/.key``,
32 random bytes readable by its owner only, created at first use; or a key file that the writers of a shared cache
share). With ``resume`` a task whose entry is intact, authentic and carries the same key is read instead of
recomputed; a corrupted, truncated, foreign or forged entry (one written without the secret, e.g. arrays altered and a
plain checksum recomputed) is recomputed and overwritten, with a warning, never used. The package fingerprint hashes
the package's source, so a cache never outlives a code change.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import stat
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from verify._common import atomic_write, package_versions

KEY_FILE = ".key"
SECRET_BYTES = 32
MIN_SECRET_BYTES = 16


SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds both packages


def fingerprinted_sources() -> list[Path]:
    """Every source file of ``convergence`` and ``verify`` (below ``SOURCE_ROOT``)."""
    return [path for package in ("convergence", "verify") for path in sorted((SOURCE_ROOT / package).rglob("*.py"))]


@cache
def package_fingerprint() -> str:
    """SHA-256 of the package version and of every source file of ``convergence`` and ``verify``
    (``fingerprinted_sources``), each with its path relative to the folder that holds them."""
    digest = hashlib.sha256(json.dumps(package_versions(), sort_keys=True).encode())
    for path in fingerprinted_sources():
        digest.update(str(path.relative_to(SOURCE_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_secret(directory: str | os.PathLike, key_file: str | os.PathLike | None = None) -> bytes:
    """The secret that authenticates the entries of the cache in ``directory``: the bytes of ``key_file`` when given
    (a cache shared by several users or machines: each writer passes the same file), else ``directory/.key``, created
    at first use with 32 random bytes and mode 0600, and made visible by a hard link so that two first users agree
    on one secret."""
    if key_file is not None:
        return _secret_of(Path(key_file), "cache key file")
    directory = Path(directory)
    path = directory / KEY_FILE
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f"{KEY_FILE}.", suffix=".tmp")
        try:
            os.write(fd, os.urandom(SECRET_BYTES))
            os.fsync(fd)
            os.close(fd)
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):  # another writer made the key first: use theirs
                os.link(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return _own_secret(path)


def _own_secret(path: Path) -> bytes:
    """The bytes of the key file ``path``, refused unless it is a regular file (not a link) of this user, readable by
    no one else, of at least 16 bytes: a writer of the folder could otherwise swap the key with the entries."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077 or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
        raise ValueError(
            f"the cache's key {str(path)!r} must be a regular file of this user readable by its owner only (mode "
            f"0600): remove it (its entries are then recomputed) or pass --cache-key"
        )
    return _secret_of(path, "the cache's key")


def _secret_of(path: Path, what: str) -> bytes:
    """The bytes of ``path``, at least ``MIN_SECRET_BYTES`` of them."""
    secret = path.read_bytes()
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"{what} {str(path)!r} must hold at least {MIN_SECRET_BYTES} bytes, got {len(secret)}")
    return secret


@dataclass
class BlockCache:
    """Finished blocks on disk (module docstring). ``scope`` names the run (study, profile, seed); ``secret``
    authenticates the entries (``cache_secret``)."""

    directory: Path
    scope: dict
    resume: bool = False
    secret: bytes = field(default=b"", repr=False)
    reused: int = 0
    computed: int = 0
    rejected: list[str] = field(default_factory=list)

    def key(self, label: str, blocks: Sequence[tuple[int, int]]) -> str:
        """The full key of a task: the cache scope, the block label, the task's block ranges, the package."""
        return json.dumps(
            {
                "scope": self.scope,
                "label": label,
                "blocks": [list(b) for b in blocks],
                "package": package_fingerprint(),
            },
            sort_keys=True,
        )

    def path(self, key: str) -> Path:
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.npz"

    def load(self, key: str) -> Any | None:
        """The stored result for ``key``, or None when absent, unreadable, corrupted or foreign."""
        path = self.path(key)
        if not self.resume or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                stored_key = str(data["__key__"])
                structure = json.loads(str(data["__structure__"]))
                leaves = [data[f"leaf_{i}"] for i in range(_count_leaves(structure))]
                mac = str(data["__hmac__"])
        except Exception as error:  # noqa: BLE001 (any unreadable entry is recomputed, never used)
            return self._reject(path, f"unreadable ({type(error).__name__})")
        if stored_key != key:
            return self._reject(path, "computed for another configuration")
        if not hmac.compare_digest(mac, _mac(self.secret, stored_key, structure, leaves)):
            return self._reject(
                path,
                "not authentic (its key, structure or arrays were altered, or it was written without this "
                "cache's secret)",
            )
        self.reused += 1
        return _unflatten(structure, iter(leaves))

    def _reject(self, path: Path, reason: str) -> None:
        """Record and announce, when it happens, an entry that is recomputed instead of used."""
        self.rejected.append(f"{path.name}: {reason}")
        warnings.warn(f"cache entry recomputed: {path}: {reason}", stacklevel=3)
        return None

    def store(self, key: str, result: Any) -> None:
        structure, leaves = _flatten(result)
        arrays = {f"leaf_{i}": leaf for i, leaf in enumerate(leaves)}
        buffer = io.BytesIO()
        np.savez(
            buffer,
            __key__=np.array(key),
            __structure__=np.array(json.dumps(structure)),
            __hmac__=np.array(_mac(self.secret, key, structure, leaves)),
            **arrays,
        )
        atomic_write(self.path(key), buffer.getvalue())
        self.computed += 1


def _mac(secret: bytes, key: str, structure: Any, leaves: Sequence[np.ndarray]) -> str:
    """HMAC-SHA256 under ``secret`` of the entry's key, structure and arrays: an entry altered in any of them, or
    written by someone without the secret, fails it."""
    digest = hmac.new(secret, key.encode(), hashlib.sha256)
    digest.update(json.dumps(structure).encode())
    for leaf in leaves:
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{leaf.dtype.str}{leaf.shape}".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


def _flatten(result: Any) -> tuple[Any, list[np.ndarray]]:
    """A JSON structure (dict keys, tuple arity) and the arrays of a result made of dicts, tuples, lists, arrays."""
    if isinstance(result, dict):
        leaves, structure = [], {}
        for name, value in result.items():
            structure[name], sub = _flatten(value)
            leaves += sub
        return {"dict": structure}, leaves
    if isinstance(result, (tuple, list)):
        leaves, items = [], []
        for value in result:
            item, sub = _flatten(value)
            items.append(item)
            leaves += sub
        return {"tuple" if isinstance(result, tuple) else "list": items}, leaves
    return "array", [np.asarray(result)]


def _unflatten(structure: Any, leaves: Iterator[np.ndarray]) -> Any:
    if structure == "array":
        return next(leaves)
    ((kind, body),) = structure.items()
    if kind == "dict":
        return {name: _unflatten(sub, leaves) for name, sub in body.items()}
    items = [_unflatten(sub, leaves) for sub in body]
    return tuple(items) if kind == "tuple" else items


def _count_leaves(structure: Any) -> int:
    if structure == "array":
        return 1
    ((_, body),) = structure.items()
    return sum(_count_leaves(sub) for sub in (body.values() if isinstance(body, dict) else body))
