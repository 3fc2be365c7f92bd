"""A user's MLP block from a shaped activation, Z' = psi(Z; n^-1/2) W^T / sqrt(n) (``activation_block``; the shaped
ReLU MLP of Li, Nica and Roy 2022 is psi(x; eps) = sqrt(c) (s_+ max(x, 0) + s_- min(x, 0)), s_+- = 1 + c_+- eps), and
its covariance SDE by automatic differentiation (``activation_limit``, which ``derive_limit`` calls).

Given Z, V' = Z' Z'^T / n is Wishart around M = psi(Z) psi(Z)^T / n, and the columns of Z behave like i.i.d. draws
h ~ N(0, V), so with eps = n^-1/2

    n (E[V'] - V)_ab = eps^-2 (E[psi(h_a; eps) psi(h_b; eps)] - V_ab) -> b_ab(V) = (1/2) d^2/d eps^2 E[...] at eps = 0,

provided psi(x; 0) = x (then E[...] = V at eps = 0 and the noise is Wishart, Sigma_ab,cd = V_ac V_bd + V_ad V_bc, as
for a linear layer) and the first derivative in eps of E[...] vanishes (else the mean moves by O(n^-1/2) a layer and
there is no limit in t = l/n). Each expectation is a two-dimensional Gaussian integral: h_a = sqrt(V_aa) r cos(theta),
h_b = sqrt(V_bb) r (rho cos(theta) + sqrt(1 - rho^2) sin(theta)), in sectors of theta split where either argument
changes sign (the kinks of a piecewise-smooth activation at 0 are rays) and Gauss-Legendre in theta and in r on
[-R, R]: spectrally convergent for polynomially bounded activations smooth away from 0, and checked against half as
many nodes (a kink away from 0 converges slowly, and is refused). The derivatives in eps are torch's (forward mode,
exact), cross-checked against the difference quotient (E(eps_1) - V) / eps_1^2 on either side of 0, which an
activation not smooth in eps at 0 (|eps| g(x)) would fail.

The SDE costs one quadrature per state and pair (a, b): right for the local check's few states, too slow for the
claim's Euler scheme in ``check_law`` over many samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np

from verify._common import check_int, check_real

from .covariance_limits import CovarianceSDE, coordinates
from .torch_block import one_thread
from .width_blocks import covariance

RADIUS = 12.0  # exp(-72): the Gaussian's mass beyond is below rounding
NODES = (48, 64)  # Gauss-Legendre nodes per sector in theta and in r (the error estimate halves both)
TOLERANCE = 1e-8  # relative: the quadrature's error estimate and the first-order term must be below it
STEP = 1e-3  # eps_1 of the difference quotient that cross-checks the derivatives
QUOTIENT_TOLERANCE = 1e-2  # relative: the quotient differs from the drift by O(eps_1)


@dataclass(frozen=True)
class ActivationBlock:
    """Z' = psi(Z; n^-1/2) W^T / sqrt(n), psi a torch function applied entrywise (module docstring)."""

    activation: Callable
    inputs: int = 2
    rate: float = 0.5
    name: str = "activation block"

    def weight_shapes(self, width: int) -> dict[str, tuple[int, ...]]:
        return {"W": (width, width)}

    def hidden(self, z: np.ndarray) -> np.ndarray:
        """psi(Z; n^-1/2), evaluated by torch in float64 on one thread."""
        import torch

        with one_thread(torch):
            eps = torch.tensor(z.shape[-1] ** -0.5, dtype=torch.float64)
            out = self.activation(torch.as_tensor(z, dtype=torch.float64), eps)
        return checked_shape(out, z.shape).detach().numpy()

    def block(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        return self.hidden(z) @ np.swapaxes(weights["W"], -1, -2) / np.sqrt(z.shape[-1])

    def mean_estimate(self, z: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
        """E_W[V'] = psi(Z) psi(Z)^T / n: exact given Z."""
        return covariance(self.hidden(z))


def activation_block(activation: Callable, inputs: int = 2, *, rate: float = 0.5, name: str = "activation block"):
    """A width-indexed MLP block from ``activation(x, eps)``: a torch function of a float64 tensor x and the scalar
    tensor eps = n^-1/2, applied entrywise, with activation(x, 0) = x (module docstring); its covariance SDE is
    ``derive_limit(block)``. ``rate``: the order in 1/n at which its one-step moments reach the limit (1 when
    psi(-x; eps) = -psi(x; -eps), as for c_+ = -c_-, else 1/2)."""
    check_int("inputs", inputs, minimum=1)
    check_real("rate", rate, minimum=0.0, strict_minimum=True)
    if not callable(activation):
        raise TypeError(f"activation must be a callable (x, eps) -> tensor, got {type(activation).__name__}")
    return ActivationBlock(activation, inputs, rate, name)


@cache
def _legendre(nodes: int, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(nodes)
    return (high - low) / 2 * x + (high + low) / 2, (high - low) / 2 * w


def gaussian_nodes(v_aa: float, v_bb: float, rho: float, nodes: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Points (h_a, h_b) and weights of E f(h_a, h_b), (h_a, h_b) ~ N(0, [[v_aa, c], [c, v_bb]]), c = rho sqrt(v_aa
    v_bb): polar coordinates of the whitened pair, theta in [0, pi) split where h_a or h_b changes sign, r on
    (-R, 0) and (0, R), Gauss-Legendre in each; the weight |r| exp(-r^2/2) / (2 pi)."""
    orthogonal = math.sqrt(max(1.0 - rho * rho, 0.0))
    cuts = sorted({0.0, math.pi, math.pi / 2, math.atan2(-rho, orthogonal) % math.pi})
    points_a, points_b, weights = [], [], []
    for low, high in zip(cuts, cuts[1:]):
        if high - low < 1e-15:
            continue
        theta, w_theta = _legendre(nodes[0], low, high)
        for r_low, r_high in ((-RADIUS, 0.0), (0.0, RADIUS)):
            r, w_r = _legendre(nodes[1], r_low, r_high)
            rr, tt = np.meshgrid(r, theta)
            points_a.append(math.sqrt(v_aa) * rr * np.cos(tt))
            points_b.append(math.sqrt(v_bb) * rr * (rho * np.cos(tt) + orthogonal * np.sin(tt)))
            weights.append(np.outer(w_theta, w_r * np.abs(r) * np.exp(-r * r / 2)) / (2 * math.pi))
    return tuple(np.concatenate([p.ravel() for p in x]) for x in (points_a, points_b, weights))


def checked_shape(out, shape: tuple[int, ...]):
    """The activation's output, which must have its input's shape (it is applied entrywise)."""
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"activation: expected an output of its input's shape {tuple(shape)}, got {tuple(out.shape)}")
    return out


def eps_derivatives(activation: Callable, v_aa: float, v_bb: float, rho: float, nodes) -> np.ndarray:
    """E[psi(h_a; eps) psi(h_b; eps)] and its first and second derivatives in eps at eps = 0 (torch forward mode),
    then E at eps = STEP and -STEP."""
    import torch
    from torch.func import jacfwd

    h_a, h_b, w = (torch.as_tensor(x, dtype=torch.float64) for x in gaussian_nodes(v_aa, v_bb, rho, nodes))

    def mean(eps):
        return (w * checked_shape(activation(h_a, eps), h_a.shape) * activation(h_b, eps)).sum()

    with one_thread(torch):
        eps = torch.zeros((), dtype=torch.float64)
        steps = [mean(torch.tensor(e, dtype=torch.float64)) for e in (STEP, -STEP)]
        values = [mean(eps), jacfwd(mean)(eps), jacfwd(jacfwd(mean))(eps), *steps]
    return np.array([float(x) for x in values])


def pair_drift(activation: Callable, v_aa: float, v_bb: float, v_ab: float) -> float:
    """b_ab = (1/2) d^2/d eps^2 E[psi(h_a; eps) psi(h_b; eps)] at 0, checked: the mean at eps = 0 is v_ab, the first
    derivative vanishes, and the quadrature's estimate (against half as many nodes) is below ``TOLERANCE``."""
    scale = math.sqrt(v_aa) * math.sqrt(v_bb)
    rho = max(-1.0, min(1.0, v_ab / scale))
    fine = eps_derivatives(activation, v_aa, v_bb, rho, NODES)
    coarse = eps_derivatives(activation, v_aa, v_bb, rho, tuple(n // 2 for n in NODES))
    error = float(np.max(np.abs(fine - coarse) / (scale + np.abs(fine))))
    if error > TOLERANCE:
        raise ValueError(
            f"activation: its Gaussian moments do not converge in the quadrature (relative change {error:.3g} against "
            "half the nodes at this state): a kink away from 0 or a non-smooth activation is beyond derive_limit"
        )
    if abs(fine[0] - v_ab) > TOLERANCE * scale:
        raise ValueError(
            f"activation: activation(x, 0) must be the identity (E[psi psi] at eps = 0 is {fine[0]:.6g}, V_ab = "
            f"{v_ab:.6g}): the width limit's noise is then Wishart"
        )
    if abs(fine[1]) > TOLERANCE * scale:
        raise ValueError(
            f"activation: the first derivative in eps of E[psi(h_a) psi(h_b)] is {fine[1]:.3g}, expected 0: the mean "
            "would move by O(n^-1/2) a layer, and there is no limit in t = l/n"
        )
    drift = 0.5 * float(fine[2])
    quotients = (fine[3:] - fine[0]) / STEP**2  # the quadrature's own value at 0: its error cancels
    if np.max(np.abs(quotients - drift)) > QUOTIENT_TOLERANCE * (abs(drift) + scale):
        raise ValueError(
            f"activation: its derivatives in eps at 0 give the drift {drift:.6g}, the difference quotients at eps = "
            f"+-{STEP:g} give {quotients[0]:.6g} and {quotients[1]:.6g}: it is not smooth in eps at 0"
        )
    return drift


def checked_state(state: np.ndarray, k: int) -> None:
    """A covariance state the quadrature can take: finite, positive diagonal, |V_ab| <= sqrt(V_aa V_bb)."""
    for a, b in coordinates(state.shape[0]):
        v_aa, v_bb, v_ab = state[a, a], state[b, b], state[a, b]
        if not (np.isfinite(v_ab) and v_aa > 0 and v_bb > 0):
            raise ValueError(f"V[{k}, {a}, {b}]: expected finite entries and a positive diagonal, got {state.tolist()}")
        if abs(v_ab) > math.sqrt(v_aa) * math.sqrt(v_bb) * (1 + 1e-12):
            raise ValueError(
                f"V[{k}, {a}, {b}]: expected a covariance (|V_ab| <= sqrt(V_aa V_bb)), got {state.tolist()}"
            )


def wishart_diffusion(v: np.ndarray) -> np.ndarray:
    """Sigma_ab,cd = V_ac V_bd + V_ad V_bc over ``coordinates``: (k, p, p)."""
    pairs = coordinates(v.shape[-1])
    rows = [[v[:, a, c] * v[:, b, d] + v[:, a, d] * v[:, b, c] for c, d in pairs] for a, b in pairs]
    return np.stack([np.stack(row, axis=-1) for row in rows], axis=-2)


def activation_limit(block: ActivationBlock, name: str = "limit by automatic differentiation") -> CovarianceSDE:
    """The covariance SDE of an ``activation_block`` (module docstring): drift by automatic differentiation of
    Gaussian quadratures, Wishart diffusion."""

    def drift(v: np.ndarray) -> np.ndarray:
        out = np.zeros_like(v, dtype=np.float64)
        for k, state in enumerate(np.asarray(v, dtype=np.float64)):
            checked_state(state, k)
            for a, b in coordinates(state.shape[0]):
                out[k, a, b] = out[k, b, a] = pair_drift(block.activation, state[a, a], state[b, b], state[a, b])
        return out

    return CovarianceSDE(drift, wishart_diffusion, block.inputs, name)
