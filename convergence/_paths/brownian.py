"""Seeded, nested Brownian paths.

Every random number of a study is derived from one integer seed. Paths are grouped in seed blocks
of ``SEED_BLOCK`` consecutive paths; seed block b of stream ``key`` owns
two streams keyed by ``(*key, b)`` (b the absolute index of the block of paths, ``runtime.block_streams``): an
initial-state stream and a noise stream, so changing the depth never changes the initial tokens.
Noise is drawn time-major, ``(steps, SEED_BLOCK, *shape)``, so consecutive chunks of steps continue
each stream exactly: the numbers a path sees depend neither on the chunk length, nor on how paths
are split into compute blocks (``runtime.blocks.compute_blocks`` rounds them to whole seed blocks), nor on the
number of workers or the order of execution.

Nesting: increments are drawn once at the finest step ``h = T / L_fine``; a coarser level with
``L = L_fine / f`` steps uses the block sums of ``f`` consecutive fine increments (integer step
counts, so the grids nest exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from verify._common import check_int

from .._models import CommonNoise
from .._runtime import SEED_BLOCK, block_streams


class PathStreams:
    """The random streams of paths ``start .. stop-1`` (``start`` a multiple of ``SEED_BLOCK``)."""

    def __init__(self, seed: int, start: int, stop: int, key: Sequence[int] = ()):
        check_int("start", start, minimum=0)
        check_int("stop", stop, minimum=start + 1)
        if start % SEED_BLOCK:
            raise ValueError(f"start must be a multiple of SEED_BLOCK = {SEED_BLOCK}, got {start}")
        blocks = range(start // SEED_BLOCK, -(-stop // SEED_BLOCK))
        pairs = [block_streams(seed, b, key) for b in blocks]
        self._initial = [initial for initial, _ in pairs]
        self._noise = [noise for _, noise in pairs]
        self._noise_state = [{} for _ in pairs]  # per seed block: what a noise keeps across chunks of steps
        self.paths = stop - start
        self._where = (seed, start, stop, tuple(key))

    @property
    def start(self) -> int:
        """The absolute index of this block's first path."""
        return self._where[1]

    def with_key(self, key: Sequence[int]) -> PathStreams:
        """The streams of the same paths under another stream ``key``, from their start."""
        return PathStreams(*self._where[:3], key)

    def fresh(self) -> PathStreams:
        """These streams again from their start (the same numbers once more)."""
        return PathStreams(*self._where)

    def initial(self, draw: Callable[[np.random.Generator, int], np.ndarray]) -> np.ndarray:
        """Concatenate ``draw(rng, SEED_BLOCK)`` over the seed blocks and keep this block's paths."""
        return np.concatenate([draw(rng, SEED_BLOCK) for rng in self._initial])[: self.paths]

    def increments(self, noise: CommonNoise, steps: int, h: float) -> np.ndarray:
        """The next ``steps`` increments of every path, shaped (paths, steps, *noise.shape): ``scale sqrt(h)`` times
        ``standard_draws``."""
        return self.standard_draws(noise, steps, noise.scale * np.sqrt(h))

    def standard_draws(self, noise: CommonNoise, steps: int, factor: float = 1.0) -> np.ndarray:
        """The next ``steps`` draws of the noise's standard entries (mean 0, variance 1) of every path, times
        ``factor``, shaped (paths, steps, *noise.shape)."""
        shape = (steps, SEED_BLOCK, *noise.shape)
        # one contiguous buffer per seed block, filled in place (no concatenation copy), then scaled in place
        out = np.empty((len(self._noise), *shape))
        for rng, state, part in zip(self._noise, self._noise_state, out):
            noise.standard(rng, shape, out=part, state=state)
        if factor != 1.0:
            out *= factor
        merged = np.moveaxis(out, 0, 1).reshape(steps, len(self._noise) * SEED_BLOCK, *noise.shape)
        return np.moveaxis(merged[:, : self.paths], 0, 1)


InitialState = Callable[[PathStreams, int, int], np.ndarray]


def uniform_sphere(streams: PathStreams, tokens: int, dim: int) -> np.ndarray:
    """I.i.d. uniform tokens on S^{d-1}: shape (paths, tokens, d)."""
    x = streams.initial(lambda rng, m: rng.standard_normal((m, tokens, dim)))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def block_sums(increments: np.ndarray, factor: int, axis: int = 1) -> np.ndarray:
    """Coarse increments: sums of ``factor`` consecutive fine increments along ``axis``.

    The sum runs in time order, so it equals the sequential sum of the fine increments exactly.
    """
    factor = check_int("factor", factor, minimum=1)
    if factor == 1:
        return increments  # no copy
    steps = increments.shape[axis]
    if steps % factor:
        raise ValueError(f"factor must divide the number of steps {steps}, got {factor}")
    moved = np.moveaxis(increments, axis, 0)
    coarse = moved.reshape(steps // factor, factor, *moved.shape[1:]).sum(axis=1)
    return np.moveaxis(coarse, 0, axis)


def sequential_sum(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The sum in time order of the increments ``parts`` (each (paths, steps, *shape), or (paths, *shape) for one):
    ((a_1 + a_2) + a_3) + ..., as ``block_sums`` adds a block."""
    moved = [np.moveaxis(p, 1, 0) if p.ndim == parts[-1].ndim else p[None] for p in parts]
    # one C-contiguous (steps, paths, *shape) array: numpy reduces its outermost axis slab by slab, in order
    return np.concatenate(moved).sum(axis=0)


class CoarseIncrements:
    """The coarse increments of each factor, from the fine increments delivered chunk by chunk: a coarse increment is
    the sum in time order of its ``factor`` fine increments (``block_sums``); one that straddles two chunks is carried
    as a partial sum and continued in time order, so it equals the sum of one chunk holding it, bit for bit."""

    def __init__(self, factors: Sequence[int]):
        self.factors = sorted(set(factors))
        self.done = 0  # fine steps delivered so far
        self.partial: dict[int, np.ndarray] = {}  # factor -> sum of the fine increments of its unfinished step

    def add(self, fine: np.ndarray) -> dict[int, np.ndarray]:
        """The coarse increments that the next chunk ``fine`` (paths, steps, *shape) completes, per factor, on axis
        1 in time order (factor 1: ``fine`` itself)."""
        steps, out = fine.shape[1], {}
        for f in self.factors:
            if f == 1:
                out[f] = fine
                continue
            head = min(steps, -self.done % f)  # the fine increments that continue the carried step
            parts = []
            if head:
                carried = sequential_sum([self.partial.pop(f), fine[:, :head]])
                if (self.done + head) % f:
                    self.partial[f] = carried
                else:
                    parts.append(carried[:, None])
            whole = (steps - head) // f * f
            if whole:
                parts.append(block_sums(fine[:, head : head + whole], f))
            if head + whole < steps:
                self.partial[f] = sequential_sum([fine[:, head + whole :]])
            out[f] = np.concatenate(parts, axis=1) if parts else fine[:, :0]
        self.done += steps
        return out


class BrownianBlock:
    """The fine-grid increments of a block of paths, delivered chunk by chunk in time order."""

    def __init__(self, noise: CommonNoise, streams: PathStreams, h: float):
        self.noise = noise
        self.streams = streams
        self.h = float(h)

    @property
    def paths(self) -> int:
        return self.streams.paths

    def next(self, steps: int) -> np.ndarray:
        return self.streams.increments(self.noise, steps, self.h)


class SignedBlock:
    """A Brownian block whose increments are multiplied by ``sign``: with -1 on the same streams
    (``PathStreams.fresh``), the antithetic path of a symmetric noise law (every entry law of the suite's noises is
    symmetric)."""

    def __init__(self, block: BrownianBlock, sign: float):
        self.block, self.sign = block, sign
        self.noise, self.h = block.noise, block.h

    @property
    def paths(self) -> int:
        return self.block.paths

    def next(self, steps: int) -> np.ndarray:
        return self.sign * self.block.next(steps)
