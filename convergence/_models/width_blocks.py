"""Layer maps indexed by width: blocks acting on the representations Z (samples, m, n) of m inputs or tokens at
width n, whose observed state is the covariance V = Z Z^T / n and whose limit is a covariance SDE in t = l/n
(docs/models.md, "Joint depth-and-width limits"). A block draws no randomness itself: it receives its weights, arrays
of i.i.d. N(0, 1) entries of the shapes ``weight_shapes(n)`` declares, so a check seeds them and its results do not
depend on block size.

A block may also give ``mean_estimate(z, weights)``: an estimate of E[V' | Z] from the same weights whose mean is that
conditional mean exactly and whose spread is smaller (the mean over the last weight matrix in closed form, less
controls of mean exactly zero): the drift n (E[V' | Z] - V) then costs O(1) samples per unit of precision instead of
O(n). ``rate`` is the order in 1/n at which a block's one-step moments reach the limit's: 1 where their expansion in
n^-1/2 has no odd terms (the ResNet; the shaped attention, whose odd terms are odd in the logits), 1/2 where it has
(a shaped activation: its slopes 1 + c_+- n^-1/2 put an n^-3/2 term in the one-step mean, as in the shaped MLP and
the transformer block, although the latter's V is exactly a Markov chain). With c_+ = -c_- the moments are functions of
(s_+ - s_-)^2 and s_+ + s_- = 2 alone (the law of Z is invariant under Z -> -Z, which swaps s_+ and s_-), so a shaped
MLP so built may claim rate 1 (the ``joint-limits`` study does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from verify._common import check_int, check_real
from verify._models import attention_first_order, shaped_attention, shaped_relu


@runtime_checkable
class WidthBlock(Protocol):
    """A block at width n: ``inputs`` rows (m), ``rate`` (module docstring), the weights it takes at width n
    (``weight_shapes``) and the block itself, (samples, m, n) -> (samples, m, n), weights (samples, *shape)."""

    inputs: int
    rate: float

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]: ...

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray: ...


def covariance(z: np.ndarray) -> np.ndarray:
    """V = Z Z^T / n for Z (..., m, n)."""
    return z @ np.swapaxes(z, -1, -2) / z.shape[-1]


def _square(width: int) -> tuple[int, int]:
    return (width, width)


@dataclass(frozen=True)
class ShapedMLPBlock:
    """Z' = sqrt(c/n) phi(Z) W^T, phi the shaped ReLU (Li, Nica and Roy 2022; ``verify``'s ``ShapedMLP``)."""

    inputs: int = 2
    c_plus: float = 0.0
    c_minus: float = -1.0
    rate: float = 0.5

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {"W": _square(width)}

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        phi, c = shaped_relu(z, z.shape[-1], self.c_plus, self.c_minus)
        return np.sqrt(c / z.shape[-1]) * phi @ np.swapaxes(weights["W"], -1, -2)

    def mean_estimate(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """E_W[V'] = c phi(Z) phi(Z)^T / n: exact given Z."""
        phi, c = shaped_relu(z, z.shape[-1], self.c_plus, self.c_minus)
        return c * covariance(phi)


@dataclass(frozen=True)
class ResidualBlock:
    """Z' = Z + sqrt(c / L) phi(Z) W^T / sqrt(n), L = ``depth_ratio`` n, phi the identity (c = 1) or ReLU (c = 2)
    (``verify``'s ``ResidualNetwork``: its limit is an ODE)."""

    inputs: int = 2
    branch: str = "relu"
    depth_ratio: float = 1.0
    rate: float = 1.0

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {"W": _square(width)}

    def _branch(self, z: np.ndarray) -> tuple[np.ndarray, float]:
        return (np.maximum(z, 0.0), 2.0) if self.branch == "relu" else (z, 1.0)

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        phi, c = self._branch(z)
        width = z.shape[-1]
        return z + np.sqrt(c / (self.depth_ratio * width**2)) * phi @ np.swapaxes(weights["W"], -1, -2)

    def mean_estimate(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """E_W[V'] = V + c phi phi^T / (n L): exact given Z."""
        phi, c = self._branch(z)
        return covariance(z) + c * covariance(phi) / (self.depth_ratio * z.shape[-1])


@dataclass(frozen=True)
class ShapedAttentionBlock:
    """Z' = lambda Z + gamma A Z W / sqrt(n), A = I + softmax(<q_i, k_j> / (tau_0 sqrt(n n_k))) - 1/m, q = Z W_Q /
    sqrt(n), k = Z W_K / sqrt(n) (Noci et al. 2023; ``verify``'s ``ShapedAttention``), lambda^2 + gamma^2 = 1."""

    inputs: int = 3
    tau_0: float = 1.0
    gamma: float = 0.5**0.5
    keys: int = 4
    rate: float = 1.0

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {"W_Q": (width, self.keys), "W_K": (width, self.keys), "W": _square(width)}

    def attention(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """A (samples, m, m) and the logits times sqrt(n), S (``shaped_attention``)."""
        return shaped_attention(z, weights["W_Q"], weights["W_K"], self.tau_0)

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        a, _ = self.attention(z, weights)
        lam = np.sqrt(1 - self.gamma**2)
        return lam * z + self.gamma * a @ z @ weights["W"] / np.sqrt(z.shape[-1])

    def mean_estimate(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """lambda^2 V + gamma^2 A V A^T (the mean over W) less gamma^2 (A_1 V + V A_1^T) / sqrt(n), A_1 the row-centred
        S / m: linear in S, which is bilinear in the independent W_Q, W_K, so of mean exactly 0."""
        a, scores = self.attention(z, weights)
        v = covariance(z)
        control = attention_first_order(scores, v)
        g2 = self.gamma**2
        return (1 - g2) * v + g2 * (a @ v @ np.swapaxes(a, -1, -2) - control / np.sqrt(z.shape[-1]))


@dataclass(frozen=True)
class ShapedTransformerBlock:
    """The shaped attention block, then Z'' = lambda Z' + gamma sqrt(c/n) phi(Z' W_1 / sqrt(n)) W_2^T with the shaped
    ReLU phi (``verify``'s ``ShapedTransformer``)."""

    inputs: int = 3
    tau_0: float = 1.0
    gamma: float = 0.5**0.5
    keys: int = 4
    c_plus: float = 0.0
    c_minus: float = -1.0
    rate: float = 0.5

    @property
    def attention_half(self) -> ShapedAttentionBlock:
        return ShapedAttentionBlock(self.inputs, self.tau_0, self.gamma, self.keys)

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {**self.attention_half.weight_shapes(width), "W_1": _square(width), "W_2": _square(width)}

    def _hidden(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        moved = self.attention_half.block(z, weights)
        pre = moved @ weights["W_1"] / np.sqrt(z.shape[-1])
        phi, c = shaped_relu(pre, z.shape[-1], self.c_plus, self.c_minus)
        return moved, pre, phi, c

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        moved, _, phi, c = self._hidden(z, weights)
        lam = np.sqrt(1 - self.gamma**2)
        return lam * moved + self.gamma * np.sqrt(c / z.shape[-1]) * phi @ np.swapaxes(weights["W_2"], -1, -2)

    def mean_estimate(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """The attention half's estimate plus gamma^2 (c phi phi^T - G G^T) / n, G = Z' W_1 / sqrt(n): the MLP half's
        mean over W_2 less the hidden layer's control G G^T / n - V' (mean exactly 0 given Z')."""
        _, pre, phi, c = self._hidden(z, weights)
        mlp = c * covariance(phi) - covariance(pre)
        return self.attention_half.mean_estimate(z, weights) + self.gamma**2 * mlp


@dataclass(frozen=True)
class UserWidthBlock:
    """A user's numpy block at width n (``width_block``)."""

    step: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray]
    inputs: int
    shapes: Callable[[int], dict[str, tuple[int, ...]]]
    rate: float = 0.5
    name: str = "width block"
    mean_estimate: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray] | None = None

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {str(k): tuple(int(s) for s in v) for k, v in self.shapes(width).items()}

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """The step's output as it returns it (its dtype sets the check's rounding allowance)."""
        return np.asarray(self.step(z, weights))


def width_block(
    step: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray],
    inputs: int,
    weight_shapes: Callable[[int], dict[str, tuple[int, ...]]],
    *,
    rate: float = 0.5,
    name: str = "width block",
    mean_estimate: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray] | None = None,
) -> UserWidthBlock:
    """A user's block indexed by width for the covariance checks: ``step(z, weights)`` maps Z (samples, m, n) to the
    next layer's (samples, m, n), with ``weights`` a dict of arrays (samples, *shape) of i.i.d. N(0, 1) entries, the
    shapes ``weight_shapes(n)`` gives (scale them inside the step); ``inputs`` = m; ``rate``: the order in 1/n at which
    its one-step moments are claimed to reach the limit (module docstring: 1/2 unless their expansion in n^-1/2 has
    no odd terms);
    ``mean_estimate(z, weights)``: optionally, an estimate of E[V' | Z] (samples, m, m) from the same weights with the
    same mean and a smaller spread (module docstring; the check compares its mean with V''s)."""
    check_int("inputs", inputs, minimum=1)
    check_real("rate", rate, minimum=0.0, strict_minimum=True)
    if mean_estimate is not None and not callable(mean_estimate):
        raise TypeError(f"mean_estimate must be a callable or None, got {type(mean_estimate).__name__}")
    if not callable(step) or not callable(weight_shapes):
        raise TypeError(f"step and weight_shapes must be callables, got {type(step).__name__}, {type(weight_shapes)}")
    return UserWidthBlock(step, inputs, weight_shapes, rate, name, mean_estimate)
