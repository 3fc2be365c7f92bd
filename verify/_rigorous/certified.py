"""Certified numbers with ball arithmetic (python-flint's arb).

A claimed threshold is certified, not just computed: the closed form is evaluated in ball arithmetic
to give an enclosure [lo, hi], and the defining property is then checked rigorously at the
endpoints (the antipodal exponent is > 0 at lo and < 0 at hi, so by continuity the root lies in
[lo, hi]) and over the whole enclosure (the exponent's derivative is < 0 there, so the root is unique
in it). Every comparison is a ball comparison, True only when certain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import flint
import mpmath
import sympy as sp

from .._analysis import critical_beta_closed_form, fedorov_ends
from .._calculus import d, sigma
from .._common import working_bits, working_digits
from .._models import beta
from .balls import ARB_FUNCTIONS, to_mpf

ENCLOSURE_BITS = 53  # endpoints are then exact double-precision (and mpmath default) numbers
CHECK_BITS = 256


def arb_function(expr: sp.Expr, variables) -> Callable[..., flint.arb]:
    """A sympy expression as a function evaluated in ball arithmetic."""
    return sp.lambdify(variables, expr, modules=[ARB_FUNCTIONS])


@dataclass(frozen=True)
class CertifiedRoot:
    """An enclosure [lo, hi] of a root, with the certificate's three facts."""

    lo: mpmath.mpf
    hi: mpmath.mpf
    sign_at_lo: bool
    sign_at_hi: bool
    monotone: bool

    @property
    def certified(self) -> bool:
        return self.sign_at_lo and self.sign_at_hi and self.monotone

    @property
    def width(self) -> mpmath.mpf:
        return self.hi - self.lo


@cache
def _exponent_functions():
    """lambda_-(d, beta) and its beta-derivative at sigma = 1 (the sign does not depend on sigma)."""
    with working_digits(15):  # sympy's sign queries evalf at mpmath's process-wide precision: under the lock
        lam = fedorov_ends()[-1].growth_exponent.subs(sigma, 1)
        return arb_function(lam, (d, beta)), arb_function(sp.diff(lam, beta), (d, beta))


@cache
def _closed_form_function():
    with working_digits(15):  # as above
        return arb_function(critical_beta_closed_form(), d)


def certify_critical_beta(d_value: int) -> CertifiedRoot:
    """Certified enclosure of beta_c(d): lambda_-(lo) > 0 > lambda_-(hi) and lambda_-' < 0 on [lo, hi].

    For d = 3 the root is beta = 0 exactly (lambda_-(0) = 0 and lambda_- < 0 just above it).
    """
    lam_d, dlam_d = _exponent_functions()
    dv = flint.arb(d_value)

    def lam(x):
        return lam_d(dv, x)

    def dlam(x):
        return dlam_d(dv, x)

    with working_bits(ENCLOSURE_BITS):
        ball = flint.arb(_closed_form_function()(dv))
        lo, hi = ball.lower(), ball.upper()
    with working_bits(CHECK_BITS):
        if ball.is_zero():
            # The enclosure is the point 0: certified by lambda_-(0) = 0 exactly; lambda_- < 0 just above.
            tiny = flint.arb(2) ** -60
            zero = lam(flint.arb(0)).is_zero()
            return CertifiedRoot(mpmath.mpf(0), mpmath.mpf(0), zero, bool(lam(tiny) < 0), zero)
        return CertifiedRoot(to_mpf(lo), to_mpf(hi), bool(lam(lo) > 0), bool(lam(hi) < 0), bool(dlam(lo.union(hi)) < 0))


def critical_beta(d_value: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """Certified ``(lo, hi)`` enclosing beta_c(d) for model F (d >= 3), as mpmath numbers."""
    if isinstance(d_value, bool) or not isinstance(d_value, int) or d_value < 3:
        raise ValueError(
            f"d must be an integer >= 3 (for d = 2 the antipodal end attracts for every beta), got {d_value!r}"
        )
    root = certify_critical_beta(d_value)
    if not root.certified:
        raise ArithmeticError(f"could not certify the enclosure of beta_c({d_value}): {root}")
    return root.lo, root.hi
