"""pytest plugin (entry point ``pytest11``): check layer maps from your own test suite.

Fixture ``depth_limits`` gives ``assert_local_consistency``, ``assert_strong_order``, ``assert_weak_order`` and
``assert_same_weak_limit``
(the checks of ``convergence.api``) and ``assert_expansion_matches`` (``verify.check_limit`` on a sympy map). A ``fail`` fails the test with the table of levels, the fitted order,
its interval and the verdict; an ``inconclusive`` outcome is never a pass: it is reported as a skip whose
reason starts with ``INCONCLUSIVE`` (default) or as a failure with ``--depth-limits-inconclusive=fail``.
Markers: ``depth_limits_quick`` (seconds) and ``depth_limits_slow`` (minutes), to select with ``-m``.
"""

from __future__ import annotations

import pytest

from verify import check_limit
from verify.common import Verdict

from .api import (
    Outcome,
    check_local_consistency,
    check_same_weak_limit,
    check_strong_order,
    check_weak_order,
)

INCONCLUSIVE_MODES = ("skip", "fail")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("depth-limits")
    group.addoption("--depth-limits-inconclusive", choices=INCONCLUSIVE_MODES, default="skip",
                    help="report an inconclusive depth-limit check as a skip (default) or a failure")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "depth_limits_quick: a depth-limit check that takes seconds")
    config.addinivalue_line("markers", "depth_limits_slow: a depth-limit check that takes minutes")


def judge(outcome: Outcome, inconclusive: str = "skip") -> Outcome:
    """Return a passing outcome; fail the test on ``fail``; skip or fail it on ``inconclusive``."""
    if outcome.verdict == Verdict.FAIL:
        pytest.fail(outcome.table(), pytrace=False)
    if outcome.verdict == Verdict.INCONCLUSIVE:
        message = "INCONCLUSIVE (noise too large to decide; not a pass)\n" + outcome.table()
        if inconclusive == "fail":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return outcome


class DepthLimits:
    """The ``depth_limits`` fixture: assertion helpers over ``convergence.api``'s checks."""

    def __init__(self, inconclusive: str = "skip"):
        if inconclusive not in INCONCLUSIVE_MODES:
            raise ValueError(f"inconclusive must be one of {INCONCLUSIVE_MODES}, got {inconclusive!r}")
        self.inconclusive = inconclusive

    def assert_local_consistency(self, layer, sde, **options) -> Outcome:
        """One step of ``layer`` has the claimed drift and diffusion at the test states (to about 1%)."""
        return judge(check_local_consistency(layer, sde, **options), self.inconclusive)

    def assert_strong_order(self, layer, sde, order: float = 0.5, **options) -> Outcome:
        """``layer`` converges pathwise to ``sde`` with RMS order ``order`` (and to the same limit)."""
        return judge(check_strong_order(layer, sde, order=order, **options), self.inconclusive)

    def assert_weak_order(self, layer, observable, order: float = 1.0, **options) -> Outcome:
        """E observable(X^L) converges with weak order ``order`` in h."""
        return judge(check_weak_order(layer, observable, order=order, **options), self.inconclusive)

    def assert_same_weak_limit(self, first, second, observable, **options) -> Outcome:
        """``first`` and ``second`` have the same weak limit for ``observable``."""
        return judge(check_same_weak_limit(first, second, observable, **options), self.inconclusive)

    def assert_expansion_matches(self, step, drift, diffusion, tokens: int, dim: int, **options) -> dict:
        """The one-step expansion of the sympy map ``step`` gives the claimed drift and diffusion covariance
        (``verify.check_limit``: random points of the sphere, 30 digits)."""
        result = check_limit(step, drift, diffusion, tokens, dim, **options)
        if not result["consistent"]:
            pytest.fail("one-step expansion does not match the claimed SDE: largest differences "
                        f"drift {result['drift']:.3g}, covariance {result['covariance']:.3g}, order-sqrt(h) mean "
                        f"{result['first_order_mean']:.3g} (tolerance {result['tolerance']:.0e})", pytrace=False)
        return result


@pytest.fixture
def depth_limits(request: pytest.FixtureRequest) -> DepthLimits:
    return DepthLimits(request.config.getoption("--depth-limits-inconclusive"))
