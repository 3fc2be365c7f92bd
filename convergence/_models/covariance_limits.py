"""Covariance SDEs dV = b(V) dt + Sigma(V)^{1/2} dB in t = l/n, the claims that width-indexed blocks
(``width_blocks``) are checked against: a user's (``covariance_sde``) or the derived limit of a shipped block
(``covariance_limit``: ``verify``'s symbolic drift and diffusion, compiled with the block's constants).

Sigma is the covariance per unit time of the upper-triangular coordinates V_ab, a <= b, in row order
(``coordinates``): for m inputs, p = m (m + 1) / 2 of them, Sigma (p x p).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np
import sympy as sp

from verify._analysis import ResidualNetwork, ShapedAttention, ShapedMLP, ShapedTransformer
from verify._analysis import covariance as covariance_symbols
from verify._analysis import shaped_attention as attention_symbols
from verify._common import check_int

from .._runtime import lambdified
from .width_blocks import ResidualBlock, ShapedAttentionBlock, ShapedMLPBlock, ShapedTransformerBlock


def coordinates(inputs: int) -> list[tuple[int, int]]:
    """The upper-triangular entries (a, b), a <= b, in row order."""
    return [(a, b) for a in range(inputs) for b in range(a, inputs)]


def upper(v: np.ndarray) -> np.ndarray:
    """The coordinates of symmetric matrices (..., m, m): (..., p)."""
    rows, cols = np.triu_indices(v.shape[-1])
    return v[..., rows, cols]


@dataclass(frozen=True)
class CovarianceSDE:
    """A claimed covariance SDE: ``drift_fn`` maps V (k, m, m) to b(V) (k, m, m), ``diffusion_fn`` maps V to Sigma(V)
    (k, p, p) over ``coordinates``; time t = l/n."""

    drift_fn: Callable[[np.ndarray], np.ndarray]
    diffusion_fn: Callable[[np.ndarray], np.ndarray]
    inputs: int
    name: str = "claimed covariance SDE"

    def drift(self, v: np.ndarray) -> np.ndarray:
        return np.asarray(self.drift_fn(v), dtype=np.float64).reshape(v.shape)

    def diffusion(self, v: np.ndarray) -> np.ndarray:
        p = self.inputs * (self.inputs + 1) // 2
        return np.asarray(self.diffusion_fn(v), dtype=np.float64).reshape(v.shape[0], p, p)


def covariance_sde(
    drift: Callable[[np.ndarray], np.ndarray],
    diffusion: Callable[[np.ndarray], np.ndarray],
    inputs: int,
    name: str = "claimed covariance SDE",
) -> CovarianceSDE:
    """A claim to check a width-indexed block against: ``drift(V)`` (k, m, m) -> (k, m, m) and ``diffusion(V)`` ->
    (k, p, p), the covariance per unit t = l/n of the coordinates V_ab, a <= b, in row order (``coordinates``)."""
    check_int("inputs", inputs, minimum=1)
    if not callable(drift) or not callable(diffusion):
        kinds = f"{type(drift).__name__}, {type(diffusion).__name__}"
        raise TypeError(f"drift and diffusion must be callables, got {kinds}")
    return CovarianceSDE(drift, diffusion, inputs, name)


PARAMETERS = (
    covariance_symbols.c_plus,
    covariance_symbols.c_minus,
    attention_symbols.tau_0,
    attention_symbols.gamma,
    covariance_symbols.T,
)


def _model(block):
    """The symbolic model of a shipped block."""
    if isinstance(block, ShapedMLPBlock):
        return ShapedMLP(block.inputs)
    if isinstance(block, ResidualBlock):
        return ResidualNetwork(block.inputs, block.branch)
    if isinstance(block, ShapedAttentionBlock):
        return ShapedAttention(block.inputs)
    if isinstance(block, ShapedTransformerBlock):
        return ShapedTransformer(block.inputs)
    raise TypeError(f"block: no derived limit for {type(block).__name__}; give a claim with covariance_sde")


def _constants(block) -> tuple[float, ...]:
    """The block's values of ``PARAMETERS`` (1 where it has none: they do not enter its limit)."""
    names = ("c_plus", "c_minus", "tau_0", "gamma", "depth_ratio")
    return tuple(float(getattr(block, name, 1.0)) for name in names)


def compiled(matrix: sp.Matrix, symbols: list[sp.Symbol]) -> Callable[[list[np.ndarray]], np.ndarray]:
    """A function of the coordinates' columns (k,) and the ``PARAMETERS`` returning ``matrix`` at k states,
    (k, rows, cols): one ``sympy.lambdify`` per entry, constants broadcast."""
    entries = [lambdified([*symbols, *PARAMETERS], entry) for entry in matrix]
    rows, cols = matrix.shape

    def evaluate(columns: list[np.ndarray], constants: tuple[float, ...]) -> np.ndarray:
        k = columns[0].shape[0]
        values = [np.broadcast_to(np.asarray(f(*columns, *constants), dtype=np.float64), (k,)) for f in entries]
        return np.stack(values, axis=-1).reshape(k, rows, cols)

    return evaluate


@cache
def _compiled_model(model) -> tuple[Callable, Callable]:
    """The drift and diffusion of a symbolic model, compiled once with its constants as arguments (the ResNet's
    diffusion is 0: its limit is an ODE)."""
    pairs = coordinates(model.inputs)
    symbols = [model.state[a, b] for a, b in pairs]
    p = len(pairs)
    if isinstance(model, ResidualNetwork):
        sigma = sp.zeros(p, p)
    else:
        upper_entries = {(i, j): model.diffusion(*pairs[i], *pairs[j]) for i in range(p) for j in range(i, p)}
        sigma = sp.Matrix(p, p, lambda i, j: upper_entries[min(i, j), max(i, j)])
    return compiled(model.drift(), symbols), compiled(sigma, symbols)


def covariance_limit(block) -> CovarianceSDE:
    """The derived covariance SDE of a shipped block (``verify._analysis``) at its constants: the symbolic drift and
    diffusion compiled by ``sympy.lambdify`` (once per kind of block and number of inputs)."""
    drift, diffusion = _compiled_model(_model(block))
    constants = _constants(block)
    pairs = coordinates(block.inputs)

    def columns(v: np.ndarray) -> list[np.ndarray]:
        return [v[:, a, b] for a, b in pairs]

    return CovarianceSDE(
        lambda v: drift(columns(v), constants),
        lambda v: diffusion(columns(v), constants),
        block.inputs,
        f"derived covariance SDE of {block}",
    )
