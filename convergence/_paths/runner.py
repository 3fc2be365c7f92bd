"""The one runner of seeded blocks: every experiment's Monte Carlo goes through ``run_seeded``.

``run_seeded(compute, ...)`` splits ``paths`` into compute blocks (``runtime.blocks``), gives each block the random
streams of its own paths (``PathStreams(seed, start, stop, key)``: the numbers depend only on the seed, the stream
key and the absolute path index), runs ``compute(streams, advance)`` wherever the current execution runs blocks (in
process or on dask workers) and returns the block results in block order. The cache label is the experiment's
``name``, its stream ``key`` and the explicit identity of its ``configuration`` (``runtime.identity``): everything
``compute`` depends on besides the streams must be in ``configuration``, so no two experiments share a cache entry.
With ``shared``, a run that another study of the same process makes alike is computed once (``runtime.sharing``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._runtime import identity, map_blocks, shared_result
from .brownian import PathStreams

Compute = Callable[[PathStreams, Callable[[int], None] | None], Any]


def run_seeded(
    compute: Compute,
    *,
    name: str,
    configuration: object,
    seed: int,
    key: Sequence[int],
    paths: int,
    block_paths: int,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    shared: bool = False,
) -> list[Any]:
    """``compute(streams, advance)`` for the streams of every compute block of ``paths`` (from path ``start`` on, a
    block boundary: extending a run by more paths), in block order. ``shared``: the run is one that another study
    makes alike (its result is kept in this process, read-only, and a second caller waits for it)."""

    def run_block(start: int, stop: int, advance) -> Any:
        return compute(PathStreams(seed, start, stop, key), advance)

    label = f"{name}:{seed}:{tuple(key)}:{identity(configuration)}"  # the seed too: a study may run several
    if not shared:
        return map_blocks(run_block, paths, block_paths, label, progress, start)
    run = f"{label}:{paths}:{block_paths}:{start}"
    return list(shared_result(run, lambda: map_blocks(run_block, paths, block_paths, label, progress, start)))
