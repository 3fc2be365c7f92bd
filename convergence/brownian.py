"""Seeded, nested Brownian paths.

Every random number of a study is derived from one integer seed. Path ``p`` of stream ``key`` owns
``SeedSequence(seed, spawn_key=(*key, p))``: the spawn key is the absolute index of the path, so
the numbers a path sees do not depend on how paths are split into blocks, on the number of workers
or on the order of execution. Each path's sequence is split into two child streams, one for the
initial state and one for the noise, so changing the depth never changes the initial tokens.

Nesting: increments are drawn once at the finest step ``h = T / L_fine``; a coarser level with
``L = L_fine / f`` steps uses the block sums of ``f`` consecutive fine increments (integer step
counts, so the grids nest exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .noise import CommonNoise
from .validation import check_int


def path_seed(seed: int, path: int, key: Sequence[int] = ()) -> np.random.SeedSequence:
    """The seed sequence owned by path ``path`` of stream ``key``."""
    check_int("seed", seed, minimum=0)
    check_int("path", path, minimum=0)
    return np.random.SeedSequence(seed, spawn_key=(*tuple(int(k) for k in key), path))


def path_generators(
    seed: int, start: int, stop: int, key: Sequence[int] = ()
) -> tuple[list[np.random.Generator], list[np.random.Generator]]:
    """(initial-state generators, noise generators) for paths ``start .. stop-1``."""
    check_int("start", start, minimum=0)
    check_int("stop", stop, minimum=start + 1)
    initial, noise = [], []
    for path in range(start, stop):
        init_seq, noise_seq = path_seed(seed, path, key).spawn(2)
        initial.append(np.random.Generator(np.random.PCG64(init_seq)))
        noise.append(np.random.Generator(np.random.PCG64(noise_seq)))
    return initial, noise


def uniform_sphere(rngs: Sequence[np.random.Generator], tokens: int, dim: int) -> np.ndarray:
    """I.i.d. uniform tokens on S^{d-1}, one generator per path: shape (paths, tokens, d)."""
    x = np.stack([rng.standard_normal((tokens, dim)) for rng in rngs])
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def block_sums(increments: np.ndarray, factor: int, axis: int = 1) -> np.ndarray:
    """Coarse increments: sums of ``factor`` consecutive fine increments along ``axis``.

    The sum runs in time order, so it equals the sequential sum of the fine increments exactly.
    """
    factor = check_int("factor", factor, minimum=1)
    steps = increments.shape[axis]
    if steps % factor:
        raise ValueError(f"factor must divide the number of steps {steps}, got {factor}")
    moved = np.moveaxis(increments, axis, 0)
    coarse = moved.reshape(steps // factor, factor, *moved.shape[1:]).sum(axis=1)
    return np.moveaxis(coarse, 0, axis)


class BrownianBlock:
    """The fine-grid increments of a block of paths, delivered chunk by chunk in time order.

    ``next(steps)`` returns the next ``steps`` fine increments of every path, shaped
    (paths, steps, *noise.shape); successive chunks continue each path's own stream, so the
    chunk length does not change any number.
    """

    def __init__(self, noise: CommonNoise, generators: Sequence[np.random.Generator], h: float):
        self.noise = noise
        self.generators = list(generators)
        self.h = float(h)

    @property
    def paths(self) -> int:
        return len(self.generators)

    def next(self, steps: int) -> np.ndarray:
        return np.stack([self.noise.increments(rng, steps, self.h) for rng in self.generators])
