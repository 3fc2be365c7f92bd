"""Forward runs on a width ladder: a width-indexed block (``convergence._models.width_blocks``) run for T n layers at
width n from representations with a given covariance, and the Euler-Maruyama scheme of a covariance SDE, the
reference computed another way. Both return a scalar statistic of the final covariance V per sample, and both draw
in seeded blocks whose size is a function of the width (or fixed) alone, so the samples do not depend on how a run
is split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from verify._models import frame_states

from .._models.covariance_limits import CovarianceSDE, coordinates, upper
from .._models.width_blocks import WidthBlock, covariance
from .._runtime import random_stream

BLOCK_ENTRIES = 1 << 22  # the entries of one n x n weight a seeded block draws at most (32 MB in float64)
SEEDED_MAX = 4096  # samples of one seeded block at most (narrow widths: fewer calls of the block)
EULER_BLOCK = 8192  # samples of one seeded block of the covariance SDE's Euler scheme

Statistic = Callable[[np.ndarray], np.ndarray]


def seeded_block(width: int) -> int:
    """Samples drawn at once from one seeded stream at ``width``: from ``SEEDED_MAX`` down, halving while a block's
    n x n weight would have more than ``BLOCK_ENTRIES`` entries (a function of the width alone: results do not depend
    on the looks; a look that needs part of a block computes it whole and keeps its part)."""
    size = SEEDED_MAX
    while size > 1 and size * width * width > BLOCK_ENTRIES:
        size //= 2
    return size


def in_float64(values) -> tuple[np.ndarray, float]:
    """``values`` as float64, and the machine epsilon of the floating dtype they came in (float64's otherwise)."""
    values = np.asarray(values)
    floating = np.issubdtype(values.dtype, np.floating)
    return values.astype(np.float64), float(np.finfo(values.dtype if floating else np.float64).eps)


def block_step(
    block: WidthBlock, z: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, np.ndarray], float]:
    """One layer of ``block`` on Z (samples, m, n) with fresh N(0, 1) weights from ``rng`` (drawn in the order of
    ``weight_shapes``): the output in float64, the weights, and the machine epsilon of the dtype the block returned."""
    samples, width = z.shape[0], z.shape[-1]
    weights = {name: rng.standard_normal((samples, *shape)) for name, shape in block.weight_shapes(width).items()}
    moved, eps = in_float64(block.block(z, weights))
    if moved.shape != z.shape:
        raise ValueError(f"block: expected an output of shape {z.shape} (samples, m, n), got {moved.shape}")
    return moved, weights, eps


def block_layers(block: WidthBlock, z: np.ndarray, layers: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """``layers`` layers of ``block`` on Z (``block_step`` each); the final Z in float64 and the coarsest machine
    epsilon the block returned."""
    precision = float(np.finfo(np.float64).eps)
    for _ in range(layers):
        z, _, eps = block_step(block, z, rng)
        precision = max(precision, eps)
    return z, precision


def statistic_values(statistic: Statistic, v: np.ndarray, size: int) -> np.ndarray:
    """``statistic(V)`` as float64, checked to be one value per sample: (size,)."""
    values = np.asarray(statistic(v), dtype=np.float64)
    if values.shape != (size,):
        raise ValueError(f"statistic: expected one value per sample, shape ({size},), got shape {values.shape}")
    return values


def width_run(
    block: WidthBlock,
    state: np.ndarray,
    width: int,
    layers: int,
    samples: int,
    statistic: Statistic,
    seed: int,
    key: Sequence[int],
) -> tuple[np.ndarray, float]:
    """``statistic`` of V = Z Z^T / n after ``layers`` layers at ``width``, from Z with Z Z^T / n = ``state`` (Haar
    frames, ``frame_states``), for samples 0 .. ``samples`` - 1 (each ``seeded_block`` its own stream, keyed by the
    width and the block's index); and the coarsest machine epsilon the block returned."""
    size = seeded_block(width)
    values, precision = [], float(np.finfo(np.float64).eps)
    for index in range(-(-samples // size)):
        rng = random_stream(seed, (*key, width, index))
        z, eps = block_layers(block, frame_states(state, width, size, rng), layers, rng)
        values.append(statistic_values(statistic, covariance(z), size))
        precision = max(precision, eps)
    return np.concatenate(values)[:samples], precision


def symmetric(y: np.ndarray, inputs: int) -> np.ndarray:
    """The symmetric matrices (k, m, m) of upper-triangular coordinates y (k, p) (``coordinates``' order)."""
    v = np.zeros((y.shape[0], inputs, inputs))
    rows, cols = np.array(coordinates(inputs)).T
    v[:, rows, cols] = y
    v[:, cols, rows] = y
    return v


CONE_FLOOR = 1e-6  # eigenvalues of a projected V, relative to its trace, at least this (its minors far above rounding)
JITTER = 1e-12  # added to the diagonal of Sigma, relative to its largest entry, before its Cholesky factor
INDEFINITE = 1e-8  # an eigenvalue of Sigma below -this times its largest entry: not rounding, not a covariance


def positive_part(v: np.ndarray) -> np.ndarray:
    """V (k, m, m) projected into the positive-definite cone where it left it (a leading principal minor below
    f^k, f = ``CONE_FLOOR`` |V|_F): eigenvalues below f raised to it (the limit stays in the
    cone; an Euler step near its boundary overshoots by O(h), and a kernel's arccos would leave its domain)."""
    floor = CONE_FLOOR * np.linalg.norm(v, axis=(-2, -1))  # positive even where an Euler step made tr V negative
    minors = np.stack([np.linalg.det(v[:, :k, :k]) for k in range(1, v.shape[-1] + 1)], axis=-1)
    outside = np.any(minors < floor[:, None] ** np.arange(1, v.shape[-1] + 1), axis=-1)
    if not np.any(outside):
        return v
    eigenvalues, vectors = np.linalg.eigh(v[outside])
    projected = v.copy()
    clipped = np.maximum(eigenvalues, floor[outside, None])
    projected[outside] = (vectors * clipped[:, None, :]) @ np.swapaxes(vectors, -1, -2)
    return projected


def square_root(sigma: np.ndarray) -> np.ndarray:
    """A factor R with R R^T = Sigma (k, p, p) up to ``JITTER``: the Cholesky factor of Sigma plus the jitter, or
    where Sigma is singular beyond it (a boundary), the symmetric root with eigenvalues below 0 set to 0."""
    scale = np.max(np.abs(sigma), axis=(-2, -1), initial=0.0)
    jitter = JITTER * np.maximum(scale, np.finfo(np.float64).tiny)[:, None, None] * np.eye(sigma.shape[-1])
    try:
        return np.linalg.cholesky(sigma + jitter)
    except np.linalg.LinAlgError:
        eigenvalues, vectors = np.linalg.eigh(sigma)
        if np.any(eigenvalues < -INDEFINITE * scale[:, None]):  # not a covariance: no law to sample
            worst = int(np.argmin(eigenvalues.min(axis=-1) / np.maximum(scale, np.finfo(np.float64).tiny)))
            raise ValueError(
                f"sde: the claimed diffusion must be positive semi-definite, got eigenvalues "
                f"{eigenvalues[worst].tolist()} on a path of its Euler scheme"
            ) from None
        return vectors * np.sqrt(np.maximum(eigenvalues, 0.0))[:, None, :]


def covariance_euler(
    claim: CovarianceSDE,
    state: np.ndarray,
    horizon: float,
    steps: int,
    samples: int,
    statistic: Statistic,
    seed: int,
    key: Sequence[int],
) -> np.ndarray:
    """``statistic`` of V_T under the increment-tamed Euler-Maruyama scheme of dV = b(V) dt + Sigma(V)^{1/2} dB on
    the coordinates y = upper(V): with D = b h + sqrt(h) R xi, h = T / ``steps``, R R^T = Sigma (``square_root``),
    y_{k+1} = y_k + D / max(1, h |D|) (Hutzenthaler and Jentzen 2015: the plain scheme's moments diverge for
    coefficients of superlinear growth, as the shaped attention's are; the taming acts only where h |D| > 1), each
    step's V projected into the cone (``positive_part``). Its bias is measured against half as many steps wherever
    it is used; each ``EULER_BLOCK`` of samples its own seeded stream."""
    h, p = horizon / steps, claim.inputs * (claim.inputs + 1) // 2
    values = []
    with np.errstate(over="ignore", invalid="ignore"):  # a path that leaves every float shows as NaN: the check fails
        for index in range(-(-samples // EULER_BLOCK)):
            values.append(_euler_block(claim, state, h, steps, p, statistic, random_stream(seed, (*key, index))))
    return np.concatenate(values)[:samples]


def _euler_block(claim, state, h, steps, p, statistic, rng) -> np.ndarray:
    """One ``EULER_BLOCK`` of ``covariance_euler``."""
    v = np.repeat(state[None], EULER_BLOCK, axis=0)
    for _ in range(steps):
        noise = square_root(claim.diffusion(v)) @ rng.standard_normal((EULER_BLOCK, p, 1))
        step = h * upper(claim.drift(v)) + np.sqrt(h) * noise[..., 0]
        tamed = step / np.maximum(1.0, h * np.linalg.norm(step, axis=-1))[:, None]
        v = positive_part(symmetric(upper(v) + tamed, claim.inputs))
    return statistic_values(statistic, v, EULER_BLOCK)


def correlation(v: np.ndarray) -> np.ndarray:
    """rho = V_01 / sqrt(V_00 V_11) per sample of V (samples, m, m): the correlation of the first two inputs."""
    return v[:, 0, 1] / np.sqrt(v[:, 0, 0] * v[:, 1, 1])
