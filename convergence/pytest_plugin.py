"""pytest plugin (entry point ``pytest11``): check layer maps from your own test suite.

Fixture ``depth_limits`` gives ``assert_local_consistency``, ``assert_strong_order``, ``assert_weak_limit``,
``assert_weak_order`` and ``assert_same_weak_limit`` (the checks of ``convergence._checks``), ``assert_limits_equal``
(``convergence.compare_limits``), ``assert_rejects`` (any of them must reject a claim the test knows is wrong) and
``assert_expansion_matches`` (``verify.check_limit`` on a sympy map). A ``fail`` fails the test with the table of
levels, the fitted order, its interval and the verdict;
an ``inconclusive`` outcome is never a pass: it is reported as a skip located at the test (its file and line), whose
reason starts with ``INCONCLUSIVE`` (default), or as a failure with ``--depth-limits-inconclusive=fail``.

Options: ``--depth-limits-paths FACTOR`` multiplies every check's paths (local consistency: samples) by FACTOR
(e.g. 4 to decide an inconclusive check, 0.25 for a smoke run); ``--depth-limits-report DIR`` writes each check's
report (JSON, Markdown, figure) to ``DIR/<test name>[-k]``. Markers: ``depth_limits_quick`` (seconds) and
``depth_limits_slow`` (minutes), to select with ``-m``.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from verify import check_limit
from verify._common import Verdict, check_real, file_stem

from ._checks import (
    Outcome,
    check_local_consistency,
    check_same_weak_limit,
    check_strong_order,
    check_weak_limit,
    check_weak_order,
    compare_limits,
)
from ._runtime import SEED_BLOCK

INCONCLUSIVE_MODES = ("skip", "fail")
# the checks ``assert_rejects`` runs, by name
CHECKS = {
    "local_consistency": check_local_consistency,
    "strong_order": check_strong_order,
    "weak_limit": check_weak_limit,
    "weak_order": check_weak_order,
    "same_weak_limit": check_same_weak_limit,
    "limits": compare_limits,
}
# the options ``--depth-limits-paths`` scales: a fixed size, or the staged looks' first size and budget
SAMPLE_OPTIONS = ("paths", "samples", "first", "first_look", "budget")  # (first_look: check_same_weak_limit's)
FIRST_LOOKS = ("first", "first_look")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("depth-limits")
    group.addoption(
        "--depth-limits-inconclusive",
        choices=INCONCLUSIVE_MODES,
        default="skip",
        help="report an inconclusive depth-limit check as a skip (default) or a failure",
    )
    group.addoption(
        "--depth-limits-paths",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="multiply the paths (local consistency: samples) of every depth-limit check by FACTOR > 0 (default 1)",
    )
    group.addoption(
        "--depth-limits-report",
        default=None,
        metavar="DIR",
        help="write each depth-limit check's report (JSON, Markdown, figure) under DIR",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "depth_limits_quick: a depth-limit check that takes seconds")
    config.addinivalue_line("markers", "depth_limits_slow: a depth-limit check that takes minutes")


def judge(outcome: Outcome, inconclusive: str = "skip", wanted: Verdict = Verdict.PASS) -> Outcome:
    """Return an outcome with the ``wanted`` verdict (pass, or fail for a claim the test knows is wrong); fail the
    test on the other decided verdict; skip or fail it on ``inconclusive`` (a skip is located at the calling test,
    not in this plugin). Every message's first line is the verdict and ``headline``: the map, the claim and the checks
    that decided; the check's table follows."""
    if outcome.verdict == Verdict.PASS and wanted == Verdict.FAIL:
        pytest.fail(
            "PASSED A WRONG CLAIM (the check cannot see this error at its settings: give it more samples or "
            f"a smaller target): {headline(outcome)}\n{outcome.table()}",
            pytrace=False,
        )
    if outcome.verdict == Verdict.FAIL and wanted == Verdict.PASS:
        pytest.fail(f"FAIL: {headline(outcome)}\n{outcome.table()}", pytrace=False)
    if outcome.verdict == Verdict.INCONCLUSIVE:
        message = f"INCONCLUSIVE (noise too large to decide; not a pass): {headline(outcome)}\n{outcome.table()}"
        if inconclusive == "fail":
            pytest.fail(message, pytrace=False)
        raise pytest.skip.Exception(message, _use_item_location=True)
    return outcome


NAMED = ("map", "sde", "first", "second")  # the configuration entries that name the maps and claims compared


def headline(outcome: Outcome) -> str:
    """What was compared and what decided, e.g. ``strong order of map 'EM block', sde 'OU'; decided by same_limit,
    strong_order`` (the claim checks whose verdict is the outcome's)."""
    named = {}
    for check in outcome.checks:
        named.update({key: check.config[key] for key in NAMED if key in check.config})
    deciding = sorted(
        {
            check.name + (f" [state={check.config['state']}]" if "state" in check.config else "")
            for check in outcome.checks
            if check.claim and check.verdict == outcome.verdict
        }
    )
    compared = ", ".join(f"{key} {value!r}" for key, value in named.items())
    return f"{outcome.title} of {compared}; decided by {', '.join(deciding) or 'no check'}"


def _scaled(check, options: dict, factor: float) -> dict:
    """``options`` with every sample-size option of ``check`` (given or default) multiplied by ``factor``."""
    if factor == 1.0:
        return options
    parameters = inspect.signature(check).parameters
    scaled = dict(options)
    for name in SAMPLE_OPTIONS:
        if name in parameters:
            value = options.get(name, parameters[name].default)
            # None: staged looks (their first size and budget are scaled instead); a non-number is another
            # parameter of that name (check_same_weak_limit's first map)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                scaled[name] = max(2, round(value * factor))
                if name in FIRST_LOOKS:  # a staged check's first look is a whole number of seed blocks
                    scaled[name] = SEED_BLOCK * max(1, round(value * factor / SEED_BLOCK))
    first = next((scaled[name] for name in FIRST_LOOKS if isinstance(scaled.get(name), int)), None)
    if first is not None and isinstance(scaled.get("budget"), int):
        scaled["budget"] = max(scaled["budget"], first)  # the budget is a look, at least the first
    return scaled


class DepthLimits:
    """The ``depth_limits`` fixture: assertion helpers over ``convergence._checks``' checks.

    ``paths_factor`` scales every check's paths (samples); ``report`` is a folder where each check writes its report
    under ``name`` (the test's name, with ``-2``, ``-3``, ... for a test's later checks)."""

    def __init__(
        self,
        inconclusive: str = "skip",
        paths_factor: float = 1.0,
        report: str | Path | None = None,
        name: str = "check",
    ):
        if inconclusive not in INCONCLUSIVE_MODES:
            raise ValueError(f"inconclusive must be one of {INCONCLUSIVE_MODES}, got {inconclusive!r}")
        self.inconclusive = inconclusive
        self.paths_factor = check_real("--depth-limits-paths", paths_factor, minimum=0.0, strict_minimum=True)
        self.report = None if report is None else Path(report)
        self.name = file_stem(name)
        self._written = 0

    def _run(self, check, *args, wanted: Verdict = Verdict.PASS, **options) -> Outcome:
        outcome = check(*args, **_scaled(check, options, self.paths_factor))
        if self.report is not None:
            self._written += 1
            suffix = "" if self._written == 1 else f"-{self._written}"
            outcome.write(self.report / f"{self.name}{suffix}")
        return judge(outcome, self.inconclusive, wanted)

    def assert_rejects(self, check: str, *args, **options) -> Outcome:
        """The check named ``check`` (a key of ``CHECKS``: "local_consistency", "strong_order", "weak_limit",
        "weak_order", "same_weak_limit", "limits"), called with ``args`` and ``options``, rejects a claim the test
        knows is wrong: a ``pass`` fails the test, an ``inconclusive`` outcome is handled as by every assertion."""
        if check not in CHECKS:
            raise ValueError(f"check must be one of {sorted(CHECKS)}, got {check!r}")
        return self._run(CHECKS[check], *args, wanted=Verdict.FAIL, **options)

    def assert_limits_equal(self, derived, claim, states=None, **options) -> Outcome:
        """Two limit SDEs (e.g. ``convergence.derive_limit`` of a torch block and a claim) have the same drift and
        diffusion covariance at ``states`` (``convergence.compare_limits``; deterministic, to ``rtol``)."""
        return self._run(compare_limits, derived, claim, *(() if states is None else (states,)), **options)

    def assert_local_consistency(self, layer, sde, **options) -> Outcome:
        """One step of ``layer`` has the claimed drift and diffusion at the test states (to about 1%)."""
        return self._run(check_local_consistency, layer, sde, **options)

    def assert_strong_order(self, layer, sde, order: float = 0.5, **options) -> Outcome:
        """``layer`` converges pathwise to ``sde`` with RMS order ``order`` (and to the same limit)."""
        return self._run(check_strong_order, layer, sde, order=order, **options)

    def assert_weak_limit(self, layer, sde, observable, **options) -> Outcome:
        """The law of ``layer`` converges to the law of ``sde`` for ``observable`` (weak order and ``claim_limit``)."""
        return self._run(check_weak_limit, layer, sde, observable, **options)

    def assert_weak_order(self, layer, observable, order: float = 1.0, **options) -> Outcome:
        """E observable(X^L) converges with weak order ``order`` in h."""
        return self._run(check_weak_order, layer, observable, order=order, **options)

    def assert_same_weak_limit(self, first, second, observable, **options) -> Outcome:
        """``first`` and ``second`` have the same weak limit for ``observable``."""
        return self._run(check_same_weak_limit, first, second, observable, **options)

    def assert_expansion_matches(self, step, drift, diffusion, tokens: int, dim: int, noise, **options):
        """The one-step expansion of the sympy map ``step(xs, dw, h)`` gives the claimed drift and diffusion
        covariance (``verify.check_limit``: random points of the sphere, 30 digits); on failure the entries that
        differ most are printed, derived beside claimed."""
        result = check_limit(step, drift, diffusion, tokens, dim, noise, **options)
        if not result.consistent:
            pytest.fail(str(result), pytrace=False)
        return result


@pytest.fixture
def depth_limits(request: pytest.FixtureRequest) -> DepthLimits:
    """Assertions that a layer map converges to a claimed limit as depth grows (``DepthLimits``): local consistency,
    strong and weak order, same weak limit, symbolic expansion. A failing check fails the test with its table; an
    inconclusive one is a skip at the test (``--depth-limits-inconclusive=fail`` makes it a failure).
    ``--depth-limits-paths FACTOR`` scales the paths, ``--depth-limits-report DIR`` writes each check's report."""
    config = request.config
    return DepthLimits(
        config.getoption("--depth-limits-inconclusive"),
        config.getoption("--depth-limits-paths"),
        config.getoption("--depth-limits-report"),
        request.node.name,
    )
