"""Exact low-rank coupling of a depth ladder driven by one d x d Gaussian matrix Brownian motion.

Model F's layer map and its limit SDE use each matrix increment dW_k only through its action on a few vectors:
the attention averages a_i of every level of the ladder (a coarse level steps with the block sum of the fine
increments, applied to its own a_i, which stay fixed during its step). With Q_k an orthonormal basis (d x m) of the
span of all those vectors at fine step k (they are known before dW_k is drawn),

    dW_k v = (dW_k Q_k) Q_k^T v   for every v in the span,

and dW_k Q_k is a d x m matrix of i.i.d. N(0, sigma^2 h) entries independent of the past (a Gaussian matrix times
an orthonormal frame chosen from the past). Drawing G_k ~ dW_k Q_k directly gives every level exactly the joint
law of the full-matrix construction, block sums included: d m normals per fine step instead of d^2, where
m = min(d, n x levels). Exact in law, not pathwise with the full-matrix draws (different random numbers); tests
feed G_k = dW_k Q_k from a full-matrix path and recover ``coupling.run_coupled`` to rounding.

The cost is a batched QR of d x m per fine step, so the coupling pays when m is well below d (d = 64, 128 with the
strong study's ten levels of two tokens), not at d = 16.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._models import CommonNoise, FedorovModel, FedorovSDE
from .._paths import (
    CoupledRun,
    Level,
    PathStreams,
    run_seeded,
    token_mean_sq_distance,
    uniform_sphere,
)
from .strong import StrongData, StrongDesign, strong_ladder

CHUNK_NORMALS = 8 * 2**20  # normals drawn per chunk of fine steps (64 MiB)


class ActionStepper(Protocol):
    """A step that uses its matrix increment only through ``dW v`` for the vectors ``vectors(x)``."""

    def vectors(self, x: np.ndarray) -> np.ndarray: ...

    def step(self, x: np.ndarray, vectors: np.ndarray, applied: np.ndarray, h: float) -> np.ndarray: ...


@dataclass(frozen=True)
class FedorovAction:
    """Model F's layer through ``applied = dW a`` (``FedorovModel.layer_from_action``)."""

    model: FedorovModel

    def vectors(self, x: np.ndarray) -> np.ndarray:
        return self.model.attention(x)

    def step(self, x: np.ndarray, a: np.ndarray, applied: np.ndarray, h: float) -> np.ndarray:
        return self.model.layer_from_action(x, a, applied, h)


@dataclass(frozen=True)
class FedorovEulerAction:
    """Euler-Maruyama on model F's limit SDE, ``x + b(x) h + P_x dW a``, through ``applied = dW a`` (the step of
    ``integrators.EulerMaruyama`` with the coefficients of ``FedorovSDE.coefficients_from_action``)."""

    sde: FedorovSDE

    def vectors(self, x: np.ndarray) -> np.ndarray:
        return self.sde.model.attention(x)

    def step(self, x: np.ndarray, a: np.ndarray, applied: np.ndarray, h: float) -> np.ndarray:
        drift, noise = self.sde.coefficients_from_action(x, a, applied)
        return x + h * drift + noise


def frame(vectors: np.ndarray) -> np.ndarray | None:
    """An orthonormal (paths, d, m) frame whose span contains the m rows of ``vectors`` (paths, m, d) when m < d
    (Householder QR: orthonormal even when the vectors are dependent, e.g. merged tokens); None when m >= d
    (the frame is then the identity and G is the full matrix)."""
    if vectors.shape[-2] >= vectors.shape[-1]:
        return None
    return np.linalg.qr(np.swapaxes(vectors, -1, -2))[0]


def stream_draw(
    streams: PathStreams, dim: int, width: int, sigma: float, h: float, fine_steps: int
) -> Callable[[int, np.ndarray | None], np.ndarray]:
    """``draw(k, frame) -> G_k``: i.i.d. N(0, sigma^2 h) (paths, d, width) matrices from the paths' noise streams,
    in chunks of fine steps (time-major, so the numbers do not depend on the chunk length)."""
    noise = CommonNoise(shape=(dim, width), scale=sigma)
    chunk = max(1, CHUNK_NORMALS // max(1, streams.paths * dim * width))
    cache: dict[int, np.ndarray] = {}

    def draw(k: int, basis: np.ndarray) -> np.ndarray:
        start = (k // chunk) * chunk
        if start not in cache:
            cache.clear()
            cache[start] = streams.increments(noise, min(chunk, fine_steps - start), h)
        return cache[start][:, k - start]

    return draw


def run_low_rank_coupled(
    levels: Sequence[Level],
    comparisons: Sequence[tuple[int, int]],
    x0: np.ndarray,
    draw: Callable[[int, np.ndarray | None], np.ndarray],
    fine_steps: int,
    h: float,
    progress: Callable[[int], None] | None = None,
) -> CoupledRun:
    """``coupling.run_coupled`` with the low-rank increments: each level of factor f steps every f fine steps with
    the sum of ``G_k Q_k^T`` applied to its own vectors (fixed during its step). ``draw(k, Q_k)`` returns G_k,
    (paths, d, m), m = min(d, all levels' vectors)."""
    factors = [level.factor for level in levels]
    if any(max(factors) % f for f in factors) or fine_steps % max(factors):
        raise ValueError(f"level factors {factors} must nest and divide fine_steps = {fine_steps}")
    states = [x0.copy() for _ in levels]
    vectors = [level.stepper.vectors(x) for level, x in zip(levels, states)]
    applied = [np.zeros_like(x) for x in states]
    sup_sq = np.zeros((x0.shape[0], len(comparisons)))
    common = [max(factors[a], factors[b]) for a, b in comparisons]
    for k in range(fine_steps):
        basis = frame(np.concatenate(vectors, axis=-2))
        g_t = np.swapaxes(draw(k, basis), -1, -2)  # (paths, width, d)
        for i, v in enumerate(vectors):
            applied[i] += (v if basis is None else v @ basis) @ g_t  # rows: dW_k v_j = G_k (Q_k^T v_j)
        t = k + 1
        for i, (level, f) in enumerate(zip(levels, factors)):
            if t % f == 0:
                states[i] = level.stepper.step(states[i], vectors[i], applied[i], h * f)
                vectors[i] = level.stepper.vectors(states[i])
                applied[i] = np.zeros_like(states[i])
        for c, (a, b) in enumerate(comparisons):
            if t % common[c] == 0:
                np.maximum(sup_sq[:, c], token_mean_sq_distance(states[a], states[b]), out=sup_sq[:, c])
        if progress is not None:
            progress(1)
    final_sq = np.stack([token_mean_sq_distance(states[a], states[b]) for a, b in comparisons], axis=1)
    return CoupledRun(final=states, final_sq=final_sq, sup_sq=sup_sq)


def coupled_strong_errors_low_rank(
    model: FedorovModel, design: StrongDesign, seed: int, key: Sequence[int]
) -> StrongData:
    """``strong.coupled_strong_errors`` for model F against its Euler reference, with the exact low-rank coupling
    (the same law; other random numbers)."""
    if model.law != "gaussian":
        raise ValueError(f"the low-rank coupling needs Gaussian value matrices, got law {model.law!r}")
    levels, comparisons = strong_ladder(design, FedorovAction(model), FedorovEulerAction(model.limit_sde()))
    width = min(model.dim, model.tokens * len(levels))

    def compute(streams: PathStreams, advance) -> tuple[np.ndarray, np.ndarray]:
        x0 = uniform_sphere(streams, model.tokens, model.dim)
        draw = stream_draw(streams, model.dim, width, float(model.sigma), design.h_fine, design.fine_steps)
        run = run_low_rank_coupled(levels, comparisons, x0, draw, design.fine_steps, design.h_fine, advance)
        return run.final_sq, run.sup_sq

    return StrongData.from_blocks(
        run_seeded(
            compute,
            name="coupled_strong_low_rank",
            configuration=(design, model),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
        ),
        design,
    )
