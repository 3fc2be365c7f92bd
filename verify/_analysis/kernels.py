"""The covariance kernel of model A's MLP field, its constants k(1), k'(1), and the exponents they fix.

Model A's MLP block G(y) = m^{-1/2} W act(U y / sqrt(d) + b) + c has E[G(x) G(y)^T] = K(x, y) I_d with
(docs/models.md section 2)

    K(x, y) = E[act(Z_1) act(Z_2)] + sigma_W^2,   (Z_1, Z_2) centred Gaussian,
    Var Z_i = s^2 = 1/d + sigma_U^2,   Cov(Z_1, Z_2) = <x, y>/d + sigma_U^2,

so on the sphere K(x, y) = k(u), u = <x, y>, with correlation r(u) = (u/d + sigma_U^2) / s^2.

Facts used here and by the certified bounds (``verify._rigorous.synchronisation``):
  Price's theorem      k'(u) = (1/d) E[act'(Z_1) act'(Z_2)];  k(1) = E act(Z)^2 + sigma_W^2,
                       k'(1) = (1/d) E act'(Z)^2.
  Mehler's expansion   E[f(Z_1) f(Z_2)] = sum_n c_n^2 r^n, so every derivative of k is >= 0 where
                       r >= 0 (in particular on u >= 0) and |k^(j)(u)| <= k^(j)(1) on [-1, 1].
  ReLU (arc-cosine)    E[relu(Z_1) relu(Z_2)] = s^2 (sin t + (pi - t) cos t) / (2 pi), cos t = r.

Numerically, k is evaluated by two-dimensional Gauss-Hermite quadrature (closed forms for ReLU and the
linear activation), written through the deficit D(z) = k(1) - k(1 - z), z = 1 - u = |x - y|^2 / 2,
which stays accurate to full relative precision for nearby points (the two-point motion of close
pairs needs exactly this difference).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import mpmath
import numpy as np
from numpy.polynomial import Chebyshev
from numpy.polynomial.hermite import hermgauss

from .._calculus import d as d_symbol
from .._common import check_int, check_real, working_digits
from .._models import activation
from .two_point import agazzi_two_point, k1p
from .two_point import k1 as k1_symbol

GAUSS_HERMITE_NODES = 96
CHEBYSHEV_DEGREE = 64


@dataclass(frozen=True)
class KernelSpec:
    """An MLP field: activation, dimension d >= 2, bias standard deviations sigma_U, sigma_W >= 0."""

    activation: str
    dim: int
    sigma_u: float = 0.0
    sigma_w: float = 0.0

    def __post_init__(self) -> None:
        activation(self.activation)
        check_int("dim", self.dim, minimum=2)
        check_real("sigma_u", self.sigma_u, minimum=0.0)
        check_real("sigma_w", self.sigma_w, minimum=0.0)

    @property
    def variance(self) -> float:
        """s^2 = 1/d + sigma_U^2, the variance of each pre-activation."""
        return 1.0 / self.dim + self.sigma_u**2

    @property
    def odd(self) -> bool:
        """True when the field is a.s. odd (odd activation, no biases): G(-x) = -G(x)."""
        return activation(self.activation).odd and self.sigma_u == 0 and self.sigma_w == 0

    def correlation_gap(self, z):
        """1 - r(1 - z) = z / (d s^2), the correlation deficit of two points at z = 1 - u."""
        return z / (self.dim * self.variance)


def gaussian_expectation(f, variance, kinks=(), dps: int = 30) -> mpmath.mpf:
    """``E f(Z)`` for Z ~ N(0, variance), by tanh-sinh quadrature split at ``kinks``."""
    with working_digits(dps + 10):
        sd = mpmath.sqrt(mpmath.mpf(variance))
        points = [-mpmath.inf, *sorted(mpmath.mpf(k) / sd for k in kinks), mpmath.inf]
        # the density's constant outside the integral: half the time of mpmath.npdf per node, the same 30 digits
        value = mpmath.quad(lambda g: f(sd * g) * mpmath.exp(-g * g / 2), points) / mpmath.sqrt(2 * mpmath.pi)
    return +value


@cache  # a quadrature of 0.2-0.5 s that the studies of one process ask for again and again
def k_one(spec: KernelSpec, dps: int = 30) -> mpmath.mpf:
    """k(1) = E act(Z)^2 + sigma_W^2, Z ~ N(0, 1/d + sigma_U^2)."""
    act = activation(spec.activation)
    with working_digits(dps):
        return (
            gaussian_expectation(lambda x: act.mpmath(x) ** 2, spec.variance, act.kinks, dps)
            + mpmath.mpf(spec.sigma_w) ** 2
        )


@cache
def k_one_prime(spec: KernelSpec, dps: int = 30) -> mpmath.mpf:
    """k'(1) = (1/d) E act'(Z)^2 (Price's theorem at u = 1)."""
    act = activation(spec.activation)
    with working_digits(dps):
        return gaussian_expectation(lambda x: act.mpmath_derivative(x) ** 2, spec.variance, act.kinks, dps) / spec.dim


def exponents(d, k1, k1_prime) -> dict[str, float]:
    """lambda_1 and lambda_bar from the symbolic two-point analysis (``verify._analysis.two_point``) at numbers."""
    two_point = agazzi_two_point()
    # floats: sympy converts an mpf at mpmath's process-wide precision, which another thread may have changed
    values = {d_symbol: d, k1_symbol: float(k1), k1p: float(k1_prime)}
    return {"lambda_1": float(two_point.lambda_1.subs(values)), "lambda_bar": float(two_point.lambda_bar.subs(values))}


def activation_constants(act: str, d: int, sigma_u: float = 0.0, sigma_w: float = 0.0) -> dict[str, float]:
    """``{k1, k1_prime, lambda_1, lambda_bar}`` for the MLP field (quadrature at 30 digits).

    lambda_1 = ((d-3) k'(1) - (d-1) k(1)) / 2 (almost-sure two-point exponent) and
    lambda_bar = (d-1) k'(1) - (d-3) k(1) (mean-square exponent) come from the derived overlap SDE.
    """
    spec = KernelSpec(act, d, sigma_u, sigma_w)
    k1, k1p = k_one(spec), k_one_prime(spec)
    return {"k1": float(k1), "k1_prime": float(k1p), **exponents(d, k1, k1p)}


@lru_cache(maxsize=8)
def _hermite_rule(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes g and weights w with sum_i w_i f(g_i) ~ E f(G), G ~ N(0, 1)."""
    x, w = hermgauss(nodes)
    return np.sqrt(2.0) * x, w / np.sqrt(np.pi)


def _correlated_pair(spec: KernelSpec, z, nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Hermite product rule for (Z_1, Z_2) at two points with z = 1 - <x, y>:
    Z_1 = s g_1, Z_2 = s (r g_1 + q g_2), r = 1 - gap, q = sqrt(1 - r^2). Returns (weights, Z_1, Z_2)
    with a leading shape of ``z`` and two trailing node axes."""
    g, w = _hermite_rule(nodes)
    s = np.sqrt(spec.variance)
    gap = np.asarray(spec.correlation_gap(np.asarray(z, dtype=np.float64)))[..., None, None]
    r, q = 1.0 - gap, np.sqrt(gap * (2.0 - gap))
    return w[:, None] * w[None, :], s * g[:, None], s * (r * g[:, None] + q * g[None, :])


def deficit_quadrature(spec: KernelSpec, z, nodes: int = GAUSS_HERMITE_NODES) -> np.ndarray:
    """D(z) = k(1) - k(1 - z) by Gauss-Hermite in (g_1, g_2), Z_1 = s g_1, Z_2 = s (r g_1 + q g_2).

    Written as E[act(Z_1) (act(Z_1) - act(Z_2))] so that nearby points lose no relative precision.
    """
    act = activation(spec.activation).numpy
    weights, z1, z2 = _correlated_pair(spec, z, nodes)
    a1 = act(z1)
    return np.sum(weights * a1 * (a1 - act(z2)), axis=(-1, -2))


def k_one_quadrature(spec: KernelSpec, nodes: int = GAUSS_HERMITE_NODES) -> float:
    act = activation(spec.activation).numpy
    g, w = _hermite_rule(nodes)
    return float(np.sum(w * act(np.sqrt(spec.variance) * g) ** 2) + spec.sigma_w**2)


def kernel_derivative_quadrature(spec: KernelSpec, u, nodes: int = GAUSS_HERMITE_NODES) -> np.ndarray:
    """k'(u) = (1/d) E[act'(Z_1) act'(Z_2)] (Price's theorem), Gauss-Hermite."""
    der = activation(spec.activation).numpy_derivative
    weights, z1, z2 = _correlated_pair(spec, 1.0 - np.asarray(u, dtype=np.float64), nodes)
    return np.sum(weights * der(z1) * der(z2), axis=(-1, -2)) / spec.dim


def relu_deficit(spec: KernelSpec, z) -> np.ndarray:
    """ReLU's D(z) from the arc-cosine kernel: s^2 (pi (1 - r) + t r - sin t) / (2 pi), cos t = r.

    t = 2 asin(sqrt((1 - r)/2)) keeps full relative precision as r -> 1.
    """
    gap = spec.correlation_gap(np.asarray(z, dtype=np.float64))
    t = 2.0 * np.arcsin(np.sqrt(gap / 2.0))
    return spec.variance * (np.pi * gap + (t - np.sin(t)) - t * gap) / (2.0 * np.pi)


@dataclass(frozen=True, eq=False)
class Kernel:
    """k on [-1, 1] for arrays: ``k(u) = k1 - deficit(1 - u)``.

    ``deficit`` is a closed form (ReLU, linear) or ``z * kappa(z)`` with kappa the secant slope
    (k(1) - k(1-z))/z interpolated by a Chebyshev series on [0, 2] from Gauss-Hermite values, truncated to the
    lowest degree that is as accurate (``_shortest``);
    ``interpolation_error`` is the largest difference to direct quadrature at off-grid test points.
    """

    spec: KernelSpec
    k1: float
    k1_prime: float
    slope: Chebyshev | None
    interpolation_error: float

    def deficit(self, z) -> np.ndarray:
        z = np.clip(np.asarray(z, dtype=np.float64), 0.0, 2.0)
        if self.spec.activation == "relu":
            return relu_deficit(self.spec, z)
        if self.spec.activation == "linear":
            return z / self.spec.dim
        return z * self.slope(z)

    def __call__(self, u) -> np.ndarray:
        return self.k1 - self.deficit(1.0 - np.asarray(u, dtype=np.float64))


@lru_cache(maxsize=64)
def kernel(spec: KernelSpec) -> Kernel:
    """The numerical kernel of ``spec`` (cached)."""
    k1 = float(k_one(spec, dps=20))
    k1p = float(k_one_prime(spec, dps=20))
    if spec.activation in ("relu", "linear"):
        return Kernel(spec, k1, k1p, None, 0.0)

    def slope(z):
        return deficit_quadrature(spec, z) / z

    series = Chebyshev.interpolate(slope, CHEBYSHEV_DEGREE, domain=[0.0, 2.0])
    fit = np.linspace(0.0, 2.0, 203)[1:]
    series = _shortest(series, fit, slope(fit) * fit, scale=abs(k1))
    # the error is measured on points the degree was not chosen on
    test = (fit[:-1] + fit[1:]) / 2.0
    error = float(np.max(np.abs(series(test) * test - slope(test) * test)))
    return Kernel(spec, k1, k1p, series, error)


def _shortest(series: Chebyshev, points: np.ndarray, exact: np.ndarray, scale: float) -> Chebyshev:
    """The lowest-degree truncation of ``series`` (the slope) whose deficit ``z * series(z)`` is as close to the direct
    quadrature ``exact`` at ``points`` as the whole series', or within 16 ulp of ``scale`` (k(1)).

    The slope's coefficients fall to the quadrature's rounding by degree 5-20 for the smooth activations; the rest
    fit that rounding, cost a Clenshaw pass each in every layer, and make the error no smaller. The floor is the
    quadrature's rounding, relative to k(1) (the size of k(u) = k(1) - deficit): the series' tail creeps down through
    it for sigmoid at d = 128 (6e-16 at degree 6, 1e-16 at degree 50)."""
    floor = 16.0 * np.finfo(np.float64).eps * scale
    full = float(np.max(np.abs(series(points) * points - exact)))
    for degree in range(series.degree() + 1):
        cut = series.cutdeg(degree)
        if float(np.max(np.abs(cut(points) * points - exact))) <= max(full, floor):
            return cut
    return series


TABLE_ACTIVATIONS = ("relu", "sigmoid", "tanh", "silu")
TABLE_DIMS = (5, 64, 128)
TABLE_SIGMAS = (0.0, 0.1)


def activation_table(activations=TABLE_ACTIVATIONS, dims=TABLE_DIMS, sigmas=TABLE_SIGMAS) -> list[dict]:
    """Rows of the paper's table: activation x (sigma_U = sigma_W) x d, with k1, k1_prime, lambda_1, lambda_bar."""
    return [
        {"activation": act, "sigma": sig, "d": d, **activation_constants(act, d, sig, sig)}
        for act in activations
        for sig in sigmas
        for d in dims
    ]


def format_activation_table(rows: list[dict]) -> str:
    """The table as Markdown: one row per (activation, sigma), four columns per d."""
    dims = sorted({row["d"] for row in rows})
    keys = ("k1", "k1_prime", "lambda_1", "lambda_bar")
    names = {"k1": "k(1)", "k1_prime": "k'(1)", "lambda_1": "lambda_1", "lambda_bar": "lambda_bar"}
    head = "| activation | sigma_U = sigma_W | " + " | ".join(f"{names[k]} (d={d})" for d in dims for k in keys) + " |"
    lines = [head, "|" + "---|" * (2 + len(dims) * len(keys))]
    groups: dict[tuple, dict] = {}
    for row in rows:
        groups.setdefault((row["activation"], row["sigma"]), {})[row["d"]] = row
    for (act, sig), by_d in groups.items():
        cells = [f"{by_d[d][k]:.8g}" for d in dims for k in keys]
        lines.append(f"| {act} | {sig:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = [
    "Kernel",
    "KernelSpec",
    "activation_constants",
    "activation_table",
    "deficit_quadrature",
    "exponents",
    "format_activation_table",
    "k_one",
    "k_one_prime",
    "kernel",
    "kernel_derivative_quadrature",
    "relu_deficit",
]
