"""Seeded Monte Carlo runs of the latent diffusion sampler at several step sizes on one Brownian path
(``backward_samples``), and the paper's synthetic settings (``PAPER_SPECTRA``, ``PAPER_HORIZON``).

Level f uses step ``f h`` with the block sums of f fine increments (nested grids, docs/models.md section 6), every level
starts from the same initial draw, and paths are seeded by their absolute index (``convergence._paths.brownian``), so no
number depends on the scheduler (and another block size changes numbers by rounding only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verify._common import check_int

from .._models import CommonNoise, LatentSampler
from .._paths import BrownianBlock, PathStreams, block_sums, run_seeded
from .._runtime import concatenate_blocks

CHUNK_STEPS = 64


# the paper's synthetic settings (arXiv:2510.08409): a geometric spectrum (D = 9) and a low-rank one (D = 6), T = 2
PAPER_HORIZON = 2.0


PAPER_SPECTRA = {
    "geometric": tuple([0.6**k for k in range(7)] + [1e-10, 1e-10]),
    "low-rank": (10.0, 0.2, 0.2, 0.2, 0.0, 0.0),
}


@dataclass(frozen=True)
class LatentDesign:
    """``steps`` fine steps; ``factors`` the coarser levels (each dividing ``steps`` and ``CHUNK_STEPS``);
    ``records`` the fine-step indices where the finest level is recorded (0..steps)."""

    steps: int
    factors: tuple[int, ...]
    records: tuple[int, ...]
    paths: int
    block_paths: int = 4096

    def __post_init__(self) -> None:
        check_int("steps", self.steps, minimum=CHUNK_STEPS)
        if self.steps % CHUNK_STEPS:
            raise ValueError(f"steps must be a multiple of {CHUNK_STEPS}, got {self.steps}")
        for f in self.factors:
            if check_int("factor", f, minimum=1) > CHUNK_STEPS or CHUNK_STEPS % f:
                raise ValueError(f"factors must divide {CHUNK_STEPS}, got {f}")
        for r in self.records:
            if not 0 <= r <= self.steps:
                raise ValueError(f"records must lie in [0, {self.steps}], got {r}")
        check_int("paths", self.paths, minimum=2)
        check_int("block_paths", self.block_paths, minimum=1)


def backward_samples(
    sampler: LatentSampler, design: LatentDesign, seed: int, key: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(finals, recorded)``: the end state of every level, (levels, paths, D) with level 0 the finest and
    then ``design.factors``; and the finest level at ``design.records``, (records, paths, D)."""
    h = sampler.horizon / design.steps
    noise = CommonNoise(shape=(sampler.dim,), scale=1.0)
    factors = (1, *design.factors)
    records = sorted(set(design.records))

    def compute(streams: PathStreams, advance) -> np.ndarray:
        y0 = streams.initial(lambda rng, m: rng.standard_normal((m, sampler.dim))) * np.sqrt(sampler.start_variance())
        states = [y0.copy() for _ in factors]
        recorded = [y0.copy()] if 0 in records else []
        block = BrownianBlock(noise, streams, h)
        for chunk_start in range(0, design.steps, CHUNK_STEPS):
            fine = block.next(CHUNK_STEPS) if sampler.method == "sde" else None
            for level, f in enumerate(factors):
                coarse = None if fine is None else block_sums(fine, f)
                for i in range(CHUNK_STEPS // f):
                    k = chunk_start // f + i
                    db = None if coarse is None else coarse[:, i]
                    states[level] = sampler.step(states[level], k, f * h, db)
                    if level == 0 and k + 1 in records:
                        recorded.append(states[0].copy())
            if advance is not None:
                advance(CHUNK_STEPS)
        return np.stack(states, axis=1), np.stack(recorded, axis=1)  # paths first, as blocks concatenate

    finals, recorded = concatenate_blocks(
        run_seeded(
            compute,
            name="latent",
            configuration=(sampler, design),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
        )
    )
    return np.swapaxes(finals, 0, 1), np.swapaxes(recorded, 0, 1)
