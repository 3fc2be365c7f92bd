"""Several discretisations driven by one Brownian path (the pathwise coupling).

Each level steps every ``factor`` fine steps with the block sum of the fine increments, so all
levels see the same Brownian path on nested grids. Comparisons between two levels are made at
their common grid times (the coarser level's grid): the squared distance at the final time and its
maximum over the common grid times, per path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._models import CommonNoise
from .brownian import BrownianBlock, CoarseIncrements

CHUNK_BYTES = 16 * 2**20  # below glibc's 32 MiB mmap threshold: a chunk's buffers are reused, not page-faulted


class Stepper(Protocol):
    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray: ...


# (state (paths, n, d), a step's increment, the step's start time) -> (paths, m)
Martingale = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


class FusedMartingale(Protocol):
    """A martingale that shares its work with one stepper's layer (both need the same action of the noise):
    ``step`` returns that stepper's next state and the martingale's increment."""

    stepper: Stepper

    def __call__(self, x: np.ndarray, dw: np.ndarray, t: float) -> np.ndarray: ...

    def step(self, x: np.ndarray, dw: np.ndarray, h: float, t: float) -> tuple[np.ndarray, np.ndarray]: ...


def step_with_martingale(
    stepper: Stepper, martingale: Martingale, x: np.ndarray, dw: np.ndarray, h: float, t: float
) -> tuple[np.ndarray, np.ndarray]:
    """``stepper``'s next state and ``martingale``'s increment at (x, dw, t), in one pass when the martingale is fused
    with this stepper (``FusedMartingale``)."""
    if getattr(martingale, "stepper", None) is stepper:
        return martingale.step(x, dw, h, t)
    return stepper.layer(x, dw, h), martingale(x, dw, t)


def common_noise(levels: Sequence[Level]) -> CommonNoise:
    """The one noise law every level's stepper takes (so one Brownian path can drive them all).

    Raises when the shapes differ, e.g. a noise drawn per token, whose shape depends on the number of tokens.
    """
    shapes = {level.stepper.noise.shape for level in levels}
    if len(shapes) != 1:
        raise ValueError(
            f"the noise must not depend on the level (e.g. on the number of tokens), got shapes {sorted(shapes)}"
        )
    return levels[0].stepper.noise


@dataclass(frozen=True)
class Level:
    """A discretisation that takes one step per ``factor`` fine steps."""

    name: str
    stepper: Stepper
    factor: int


@dataclass(frozen=True)
class Subsystems:
    """``groups`` independent copies of a ``size``-token stepper driven by the same noise.

    The state (paths, groups * size, d) holds the copies side by side; each copy sees only its own tokens
    and every copy takes the path's increment. Used to compare an n-token system with the average of its
    two n/2-token halves (the antithetic estimator of particle-count differences: the initial sampling
    error enters both at first order and cancels).
    """

    stepper: Stepper
    groups: int

    @property
    def noise(self) -> CommonNoise:
        return self.stepper.noise

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        paths, total, dim = x.shape
        if total % self.groups:
            raise ValueError(f"{total} tokens do not split into {self.groups} groups")
        copies = x.reshape(paths * self.groups, total // self.groups, dim)
        return self.stepper.layer(copies, np.repeat(dw, self.groups, axis=0), h).reshape(paths, total, dim)


@dataclass(frozen=True)
class CoupledRun:
    """Per-path results: ``final_sq`` and ``sup_sq`` are (paths, comparisons); ``final`` one state per level;
    ``martingale`` per level, the sum over its steps of ``martingale(state, dw, t)`` (None without one)."""

    final: list[np.ndarray]
    final_sq: np.ndarray
    sup_sq: np.ndarray
    martingale: list[np.ndarray] | None = None


def token_mean_sq_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(1/n) sum_i |x_i - y_i|^2`` per path, shape (paths,)."""
    diff = x - y
    return np.sum(diff * diff, axis=(-1, -2)) / x.shape[-2]


def chunk_length(paths: int, entries: int, max_factor: int) -> int:
    """Fine steps whose increments fit in about ``CHUNK_BYTES``: a multiple of ``max_factor`` when one fits, else as
    many as fit (a coarse increment is then carried from one chunk to the next, ``brownian.CoarseIncrements``)."""
    fitting = max(1, CHUNK_BYTES // max(1, paths * entries * 8))
    return max_factor * (fitting // max_factor) if fitting >= max_factor else fitting


def run_coupled(
    levels: Sequence[Level],
    comparisons: Sequence[tuple[int, int]],
    x0: np.ndarray | Sequence[np.ndarray],
    block: BrownianBlock,
    fine_steps: int,
    progress: Callable[[int], None] | None = None,
    martingale: Martingale | None = None,
    start_time: float = 0.0,
) -> CoupledRun:
    """Run every level from ``x0`` (one state for all levels, or one per level) over ``fine_steps``
    fine steps of the block's Brownian path; with ``martingale``, sum ``martingale(x, dw, t)`` over each level's steps
    (x the state before the step, dw its increment, t = ``start_time`` + the fine steps before it times h)."""
    factors = [level.factor for level in levels]
    max_factor = max(factors)
    if any(max_factor % f for f in factors) or fine_steps % max_factor:
        raise ValueError(f"level factors {factors} must nest and divide fine_steps = {fine_steps}")
    if max_factor > 1 and not block.noise.nested:
        raise ValueError("levels with factor > 1 need a nested (Brownian) noise; this noise packs per-layer draws")
    for a, b in comparisons:
        if max(factors[a], factors[b]) % min(factors[a], factors[b]):
            raise ValueError(f"levels {a} and {b} have grids that do not nest")
    entries = int(np.prod(block.noise.shape))
    chunk = min(fine_steps, chunk_length(block.paths, entries, max_factor))
    states = [x.copy() for x in x0] if isinstance(x0, (list, tuple)) else [x0.copy() for _ in levels]
    sup_sq = np.zeros((states[0].shape[0], len(comparisons)))
    common = [max(factors[a], factors[b]) for a, b in comparisons]
    done, increments = 0, CoarseIncrements(factors)
    totals: list = [0.0] * len(levels)  # the martingale's sum per level
    while done < fine_steps:
        steps = min(chunk, fine_steps - done)
        sums = increments.add(block.next(steps))  # levels on one grid share their increments
        for k in range(1, steps + 1):
            t = done + k
            for i, (level, f) in enumerate(zip(levels, factors)):
                if t % f == 0:
                    dw = sums[f][:, t // f - 1 - done // f]
                    if martingale is None:
                        states[i] = level.stepper.layer(states[i], dw, block.h * f)
                    else:
                        t_start = start_time + (t - f) * block.h
                        states[i], term = step_with_martingale(
                            level.stepper, martingale, states[i], dw, block.h * f, t_start
                        )
                        totals[i] = totals[i] + term
            for c, (a, b) in enumerate(comparisons):
                if t % common[c] == 0:
                    np.maximum(sup_sq[:, c], token_mean_sq_distance(states[a], states[b]), out=sup_sq[:, c])
        done += steps
        if progress is not None:
            progress(steps)
    final_sq = np.zeros_like(sup_sq)
    for c, (a, b) in enumerate(comparisons):
        final_sq[:, c] = token_mean_sq_distance(states[a], states[b])
    return CoupledRun(
        final=states, final_sq=final_sq, sup_sq=sup_sq, martingale=totals if martingale is not None else None
    )


def run_recorded(
    levels: Sequence[Level],
    x0: np.ndarray,
    block: BrownianBlock,
    fine_steps: int,
    records: int,
    observe: Callable[[np.ndarray], np.ndarray],
    progress: Callable[[int], None] | None = None,
    martingale: Martingale | None = None,
) -> np.ndarray:
    """``observe(state)`` of every level at ``records + 1`` equally spaced times 0 .. T:
    shape (paths, levels, records + 1, ...). Record times must lie on every level's grid.

    With ``martingale`` (``observe`` then returns (paths, k)), each record's k values are followed by the sum of
    ``martingale(x, dw, t)`` (paths, m) over the level's steps in the interval that ends at it (zeros at t = 0): the
    increments of a control variate the caller weights, e.g. sum_k G(x_k) dW_k, of mean 0 when dW_k is independent
    of x_k."""
    if fine_steps % records or (fine_steps // records) % max(level.factor for level in levels):
        raise ValueError(f"records = {records} must split fine_steps = {fine_steps} on every level's grid")
    segment = fine_steps // records
    states = [x0 for _ in levels]
    series = [[observe(x0)] for _ in levels]
    terms: list[list[np.ndarray]] = [[] for _ in levels]
    for record in range(records):
        run = run_coupled(levels, [], states, block, segment, progress, martingale, record * segment * block.h)
        states = run.final
        for i, state in enumerate(states):
            series[i].append(observe(state))
            if run.martingale is not None:
                terms[i].append(run.martingale[i])
    recorded = np.stack([np.stack(values, axis=1) for values in series], axis=1)
    if martingale is None:
        return recorded
    sums = np.stack([np.stack(values, axis=1) for values in terms], axis=1)  # (paths, levels, records, m)
    sums = np.concatenate([np.zeros_like(sums[:, :, :1]), sums], axis=2)
    return np.concatenate([recorded, sums], axis=-1)
