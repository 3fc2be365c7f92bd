"""Synchronisation by noise in model A: the energy's decay rate lambda_bar' and the attention's rate eps.

Energy (docs/models.md section 2): E_beta(mu) = (1/2) iint (e^beta - e^{beta <x,y>}) mu(dx) mu(dy).

Noise. For each pair, the generator of the pure-noise two-point motion gives
L e^{beta u} = beta e^{beta u} G(u) (``verify._analysis.two_point``), hence d E[E_beta]/dt = -E <F(u), pair weights>
with F(u) = beta e^{beta u} G(u) / (e^beta - e^{beta u}), and Gronwall gives the rate lambda_bar' = -inf F.
Writing z = 1 - u, k(u) = k(1) - z kappa(u) (kappa the secant slope of k between u and 1):

    G(u) / z = k(1) ((d - 2 - u) + beta z (1 + u)) - kappa(u) q(u),   q(u) = d - 2 + u^2 - beta u (1 - u^2),
    F(u)     = e^{-beta z} (G(u) / z) / phi(beta z),                   phi(y) = (1 - e^{-y}) / y,

which is regular at u = 1 with F(1) = (d - 3) k(1) - (d - 1) k'(1) = -lambda_bar.

Attention. For dx_i/dt = v P_{x_i} a_i with softmax weights w_ij = e^{beta <x_i,x_j>} (Q^T K = beta I):
dE/dt = -(v beta / N^2) sum_i Z_i |P_{x_i} a_i|^2, Z_i = sum_j w_ij. For v >= 0 this is <= 0 (eps = 0).
For v < 0, Cauchy-Schwarz gives Z_i |P a_i|^2 <= sum_j w_ij (1 - <x_i,x_j>^2), and
(1 - u^2) e^{beta u} / (e^beta - e^{beta u}) = z (2 - z) / (e^{beta z} - 1) <= (2 - z)/beta <= 2/beta
(e^y - 1 >= y), so dE/dt <= 4 |v| E: eps = 4 |v|.

Certification. ``certified_infimum`` encloses inf F over [-1, 1] by ball arithmetic (python-flint) on a
partition refined where the bound is loose (branch and bound). Enclosures of k on a piece use
monotonicity where the correlation r(u) >= 0 (kappa is then increasing, k convex: Mehler) and the
Lipschitz bound |k'| <= k'(1) elsewhere. Kernel point values are closed forms in ball arithmetic for
ReLU and the linear activation (fully rigorous); for the other activations they are Gauss-Hermite
values whose radius is the a-posteriori difference between 96 and 192 nodes (rigorous given that
quadrature error estimate, not otherwise).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import flint
import mpmath
import numpy as np

from .._analysis import (
    GAUSS_HERMITE_NODES,
    KernelSpec,
    deficit_quadrature,
    k_one,
    k_one_prime,
)
from .._common import check_real, working_bits
from .balls import to_mpf

BITS = 128


def attention_energy_rate(v: float) -> float:
    """eps with dE_beta/dt <= eps E_beta along the attention flow with V = v I: 0 if v >= 0, else 4|v|."""
    v = check_real("v", v)
    return 0.0 if v >= 0 else 4.0 * abs(v)


@dataclass(frozen=True)
class CertifiedInfimum:
    """An enclosure [lower, upper] of a certified extremum, with where it is attained and how rigorous it is."""

    lower: mpmath.mpf
    upper: mpmath.mpf
    argmin: float
    pieces: int
    rigorous: bool

    @property
    def width(self) -> mpmath.mpf:
        return self.upper - self.lower


def certified_infimum(
    enclose: Callable[[float, float], flint.arb],
    point: Callable[[float], flint.arb],
    lo: float,
    hi: float,
    tol: float = 1e-7,
    initial_pieces: int = 64,
    max_evaluations: int = 20_000,
) -> tuple[flint.arb, flint.arb, float, int]:
    """Branch and bound: (lower, upper, argmin, evaluations) with lower <= inf f <= upper, upper - lower <= tol.

    ``enclose(a, b)`` must contain f([a, b]); ``point(x)`` must contain f(x).
    """
    edges = np.linspace(lo, hi, initial_pieces + 1)
    upper, argmin = None, lo
    heap: list[tuple[float, float, float, flint.arb]] = []
    evaluations = 0

    def visit(a: float, b: float) -> None:
        nonlocal upper, argmin, evaluations
        mid = 0.5 * (a + b)
        value = point(mid).upper()
        if upper is None or value < upper:
            upper, argmin = value, mid
        bound = enclose(a, b).lower()
        evaluations += 2
        heapq.heappush(heap, (float(bound), a, b, bound))  # the float only orders the heap

    for a, b in zip(edges[:-1], edges[1:]):
        visit(float(a), float(b))
    for end in (lo, hi):
        value = point(end).upper()
        if value < upper:
            upper, argmin = value, end
    while True:
        bound, a, b, _ = heap[0]
        if float(upper) - bound <= tol:
            break
        if evaluations >= max_evaluations:
            raise ArithmeticError(f"bracket still {float(upper) - bound:.3g} wide after {evaluations} evaluations")
        heapq.heappop(heap)
        mid = 0.5 * (a + b)
        if mid in (a, b):
            raise ArithmeticError(f"piece [{a}, {b}] cannot be split further; bracket {float(upper) - bound:.3g}")
        visit(a, mid)
        visit(mid, b)
    lower = min(entry[3] for entry in heap)  # exact balls: the comparison is exact
    return lower, upper, argmin, evaluations


class EnergyRate:
    """F(u) of the module docstring for one MLP field and beta, in ball arithmetic."""

    def __init__(self, spec: KernelSpec, beta: float):
        self.spec = spec
        self.beta_value = check_real("beta", beta, minimum=0.0, maximum=50.0)
        with working_bits(BITS):
            self.beta = flint.arb(beta)
            self.d = flint.arb(spec.dim)
            self.k1 = self._ball(k_one(spec), 1e-25)
            self.k1p = self._ball(k_one_prime(spec), 1e-25)
        self.rigorous = spec.activation in ("relu", "linear")
        self._deficits: dict[float, flint.arb] = {}

    @staticmethod
    def _ball(value: mpmath.mpf, radius: float) -> flint.arb:
        return flint.arb(mpmath.nstr(value, 35)) + flint.arb(0, radius)

    def deficit(self, z: float) -> flint.arb:
        """A ball containing D(z) = k(1) - k(1 - z) (cached: branch and bound revisits piece ends)."""
        if z not in self._deficits:
            self._deficits[z] = self._deficit(z)
        return self._deficits[z]

    def _deficit(self, z: float) -> flint.arb:
        with working_bits(BITS):
            zb = flint.arb(z)
            if self.spec.activation == "linear":
                return zb / self.d
            if self.spec.activation == "relu":
                s2 = flint.arb(1) / self.d + flint.arb(self.spec.sigma_u) ** 2
                gap = zb / (self.d * s2)
                t = 2 * (gap / 2).sqrt().asin()
                return s2 * (flint.arb.pi() * gap + t - t.sin() - t * gap) / (2 * flint.arb.pi())
            coarse, fine = (
                float(deficit_quadrature(self.spec, z, n)) for n in (GAUSS_HERMITE_NODES, 2 * GAUSS_HERMITE_NODES)
            )
            return flint.arb(fine) + flint.arb(0, abs(fine - coarse) + 4e-16 * max(abs(fine), 1e-300) + 1e-300)

    def slope(self, u: float) -> flint.arb:
        """kappa(u) = D(1 - u) / (1 - u), with kappa(1) = k'(1)."""
        z = 1.0 - u
        if z == 0.0:
            return self.k1p
        with working_bits(BITS):
            return self.deficit(z) / flint.arb(z)

    def _value(self, u: flint.arb, kappa: flint.arb) -> flint.arb:
        with working_bits(BITS):
            beta, d, one = self.beta, self.d, flint.arb(1)
            z = one - u
            q = d - 2 + u * u - beta * u * (one - u * u)
            h = self.k1 * ((d - 2 - u) + beta * z * (one + u)) - kappa * q
            return (-beta * z).exp() * h / self._phi(z)

    def _phi(self, z: flint.arb) -> flint.arb:
        """phi(beta z) over the ball z: phi is decreasing on [0, inf) with phi(0) = 1."""
        with working_bits(BITS):
            y = self.beta * z

            def at(value: flint.arb) -> flint.arb:
                if value.is_zero():
                    return flint.arb(1)
                return (1 - (-value).exp()) / value

            return at(flint.arb(y.lower())).union(at(flint.arb(y.upper())))

    def point(self, u: float) -> flint.arb:
        return self._value(flint.arb(u), self.slope(u))

    def enclose(self, a: float, b: float) -> flint.arb:
        with working_bits(BITS):
            u = flint.arb(a).union(flint.arb(b))
            if a >= -self.spec.dim * self.spec.sigma_u**2:
                kappa = self.slope(a).union(self.slope(b))  # secant slope of a convex k increases with u
            else:
                mid, half = 0.5 * (a + b), 0.5 * (b - a)
                deficit = self.deficit(1.0 - mid) + flint.arb(0, 1) * self.k1p * half  # |k'| <= k'(1)
                kappa = deficit / (1 - u)
            return self._value(u, kappa)


def lambda_bar_prime(
    act: str, d: int, sigma_u: float = 0.0, sigma_w: float = 0.0, beta: float = 1.0, tol: float = 1e-7
) -> CertifiedInfimum:
    """Enclosure lower <= lambda_bar' <= upper of lambda_bar' = -inf_{u in [-1, 1]} F(u), width <= ``tol``.

    ``argmin`` is the u where inf F was attained; ``rigorous`` is False when kernel values carry only the
    quadrature's a-posteriori error (activations other than ReLU and linear).
    """
    rate = EnergyRate(KernelSpec(act, d, sigma_u, sigma_w), beta)
    lower, upper, argmin, evaluations = certified_infimum(rate.enclose, rate.point, -1.0, 1.0, tol)
    with working_bits(BITS):
        return CertifiedInfimum(
            lower=to_mpf(flint.arb(-upper)),
            upper=to_mpf(flint.arb(-lower)),
            argmin=argmin,
            pieces=evaluations // 2,
            rigorous=rate.rigorous,
        )


__all__ = ["CertifiedInfimum", "EnergyRate", "attention_energy_rate", "certified_infimum", "lambda_bar_prime"]
