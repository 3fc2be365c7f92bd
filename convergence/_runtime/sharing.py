"""Results that studies of one run compute alike, computed once.

Some studies judge their near misses on another study's recordings: power re-runs the chaos study's mean-field
section, on the chaos study's streams. When both run in one process (a report runs its studies side by side, in
threads), ``shared_result(label, compute)`` computes a labelled result once: a caller that asks for a label being
computed waits for it, and every caller receives the same result, whose arrays are made read-only. The label must
determine the result (``paths.run_seeded``'s label: experiment, seed, stream key, configuration identity, paths), so
sharing changes no number. Finished results are kept, most recent first, up to ``SHARED_BYTES`` of arrays; a result
larger than that is returned and not kept. A failed computation is not kept: the next caller computes again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

SHARED_BYTES = 2**30

_LOCK = threading.Lock()
_FINISHED: OrderedDict[str, tuple[Any, int]] = OrderedDict()  # label -> (result, bytes), most recent last
_RUNNING: dict[str, threading.Event] = {}


def shared_result(label: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, or the result already computed (or being computed) in this process for ``label``."""
    while True:
        with _LOCK:
            if label in _FINISHED:
                _FINISHED.move_to_end(label)
                return _FINISHED[label][0]
            running = _RUNNING.get(label)
            if running is None:
                done = _RUNNING[label] = threading.Event()
                break
        running.wait()  # then read the result, or compute it if that computation failed
    try:
        result = compute()
        size = _freeze(result)
        with _LOCK:
            if size <= SHARED_BYTES:
                _FINISHED[label] = (result, size)
                while sum(kept for _, kept in _FINISHED.values()) > SHARED_BYTES:
                    _FINISHED.popitem(last=False)
        return result
    finally:
        with _LOCK:
            del _RUNNING[label]
        done.set()


def _freeze(result: Any) -> int:
    """Make every array of ``result`` (nested lists, tuples, dicts) read-only; return their bytes."""
    if isinstance(result, np.ndarray):
        result.flags.writeable = False
        return result.nbytes
    if isinstance(result, dict):
        return sum(_freeze(value) for value in result.values())
    if isinstance(result, (list, tuple)):
        return sum(_freeze(value) for value in result)
    return 0
