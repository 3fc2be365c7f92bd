"""The reference kernel that costs are measured against, so that machines agree: ``ref`` = the CPU seconds one core
takes to draw 10^9 standard normals with numpy's default generator (about 10 s on a machine that draws 10^8 per
second). A cost in ref units is its CPU seconds divided by ref measured on the same machine, in the same run."""

from __future__ import annotations

import threading
import time

import numpy as np

from verify._common import random_stream

REFERENCE_NORMALS = 10**9  # the definition
SAMPLE_NORMALS = 2 * 10**7  # drawn per measurement, in chunks of CHUNK (scaled to REFERENCE_NORMALS)
CHUNK = 10**6
REPEATS = 5  # the best of these: a measurement beside other work is only ever slower

_lock = threading.Lock()
_measured: list[float] = []


def measure_reference(normals: int = SAMPLE_NORMALS, repeats: int = REPEATS) -> float:
    """ref in CPU seconds: the best of ``repeats`` timings (this thread's CPU time: one core) of ``normals`` draws (a
    multiple of ``CHUNK``), scaled to 10^9."""
    chunks = max(1, normals // CHUNK)
    rng = random_stream(0)
    out = np.empty(CHUNK)
    best = np.inf
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(chunks):
            rng.standard_normal(out=out)
        best = min(best, time.thread_time() - start)
    return best * REFERENCE_NORMALS / (chunks * CHUNK)


def reference_seconds() -> float:
    """ref for this process, measured once (about a second) and kept: every study of a run shares it."""
    with _lock:
        if not _measured:
            _measured.append(measure_reference())
        return _measured[0]


def in_reference_units(cpu_seconds: float, ref: float | None) -> float | None:
    """``cpu_seconds`` / ``ref``, or None without a ref."""
    return None if not ref else cpu_seconds / ref


__all__ = ["REFERENCE_NORMALS", "in_reference_units", "measure_reference", "reference_seconds"]
