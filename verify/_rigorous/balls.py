"""Ball arithmetic (python-flint's arb) as a context for closed forms written once.

A closed form written against a context ``ctx`` (``ctx.mpf``, ``ctx.exp``, ``ctx.sqrt``, ``ctx.log`` and the
arithmetic operators) evaluates to a number with ``ctx = mpmath.mp`` and to a certified enclosure with
``ctx = BALLS``: every value is an arb ball [mid +- rad] that contains the exact result, at flint's working precision
(``verify._common.working_bits``). A ball comparison is True only when it holds for every point of both balls, so
``(x > 0) is True`` asserts a sign and anything undecided reads False.
"""

from __future__ import annotations

import flint
import mpmath
from mpmath.libmp import from_man_exp


def to_mpf(value: flint.arb) -> mpmath.mpf:
    """An exact arb (radius 0) as an mpmath number, without rounding. Built from its mantissa and exponent directly:
    mpmath's working precision is process-wide, and raising it here would change another thread's arithmetic."""
    if not value.is_exact():
        raise ValueError("only an exact ball converts without rounding")
    man, exp = value.man_exp()
    return mpmath.mp.make_mpf(from_man_exp(int(man), int(exp)))


def to_ball(value) -> flint.arb:
    """An int, float, mpmath number or arb as an arb, without rounding (a float or mpf is a dyadic rational)."""
    if isinstance(value, flint.arb):
        return value
    if isinstance(value, mpmath.mpf):
        sign, man, exp, _ = value._mpf_
        if not man and exp:
            raise ValueError(f"only finite numbers convert to a ball, got {value!r}")
        return flint.arb(((-1) ** sign * int(man), int(exp)))  # (mantissa, exponent): exact at any precision
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a ball is made from an int, float, mpmath.mpf or arb, got {type(value).__name__}")
    return flint.arb(value)


# The functions a closed form may call, each on a ball made by ``to_ball``: ``BALLS`` offers them, and
# ``certified.arb_function`` hands them to sympy's lambdify.
ARB_FUNCTIONS = {
    name: (lambda x, name=name: getattr(to_ball(x), name)())
    for name in ("exp", "log", "sqrt", "cosh", "sinh", "tanh", "acosh")
}


class BallContext:
    """The context ``BALLS``: the operations a closed form takes from ``ctx``, in ball arithmetic (``ARB_FUNCTIONS``;
    ``sqrt`` is NaN-valued, undecided in every comparison, when the ball reaches below 0)."""

    mpf = staticmethod(to_ball)
    exp = staticmethod(ARB_FUNCTIONS["exp"])
    log = staticmethod(ARB_FUNCTIONS["log"])
    sqrt = staticmethod(ARB_FUNCTIONS["sqrt"])

    @staticmethod
    def box(lo, hi) -> flint.arb:
        """A ball that contains the interval [lo, hi]."""
        return to_ball(lo).union(to_ball(hi))

    @staticmethod
    def key(x: flint.arb) -> tuple[int, int, int, int]:
        """The ball's exact midpoint and radius as integers (mantissa, exponent): a key for caching by ball."""
        (mid_man, mid_exp), (rad_man, rad_exp) = x.mid().man_exp(), x.rad().man_exp()
        return int(mid_man), int(mid_exp), int(rad_man), int(rad_exp)

    def __repr__(self) -> str:
        return "BALLS"


BALLS = BallContext()
