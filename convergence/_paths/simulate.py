"""Run a layer map (or any stepper) through L layers on seeded paths.

This is the plain forward simulation used by statistical (weak) studies: each path draws its own
noise from its own stream (``convergence._paths.brownian``), so the result for a path does not depend on
the block it was computed in. Any entry law is allowed (no Brownian coupling is needed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from verify._common import check_int, check_real

from .._models import LayerMap
from .._runtime import concatenate_blocks
from .brownian import (
    BrownianBlock,
    InitialState,
    PathStreams,
    uniform_sphere,
)
from .coupling import Level, Martingale, run_coupled, run_recorded
from .design import RecordGrid
from .runner import run_seeded


def simulate(
    layer_map: LayerMap,
    depth: int,
    horizon: float,
    paths: int,
    seed: int,
    key: Sequence[int] = (),
    initial: InitialState = uniform_sphere,
    block_paths: int = 1024,
) -> np.ndarray:
    """Final tokens after ``depth`` layers of step ``h = horizon / depth``: shape (paths, n, d)."""
    depth = check_int("depth", depth, minimum=1)
    horizon = check_real("horizon", horizon, minimum=0.0, strict_minimum=True)
    paths = check_int("paths", paths, minimum=1)
    block_paths = check_int("block_paths", block_paths, minimum=1)
    h = horizon / depth
    levels = [Level("layer", layer_map, 1)]

    def compute(streams: PathStreams, advance) -> np.ndarray:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        return run_coupled(levels, [], x0, BrownianBlock(layer_map.noise, streams, h), depth, advance).final[0]

    return concatenate_blocks(
        run_seeded(
            compute,
            name="simulate",
            configuration=(layer_map, initial, depth, horizon),
            seed=seed,
            key=key,
            paths=paths,
            block_paths=block_paths,
        )
    )


def record_at_two_steps(
    layer_map: LayerMap,
    grid: RecordGrid,
    seed: int,
    key: Sequence[int],
    initial: InitialState,
    observe: Callable[[np.ndarray], np.ndarray],
    progress: Callable[[int], None] | None = None,
    shared: bool = False,
    martingale: Martingale | None = None,
) -> np.ndarray:
    """``observe`` at the grid's record times for steps h and 2h on one Brownian path: (paths, 2, records + 1).

    The 2h level uses the block sums of the h increments, so the pair estimates the O(h) bias of level h. ``shared``:
    another study records the same (``run_seeded``). ``martingale``: its sums between records follow each record's
    values (``run_recorded``).
    """
    levels = [Level("h", layer_map, 1), Level("2h", layer_map, 2)]

    def compute(streams: PathStreams, advance) -> np.ndarray:
        x0 = initial(streams, layer_map.tokens, layer_map.dim)
        block = BrownianBlock(layer_map.noise, streams, grid.horizon / grid.steps)
        return run_recorded(levels, x0, block, grid.steps, grid.records, observe, advance, martingale)

    return concatenate_blocks(
        run_seeded(
            compute,
            name="record_at_two_steps",
            configuration=(grid, layer_map, initial, observe, martingale),
            seed=seed,
            key=key,
            paths=grid.paths,
            block_paths=grid.block_paths,
            progress=progress,
            shared=shared,
        )
    )
