"""Blocks of paths: the unit of seeding and the unit of work.

Paths are grouped in seed blocks of ``SEED_BLOCK`` consecutive paths; seed block b of stream ``key`` owns
``SeedSequence(seed, spawn_key=(*key, b))`` (``convergence.paths.brownian`` states the whole reproducibility
contract). A compute block, what one task of ``convergence.runtime.execution`` runs, is a whole number of seed
blocks, so no random number depends on how paths are split into compute blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from verify.common import check_int

SEED_BLOCK = 64


def seed_block_sequence(seed: int, block: int, key: Sequence[int] = ()) -> np.random.SeedSequence:
    """The seed sequence owned by seed block ``block`` of stream ``key``."""
    check_int("seed", seed, minimum=0)
    check_int("block", block, minimum=0)
    return np.random.SeedSequence(seed, spawn_key=(*tuple(int(k) for k in key), block))


def compute_blocks(paths: int, block_paths: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of compute blocks covering ``paths``, each a whole number of seed blocks."""
    check_int("paths", paths, minimum=1)
    size = SEED_BLOCK * max(1, -(-check_int("block_paths", block_paths, minimum=1) // SEED_BLOCK))
    for start in range(0, paths, size):
        yield start, min(paths, start + size)
