"""Where the overlap ends: probabilities from the scale function of the 1-D overlap diffusion.

For ``d rho = b dt + sqrt(a) dB`` on (-1, 1) with natural ends, the scale density is
``s(rho) = exp(int_0^rho q)``, ``q = -2 b / a``, and

    P(rho_t -> -1 | rho_0) = int_{rho_0}^{1} s / int_{-1}^{1} s,

which is 0 when s is not integrable at -1 (the antipodal end is then not attracting).

Two independent evaluations (they share only the derived q):
  ``p_antipodal``         the singular parts are split off, q = c_+/(1-rho) + c_-/(1+rho) + R(rho)
                          with R analytic on [-1, 1], so s = (1-rho)^(-c_+) (1+rho)^(c_-) exp(int_0^rho R);
                          int R comes from a Chebyshev expansion integrated term by term, and the outer
                          integrals from tanh-sinh quadrature of the factored integrand.
  ``p_antipodal_nested``  tanh-sinh quadrature of exp(int_0^rho q) with the inner integral itself computed
                          by tanh-sinh quadrature of the unsplit q (slow; the cross-check).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import mpmath
import numpy as np
import sympy as sp
from scipy.integrate import quad

from .._calculus import d
from .._common import working_digits
from .._models import beta
from .overlap import overlap_sde, rho

GUARD_DIGITS = 15


@dataclass(frozen=True)
class ScaleDecomposition:
    """``q = -2b/a = c_plus/(1 - rho) + c_minus/(1 + rho) + regular`` (sympy, in rho and the model symbols)."""

    q: sp.Expr
    c_plus: sp.Expr
    c_minus: sp.Expr
    regular: sp.Expr


@cache
def scale_decomposition(model: str = "fedorov") -> ScaleDecomposition:
    drift, diffusion = overlap_sde(model)
    q = sp.simplify(-2 * drift / diffusion)
    c_plus = sp.simplify(sp.limit(q * (1 - rho), rho, 1, "-"))
    c_minus = sp.simplify(sp.limit(q * (1 + rho), rho, -1, "+"))
    regular = q - c_plus / (1 - rho) - c_minus / (1 + rho)
    return ScaleDecomposition(q=q, c_plus=c_plus, c_minus=c_minus, regular=regular)


def _validate(d_value, beta_value, rho0) -> None:
    if isinstance(d_value, bool) or not isinstance(d_value, int) or d_value < 2:
        raise ValueError(f"d must be an integer >= 2, got {d_value!r}")
    if not mpmath.isfinite(beta_value):
        raise ValueError(f"beta must be finite, got {beta_value!r}")
    if not -1 < rho0 < 1:
        raise ValueError(f"rho0 must be in (-1, 1), got {rho0!r}")


def _end_exponents(d_value: int, beta_value, digits: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """``(c_+, c_-)`` of model F's scale decomposition at (d, beta), to ``digits`` digits."""
    parts = scale_decomposition("fedorov")
    sub = {d: d_value, beta: sp.nsimplify(beta_value)}
    return mpmath.mpf(sp.N(parts.c_plus.subs(sub), digits)), mpmath.mpf(sp.N(parts.c_minus.subs(sub), digits))


def _numeric(expr: sp.Expr, d_value: int, beta_value):
    return sp.lambdify(rho, expr.subs({d: d_value, beta: sp.nsimplify(beta_value)}), "mpmath")


class ChebyshevAntiderivative:
    """``x -> int_0^x f`` on [-1, 1] from f's Chebyshev series at first-kind nodes (adaptive degree)."""

    def __init__(self, f, tol, degree: int = 64, max_degree: int = 4096):
        while True:
            coeffs = self._coefficients(f, degree)
            tail = max(abs(c) for c in coeffs[-8:])
            if tail < tol * max(1, max(abs(c) for c in coeffs)) or degree >= max_degree:
                break
            degree *= 2
        if tail >= tol * max(1, max(abs(c) for c in coeffs)):
            raise ArithmeticError(f"Chebyshev series did not converge at degree {degree}")
        self.degree = degree
        n = len(coeffs)
        c = coeffs + [mpmath.mpf(0), mpmath.mpf(0)]
        self.anti = [mpmath.mpf(0)] + [(c[k - 1] * (2 if k == 1 else 1) - c[k + 1]) / (2 * k) for k in range(1, n + 1)]
        self.at_zero = self._clenshaw(self.anti, mpmath.mpf(0))

    @staticmethod
    def _coefficients(f, n: int) -> list:
        nodes = [mpmath.pi * (j + mpmath.mpf(1) / 2) / n for j in range(n)]
        values = [f(mpmath.cos(theta)) for theta in nodes]
        # Convention f = c_0/2 + sum_k c_k T_k; store c_0 halved so f = sum_k c_k T_k.
        coeffs = [2 * mpmath.fsum(v * mpmath.cos(k * theta) for v, theta in zip(values, nodes)) / n for k in range(n)]
        coeffs[0] /= 2
        return coeffs

    @staticmethod
    def _clenshaw(coeffs, x):
        b1 = b2 = mpmath.mpf(0)
        for c in reversed(coeffs[1:]):
            b1, b2 = 2 * x * b1 - b2 + c, b1
        return x * b1 - b2 + coeffs[0]

    def __call__(self, x):
        return self._clenshaw(self.anti, x) - self.at_zero


@dataclass(frozen=True)
class PowerWeight:
    """``w(rho) = (1 + rho)^minus (1 - rho)^plus`` with exponents > -1 (integrable at both ends).

    ``integral(Q, a, b)`` computes ``int_a^b w exp(Q)`` with the power singularities removed exactly:
    on a piece touching -1, ``1 + rho = u^(1/(1+minus))`` turns ``(1 + rho)^minus d rho`` into
    ``du / (1 + minus)`` (likewise at +1), leaving a bounded integrand for tanh-sinh quadrature.
    """

    minus: mpmath.mpf
    plus: mpmath.mpf

    def _piece(self, log_g, a, b):
        one = mpmath.mpf(1)
        if a == -1:
            p = 1 + self.minus
            return mpmath.quad(
                lambda u: mpmath.exp(log_g(-1 + u ** (one / p)) + self.plus * mpmath.log(2 - u ** (one / p))) / p,
                [0, (1 + b) ** p],
            )
        if b == 1:
            p = 1 + self.plus
            return mpmath.quad(
                lambda u: mpmath.exp(log_g(1 - u ** (one / p)) + self.minus * mpmath.log(2 - u ** (one / p))) / p,
                [0, (1 - a) ** p],
            )
        return mpmath.quad(
            lambda x: mpmath.exp(log_g(x) + self.minus * mpmath.log1p(x) + self.plus * mpmath.log1p(-x)), [a, b]
        )

    def integral(self, log_g, a, b):
        """``int_a^b (1+rho)^minus (1-rho)^plus exp(log_g(rho)) d rho`` for -1 <= a < b <= 1."""
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        cuts = [a] + [c for c in (mpmath.mpf(-0.5), mpmath.mpf(0.5)) if a < c < b] + [b]
        return mpmath.fsum(self._piece(log_g, lo, hi) for lo, hi in zip(cuts, cuts[1:]))


def p_antipodal(d_value: int, beta_value, rho0, dps: int = 30) -> mpmath.mpf:
    """P(rho -> -1 | rho_0) for two tokens of model F (0 where the antipodal end is not attracting)."""
    _validate(d_value, beta_value, rho0)
    parts = scale_decomposition("fedorov")
    with working_digits(dps + GUARD_DIGITS):
        c_plus, c_minus = _end_exponents(d_value, beta_value, dps + GUARD_DIGITS)
        if c_minus <= -1:
            return mpmath.mpf(0)
        if -c_plus <= -1:
            raise ArithmeticError("the collapse end is not attracting: P(antipodal) is not given by this formula")
        regular = _numeric(parts.regular, d_value, beta_value)
        integral_r = ChebyshevAntiderivative(regular, tol=mpmath.mpf(10) ** -(dps + 5))

        weight = PowerWeight(c_minus, -c_plus)
        r0 = mpmath.mpf(rho0)
        upper = weight.integral(integral_r, r0, 1)
        lower = weight.integral(integral_r, -1, r0)
        result = upper / (upper + lower)
    with working_digits(dps):
        return +result


def gauss_jacobi(n: int, alpha, beta_, dps: int):
    """Nodes and weights of n-point Gauss-Jacobi quadrature for (1-x)^alpha (1+x)^beta on [-1, 1].

    Double-precision nodes (scipy) refined by Newton's method on the three-term recurrence at ``dps``
    digits; weights from the closed form with P_n'. Exact for polynomials of degree 2n - 1.
    """
    from scipy.special import roots_jacobi

    with working_digits(dps):
        a, b = mpmath.mpf(alpha), mpmath.mpf(beta_)

        def p_and_dp(x):
            p0, p1 = mpmath.mpf(1), (a - b) / 2 + (a + b + 2) * x / 2
            for k in range(2, n + 1):
                c = 2 * k + a + b
                p0, p1 = (
                    p1,
                    ((c - 1) * (c * (c - 2) * x + a * a - b * b) * p1 - 2 * (k + a - 1) * (k + b - 1) * c * p0)
                    / (2 * k * (k + a + b) * (c - 2)),
                )
            dp = ((n + a + b + 1) / 2) * _jacobi_value(n - 1, a + 1, b + 1, x)
            return p1, dp

        start, _ = roots_jacobi(n, float(alpha), float(beta_))
        nodes = []
        for x0 in start:
            x = mpmath.mpf(x0)
            for _ in range(60):
                value, slope = p_and_dp(x)
                step = value / slope
                x -= step
                if abs(step) < mpmath.mpf(10) ** (-dps):
                    break
            nodes.append(x)
        const = (
            2 ** (a + b + 1)
            * mpmath.gamma(n + a + 1)
            * mpmath.gamma(n + b + 1)
            / (mpmath.gamma(n + a + b + 1) * mpmath.factorial(n))
        )
        weights = [const / ((1 - x * x) * p_and_dp(x)[1] ** 2) for x in nodes]
    return nodes, weights


def _jacobi_value(n: int, a, b, x):
    if n == 0:
        return mpmath.mpf(1)
    p0, p1 = mpmath.mpf(1), (a - b) / 2 + (a + b + 2) * x / 2
    for k in range(2, n + 1):
        c = 2 * k + a + b
        p0, p1 = (
            p1,
            ((c - 1) * (c * (c - 2) * x + a * a - b * b) * p1 - 2 * (k + a - 1) * (k + b - 1) * c * p0)
            / (2 * k * (k + a + b) * (c - 2)),
        )
    return p1


def p_antipodal_gauss(d_value: int, beta_value, rho0, dps: int = 30, nodes: int = 120) -> mpmath.mpf:
    """The same probability by Gauss quadrature (the cross-check of ``p_antipodal``).

    ``int_{-1}^{1} s`` by Gauss-Jacobi with the weight (1+rho)^{c_-} (1-rho)^{-c_+}, ``int_{-1}^{rho0} s``
    by Gauss-Jacobi on [-1, rho0] with the weight (1+rho)^{c_-}; ``int_0^x R`` at every node by
    Gauss-Legendre. P = (total - lower) / total.
    """
    _validate(d_value, beta_value, rho0)
    parts = scale_decomposition("fedorov")
    work = dps + GUARD_DIGITS
    with working_digits(work):
        c_plus, c_minus = _end_exponents(d_value, beta_value, work)
        if c_minus <= -1:
            return mpmath.mpf(0)
        regular = _numeric(parts.regular, d_value, beta_value)
        leg_x, leg_w = gauss_jacobi(nodes, 0, 0, work)

        def integral_r(x):
            half = x / 2
            return half * mpmath.fsum(w * regular(half * (t + 1)) for t, w in zip(leg_x, leg_w))

        x_all, w_all = gauss_jacobi(nodes, -c_plus, c_minus, work)
        total = mpmath.fsum(w * mpmath.exp(integral_r(x)) for x, w in zip(x_all, w_all))
        r0 = mpmath.mpf(rho0)
        scale = (1 + r0) / 2
        x_low, w_low = gauss_jacobi(nodes, 0, c_minus, work)
        lower = scale ** (c_minus + 1) * mpmath.fsum(
            w * (1 - y) ** (-c_plus) * mpmath.exp(integral_r(y))
            for x, w in zip(x_low, w_low)
            for y in [-1 + scale * (x + 1)]
        )
        result = (total - lower) / total
    with working_digits(dps):
        return +result


@cache
def _double_parts():
    """c_+(d, beta), c_-(d, beta) and R(rho, d, beta) of the scale decomposition as numpy functions (compiled
    once: substituting and lambdifying at every call cost more than the quadrature)."""
    parts = scale_decomposition("fedorov")
    return (
        sp.lambdify((d, beta), parts.c_plus, "numpy"),
        sp.lambdify((d, beta), parts.c_minus, "numpy"),
        sp.lambdify((rho, d, beta), parts.regular, "numpy"),
    )


def p_antipodal_double(d_value: int, beta_value: float, rho0, nodes: int = 200, diffusion_factor: float = 1.0):
    """Double-precision P(antipodal) at many rho_0 at once (for plots and Monte Carlo comparisons).

    The same decomposition as ``p_antipodal``; int_0^x R by Gauss-Legendre with ``nodes`` points, the
    outer integrals by QUADPACK with the algebraic weights (1+rho)^{c_-} (1-rho)^{-c_+} handled exactly.
    ``diffusion_factor`` multiplies the overlap diffusion's coefficient a (so q = -2b/a is divided by it): the
    probability a near-miss claim predicts.
    """

    rho0 = np.atleast_1d(np.asarray(rho0, dtype=np.float64))
    _validate(d_value, beta_value, float(rho0[0]))
    if not diffusion_factor > 0:
        raise ValueError(f"diffusion_factor must be positive, got {diffusion_factor!r}")
    end_plus, end_minus, regular = _double_parts()
    c_plus = float(end_plus(d_value, beta_value)) / diffusion_factor
    c_minus = float(end_minus(d_value, beta_value)) / diffusion_factor
    if c_minus <= -1:
        return np.zeros_like(rho0)
    t, w = np.polynomial.legendre.leggauss(nodes)

    def log_g(x):
        return 0.5 * x * np.dot(w, regular(0.5 * x * (t + 1), d_value, beta_value)) / diffusion_factor

    def lower(r0, quiet=0):  # int_{-1}^{r0} (1+rho)^{c_-} [(1-rho)^{-c_+} e^{Q}]
        return quad(
            lambda x: (1 - x) ** (-c_plus) * np.exp(log_g(x)),
            -1,
            r0,
            weight="alg",
            wvar=(c_minus, 0),
            epsabs=0,
            epsrel=1e-12,
            limit=200,
            full_output=quiet,  # non-zero: QUADPACK's notice is returned, not warned
        )[0]

    def upper(r0, quiet=0):
        return quad(
            lambda x: (1 + x) ** c_minus * np.exp(log_g(x)),
            r0,
            1,
            weight="alg",
            wvar=(0, -c_plus),
            epsabs=0,
            epsrel=1e-12,
            limit=200,
            full_output=quiet,  # non-zero: QUADPACK's notice is returned, not warned
        )[0]

    # Each quadrature touches only its own singular end: split the total at 0.
    total = lower(0.0) + upper(0.0)
    out = np.empty_like(rho0)
    # Within ~1e-15 of an end the tiny interval triggers QUADPACK's round-off notice; the value there is 0 or 1 to
    # double precision and is checked below. Quiet by full_output, not warnings.catch_warnings: the filters are
    # process-wide, and studies run side by side in threads (their notices leaked).
    for i, r0 in enumerate(rho0):
        out[i] = 1 - lower(r0, 1) / total if r0 <= 0 else upper(r0, 1) / total
    if not np.all((out >= -1e-12) & (out <= 1 + 1e-12)):
        raise ArithmeticError(f"P(antipodal) out of [0, 1]: {out}")
    return np.clip(out, 0.0, 1.0)
