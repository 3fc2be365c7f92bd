"""Checks and verdicts: levels and z values, the ``Check`` record, resolutions (the effect a check rejects with
probability 90%), effect and limit verdicts, and the sample sizes that would decide.

Verdicts use (1 - alpha) intervals. For a check whose estimator is consistent and whose bias lies within the stated
allowance, the probability of a false ``fail`` is at most alpha (two-sided interval, the check fails only on one side
of the band). Fitted orders are in ``orders``, the bootstrap over paths in ``bootstrap``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from verify._common import Verdict, check_int, check_real

CONFIDENCE = 0.99
FAMILY_ALPHA = (
    1.0 - CONFIDENCE
)  # the false-failure rate allowed to a whole study (or public check) when its claims hold
PASS, FAIL, INCONCLUSIVE = Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE
VERDICTS = tuple(Verdict)
DETECTION_POWER = 0.9  # a check's resolution is the effect it rejects with this probability
NO_TARGET = math.inf  # the target of a check whose pass its interval decides alone (``Check``)
NO_TARGET_TEXT = "none needed"  # how reports write it


def all_finite(*values) -> bool:
    """True when every number (scalars or arrays) is finite: no verdict may pass on NaN or infinity."""
    return all(bool(np.all(np.isfinite(np.asarray(v, dtype=np.float64)))) for v in values)


def first_nonfinite(arrays: dict[str, np.ndarray], levels: list[str] | None = None) -> str | None:
    """A message naming the first scheme (key) and level (last axis) holding NaN or infinity, else None."""
    for name, values in arrays.items():
        values = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            where = ""
            if values.ndim >= 1:
                column = int(np.argwhere(bad.reshape(-1, values.shape[-1]).any(axis=0))[0, 0])
                label = levels[column] if levels is not None and column < len(levels) else f"#{column}"
                where = f" at level {label}"
            return (
                f"non-finite values in {name}{where} ({int(bad.sum())} of {values.size}): a scheme diverged or the "
                "data are invalid"
            )
    return None


def z_value(checks: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """Two-sided normal quantile for ``checks`` simultaneous intervals (Bonferroni) at family level ``family_alpha``."""
    check_int("checks", checks, minimum=1)
    return float(stats.norm.ppf(1 - family_alpha / (2 * checks)))


def confidence_z(confidence: float) -> float:
    """Two-sided normal quantile of a ``confidence`` interval: z with P(|Z| <= z) = confidence."""
    return float(stats.norm.ppf(0.5 + confidence / 2))


def z_confidence(z: float) -> float:
    """The confidence of a two-sided interval of z standard errors: P(|Z| <= z) (the inverse of ``confidence_z``)."""
    return 1.0 - 2.0 * float(stats.norm.sf(z))


def family_confidence(checks: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """The per-check confidence that keeps ``checks`` checks' family-wise false-failure rate at ``family_alpha``
    (Bonferroni: each check at level family_alpha / checks)."""
    return 1.0 - family_alpha / check_int("checks", checks, minimum=1)


def scale_family_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean, lower, upper)``: the interval for the mean of positive, right-skewed ``values`` (means of squares)
    whose spread grows with their mean, ``{v : |mean - v| <= z (se / mean) v} = [mean / (1 + z c), mean / (1 - z c)]``
    with ``c = se / mean`` (a scale family ``v W``: c does not depend on v).

    The t interval ``mean +- z se`` misses low far more often than its level says, because a low mean comes with a
    low se: for N |<phi, mu_a> - <phi, mu_b>|^2 / 2 over 192 paths of uniform tokens on S^4 (3 functions x 4000
    replications), P(t < -3) = 0.0064 against the normal 0.00135, while this interval's tails beyond 3 are 0.0014
    and 0.0017.
    When ``z c >= 1`` (a handful of paths) the interval has no finite upper end, and the t interval is returned."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(values.size))
    z = confidence_z(confidence)
    relative = z * se / mean if mean > 0 else np.inf
    if relative >= 1.0:
        return mean, mean - z * se, mean + z * se
    return mean, mean / (1.0 + relative), mean / (1.0 - relative)


def confidence_label(confidence: float) -> str:
    """``confidence`` as a percentage with enough decimals to show its alpha's first digit (0.99 -> 99%,
    0.99967 -> 99.97%, 0.99999 -> 99.999%): never "100%" for a confidence below 1."""
    alpha_percent = 100.0 * (1.0 - confidence)
    digits = 0 if alpha_percent <= 0 else max(0, math.ceil(round(-math.log10(alpha_percent), 9)))
    return f"{100 * confidence:.{digits}f}%"


def detectable_effect(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> float:
    """The smallest departure from the expected value that the check rejects with probability ``power``:
    bias_span allowance + (z_{1-alpha/2} + z_power) se, with se = the interval's half-width / z_{1-alpha/2}
    (normal approximation; in the check's own units).

    ``bias_span`` 1 assumes the estimate unbiased (the allowance a tolerance on the claim, as an order's band);
    ``bias_span`` 2 is the worst case when the allowance bounds a bias b in [-allowance, allowance]: the check fails
    when the interval clears the band, estimate > allowance + z se, and an effect e with b = -allowance needs
    e > 2 allowance + (z + z_power) se to do so with probability ``power``."""
    z = confidence_z(confidence)
    se = (ci[1] - ci[0]) / (2 * z)
    return float(bias_span * allowance + (z + float(stats.norm.ppf(power))) * se)


@dataclass(frozen=True)
class Check:
    """One claim tested by a study, as written to the reports.

    ``claim`` is False for a finding: a conjecture the sources do not make (e.g. model F as N grows), reported
    with its own verdict but left out of the study's verdict. ``resolution`` is the smallest departure from
    ``expected`` the check rejects with probability ``DETECTION_POWER`` (``detectable_effect``; 1 - 0.1/K at one of
    K staged looks, ``sequential``), in the check's own units; ``relative_resolution`` the same as a relative
    coefficient error where the check has one. ``target`` is the largest departure the check may miss, in the same
    units (docs/checks.md lists the targets by kind of check); ``NO_TARGET`` for a check whose pass is decided by
    its interval alone (an interval that excludes every wrong value: a mutant rejected, an order above its floor, a
    run that shows an event exists), which its note says (JSON: "none needed").

    Two rules hold here, whatever rule produced the verdict: a ``pass`` whose estimate or interval holds NaN or
    infinity becomes a ``fail``; and a statistical claim check (one that can fail by chance: ``claim`` and
    ``false_failure_rate > 0``) passes only at a stated resolution within its target; a ``pass`` without them, or
    with ``resolution > target``, becomes ``inconclusive``, saying so.
    """

    name: str
    expected: float
    estimate: float
    ci: tuple[float, float]
    verdict: Verdict
    config: dict = field(default_factory=dict)
    allowance: float = 0.0
    confidence: float = CONFIDENCE
    false_failure_rate: float | None = None  # None: 1 - confidence (certified and exact checks declare 0)
    note: str = ""
    claim: bool = True
    resolution: float | None = None
    relative_resolution: float | None = None
    target: float | None = None
    # the resolution's bias span (``detectable_effect``): 2 where the allowance bounds a bias (the public checks)
    bias_span: float = 1.0

    def __post_init__(self) -> None:
        if self.false_failure_rate is None:
            object.__setattr__(self, "false_failure_rate", 1.0 - self.confidence)
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {tuple(map(str, VERDICTS))}, got {self.verdict!r}")
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        if self.verdict == PASS and not all_finite(self.estimate, *self.ci):
            self._demote(FAIL, "non-finite estimate or interval: cannot pass")
        elif self.verdict == PASS and self.statistical and self.target != NO_TARGET:
            if self.resolution is None or self.target is None or not all_finite(self.resolution, self.target):
                self._demote(
                    INCONCLUSIVE,
                    f"resolution {self.resolution} or target {self.target} not stated: a "
                    "statistical check cannot pass without both",
                )
            elif self.resolution > self.target:
                self._demote(
                    INCONCLUSIVE,
                    f"resolution {self.resolution:.3g} > target {self.target:.3g}: the check "
                    "cannot see every effect it may not miss",
                )

    @property
    def resolution_ratio(self) -> float | None:
        """``resolution / target``, unit-free (at most 1 when the check sees every effect it may not miss); None
        without a finite resolution and a finite positive target (``NO_TARGET`` included)."""
        numbers = (self.resolution, self.target)
        if not all(isinstance(v, (int, float)) for v in numbers) or not all_finite(*numbers) or self.target <= 0:
            return None
        return self.resolution / self.target

    @property
    def statistical(self) -> bool:
        """A claim that can fail by chance (not a finding, not certified or exact)."""
        return self.claim and self.false_failure_rate > 0

    def _demote(self, verdict: Verdict, reason: str) -> None:
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "note", f"{reason}. {self.note}".strip())

    def to_dict(self) -> dict:
        """A JSON-ready dict (non-finite numbers become None: reports are valid JSON)."""
        data = asdict(self)
        if self.bias_span == 1.0:  # the studies' reports keep their fields
            del data["bias_span"]
        data["ci"] = [float(self.ci[0]), float(self.ci[1])]
        data = json_safe(data)
        if self.target == NO_TARGET:
            data["target"] = NO_TARGET_TEXT
        return data


def json_safe(value):
    """``value`` with every non-finite float replaced by None (NaN is not JSON), recursively."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    return value


def paths_to_resolve(width: float, target_width: float, paths: int) -> int:
    """Paths that would shrink an interval of ``width`` (measured on ``paths``) to ``target_width``: width ~
    paths^-1/2."""
    return int(math.ceil(paths * (width / target_width) ** 2))


def paths_for_effect(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    paths: int,
    effect: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> int | None:
    """Paths at which a check measured on ``paths`` (interval ``ci`` at ``confidence``, bias ``allowance``) would reject
    a departure of ``effect`` with probability ``power``: ``detectable_effect`` = allowance + (z_alpha + z_power) se,
    with se ~ paths^-1/2, solved for the paths. None when ``effect`` is within the allowance (no number of paths
    resolves it) or the interval is not finite."""
    z = confidence_z(confidence)
    se = (ci[1] - ci[0]) / (2 * z)
    floor = bias_span * allowance
    if not (math.isfinite(se) and se > 0 and effect > floor):
        return None
    return max(1, int(math.ceil(paths * ((z + float(stats.norm.ppf(power))) * se / (effect - floor)) ** 2)))


ADVICE_MARGIN = 1.25  # advice plans for the target with 25% more samples: the pilot's se is itself an estimate


def samples_to_decide(
    ci: tuple[float, float],
    allowance: float,
    confidence: float,
    paths: int,
    target: float,
    power: float = DETECTION_POWER,
    bias_span: float = 1.0,
) -> int | None:
    """The advice an inconclusive check gives: ``paths_for_effect`` at the ``target``, times ``ADVICE_MARGIN`` (at
    exactly the planned size the resolution reaches the target only about half the time; the margin, ~12% on the
    standard error, makes a run that follows the advice decide with high probability)."""
    planned = paths_for_effect(ci, allowance, confidence, paths, target, power, bias_span)
    return None if planned is None else int(math.ceil(ADVICE_MARGIN * planned))


def limit_verdict(ci: tuple[float, float], allowance: float, resolution: float) -> str:
    """For a plateau ``B`` (expected 0): ``fail`` when its interval lies above ``allowance`` (the
    reference's own mean-square error); ``inconclusive`` when the interval reaches ``resolution``
    (the finest level's mean-square error, so the data cannot tell a plateau from convergence) or lies
    below ``-allowance`` (B is a mean square, >= 0 up to the reference's error: an interval below it
    shows a biased fit, e.g. pre-asymptotic levels, not a pass); ``pass`` when the interval lies within
    +- ``allowance`` (the layer agrees with the claim to the reference's own accuracy, as an exact step does, whose
    errors are the reference's at every level); ``fail`` when any number is not finite."""
    if not all_finite(*ci, allowance, resolution):
        return FAIL
    lo, hi = ci
    if lo > allowance:
        return FAIL
    if hi < -allowance:
        return INCONCLUSIVE
    if lo >= -allowance and hi <= allowance:
        return PASS
    if hi >= resolution:
        return INCONCLUSIVE
    return PASS


def excludes_band(lo, hi, expected: float, allowance: float):
    """Whether the interval [lo, hi] misses the band ``expected +- allowance`` (elementwise on arrays): a fail's
    evidence."""
    return (hi < expected - allowance) | (lo > expected + allowance)


def effect_verdict(ci: tuple[float, float], expected: float, allowance: float, resolution: float, target: float) -> str:
    """For an effect expected at ``expected`` (two-sided): ``fail`` when the interval misses
    ``expected +- allowance`` or any of them is not finite; ``inconclusive`` when the check's ``resolution`` (its
    detectable effect; infinite when it has no scale) exceeds ``target``; else ``pass``."""
    if not all_finite(*ci, expected, allowance):
        return FAIL
    if excludes_band(*ci, expected, allowance):
        return FAIL
    return INCONCLUSIVE if resolution > target else PASS


def effect_check(
    name: str,
    expected: float,
    estimate: float,
    ci: tuple[float, float],
    allowance: float,
    target: float,
    config: dict | None = None,
    *,
    confidence: float = CONFIDENCE,
    power: float = DETECTION_POWER,
    scale: float | None = None,
    bias_span: float = 1.0,
    **fields,
) -> Check:
    """The check of an effect expected at ``expected`` +- ``allowance`` (two-sided), measured as ``estimate`` with
    interval ``ci`` at ``confidence``: its resolution is ``detectable_effect`` at ``power``, its verdict
    ``effect_verdict`` at ``target``; ``scale`` (when given and non-zero) turns the resolution into the relative one;
    ``bias_span`` as in ``detectable_effect`` (2: the allowance bounds a bias). ``fields``: the Check's other fields
    (``note``, ``false_failure_rate``, ``claim``)."""
    resolution = detectable_effect(ci, allowance, confidence, power, bias_span)
    return Check(
        name,
        expected,
        estimate,
        ci,
        effect_verdict(ci, expected, allowance, resolution, target),
        {} if config is None else config,
        allowance,
        confidence,
        resolution=resolution,
        target=target,
        relative_resolution=resolution / abs(scale) if scale else None,
        bias_span=bias_span,
        **fields,
    )


def combine_verdicts(verdicts: list[str]) -> Verdict:
    """A study fails if any check fails, is inconclusive if any is, and passes otherwise."""
    return Verdict.combine(verdicts)


def detection_rate(n: int, count: int, power: float = DETECTION_POWER) -> float:
    """The smallest per-trial rate p at which at least ``count`` of ``n`` trials occur with probability ``power``:
    P(Binomial(n, p) >= count) = I_p(count, n - count + 1) (the regularised incomplete beta function), so p is the
    ``power`` quantile of Beta(count, n - count + 1)."""
    check_int("n", n, minimum=1)
    check_int("count", count, minimum=1, maximum=n)
    return float(stats.beta.ppf(power, count, n - count + 1))


def excess_resolution(n: int, bound: float, z: float, power: float = DETECTION_POWER) -> float:
    """The resolution of "the fraction is not above ``bound``", which fails when the Wilson interval (at ``z``) of
    k successes in ``n`` lies above ``bound``: the smallest true fraction that fails with probability ``power``,
    ``detection_rate`` at the smallest such k (infinite when none is). With ``bound`` = 0 the check is "the fraction
    is positive" (one success): 1 - (1 - power)^(1/n) is the fraction seen with probability ``power``."""
    check_int("n", n, minimum=1)
    check_real("bound", bound, minimum=0.0, maximum=1.0)
    first = next((k for k in range(1, n + 1) if bound == 0 or wilson(k, n, z)[0] > bound), None)
    return math.inf if first is None else detection_rate(n, first, power)


def wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The bounds are exactly 0 and 1 at the extremes (rounding would otherwise leave ~1e-18).
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi
