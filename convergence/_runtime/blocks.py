"""Blocks of paths: the unit of seeding, the unit of computation, and the tasks that group them.

Paths are grouped in seed blocks of ``SEED_BLOCK`` consecutive paths; seed block b of stream ``key`` owns the
streams ``(*key, b, 0)`` and ``(*key, b, 1)`` of ``verify._common.random_stream`` (``block_streams``;
``convergence._paths.brownian`` states the whole reproducibility
contract). A compute block is what one call of an experiment's computation sees at once (a layer map is evaluated on
exactly its paths): a whole number of seed blocks whose size is part of the experiment's design (its
``block_paths``), so a block holds the same paths, and every array the same shape, however the work is scheduled. A
task, what one worker call of ``convergence._runtime.execution`` runs, is a run of consecutive compute blocks;
grouping blocks into tasks is the execution's choice and changes no number.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from verify._common import check_int, random_stream

SEED_BLOCK = 64

# The first entry of every stream key: one per owner, so that no two owners ever draw the same numbers (a test checks
# that they are distinct and that no module sets its own). 8, 10 and 11 are unused (earlier studies may have had
# them); changing an owner's key changes every number of its reports.
STREAM_KEYS = {
    # streams derived from another stream, keyed by it (the bootstrap's (0, *key); chaos's test-function directions'
    # (0, *key, 1)): distinct from each other by their length
    "derived": 0,
    "strong-fedorov": 1,
    "weak-fedorov": 2,
    "phase-transition": 3,
    "strong-agazzi": 4,
    "sync-agazzi": 5,
    "chaos": 6,
    "commute": 7,
    "user checks": 9,
    "ldm-stopping": 12,
    "power": 13,
    "calibration": 14,
    "quick-profiles": 15,
    "mutant-seeds": 16,
    "grid-agazzi": 17,
    "joint-limits": 18,
}


def block_streams(seed: int, block: int, key: Sequence[int] = ()) -> tuple[np.random.Generator, np.random.Generator]:
    """The two streams seed block ``block`` of stream ``key`` owns: its initial states' (PCG64, stream
    ``(*key, block, 0)``) and its noise's (SFC64, ``(*key, block, 1)``: the noise is most of a study's random
    numbers, and SFC64 draws normals 25% faster), so changing the depth never changes the initial tokens."""
    check_int("block", block, minimum=0)
    return random_stream(seed, (*key, block, 0)), random_stream(seed, (*key, block, 1), "sfc64")


def whole_seed_blocks(paths: int) -> int:
    """``paths`` rounded up to a whole number of seed blocks (at least one)."""
    return SEED_BLOCK * max(1, -(-paths // SEED_BLOCK))


def compute_blocks(paths: int, block_paths: int, start: int = 0) -> Iterator[tuple[int, int]]:
    """(start, stop) of compute blocks covering paths ``start`` .. ``paths`` - 1, each ``block_paths`` rounded up to
    whole seed blocks (the last one may be shorter). ``start`` must be a block boundary: a run extended from
    ``start`` computes exactly the blocks a run of ``paths`` from 0 computes after it."""
    check_int("paths", paths, minimum=1)
    size = whole_seed_blocks(check_int("block_paths", block_paths, minimum=1))
    check_int("start", start, minimum=0, maximum=paths - 1)
    if start % size:
        raise ValueError(f"start must be a multiple of the compute block ({size} paths), got {start}")
    for first in range(start, paths, size):
        yield first, min(paths, first + size)


def tasks(blocks: Sequence[tuple[int, int]], task_paths: int | None) -> list[list[tuple[int, int]]]:
    """Consecutive compute blocks grouped into tasks of at least ``task_paths`` paths, the last task possibly shorter
    (one block per task when ``task_paths`` is None or at most a block's size)."""
    if task_paths is None:
        return [[block] for block in blocks]
    check_int("task_paths", task_paths, minimum=1)
    size = blocks[0][1] - blocks[0][0]
    per_task = max(1, -(-task_paths // size))
    return [list(blocks[i : i + per_task]) for i in range(0, len(blocks), per_task)]
