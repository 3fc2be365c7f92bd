"""The law of a scalar statistic of a finite system at time T against the claimed limit's, along a ladder of three
levels (widths n, 2n, 4n at depth T n; or depths L, 2L, 4L), each twice the last, with distribution-free bounds
(``convergence._statistics.ecdf``).

With F_k the statistic's CDF at level k and q the claimed rate, F_k = F + B k^-q + C k^-2q + ... (a weak expansion,
uniform in x where the laws have bounded densities), so the Richardson combination of the two finest levels,
G = (F_3 - r F_2) / (1 - r), r = 2^-q, is F up to the k^-2q remainder, and the limit's distance from the claim is
judged in the Kolmogorov norm sup |G - F_claim| (``law_ks``) and, for a statistic with a stated support [a, b], in
the L1 norm int |G - F_claim| (``law_w1``: the Wasserstein-1 distance when G is a CDF). The claim's law F_claim is
its Euler scheme at S steps (another scheme than the system's); its weak-order-1 bias is bounded by the upper end of
the distance between S and S/2 steps.

Every interval holds because all five empirical CDFs (three levels, two reference runs) lie in their DKW bands at
once, each at level alpha / 5, so the family-wise false-failure rate is alpha. The allowance is the sum of three
bounds: the extrapolation's remainder (the upper end of the departure of the consecutive differences from the ratio
r, times the remainder that departure implies, as in the width local check), the reference's bias, and the
statistic's rounding. The resolution (the distance rejected with probability ``power``) is twice the allowance plus
the interval's half-width at level alpha / 5 and the bands' at 2 (1 - power) / 5 (two-sided bands of that level are
one-sided at (1 - power) / 5, and the estimate falls short only by a one-sided error at the point where the true
difference peaks: a miss rate of at most 3 (1 - power) / 5 + alpha).

The remainder bound assumes the expansion's next term is k^-2q (exact on F + B k^-q + C k^-2q). A fail of the limit
needs more than the claimed rate: the finest level farther from the claim than the ladder could still move at the
slower of half the claimed rate and the rate it shows (``far_beyond``); or the ladder in the rate's regime (resolved
consecutive differences in the ratio r within 50%) and the interval outside the allowance widened by the
``rate_margin``: where the limit lies were the ladder converging at the ratio its differences show (a law
N(3.5 k^-0.7, 1) judged at rate 1 has differences in the ratio band, and the k^-2q bound alone failed it at some
seeds). Otherwise a fail is inconclusive. The resolution is the pass side's.

Beside the verdicts: ``distance_decay``, a finding, the Kolmogorov distance of each level from the claim with the
fitted rate of its decay and the interval the DKW bands allow; and the plot of the empirical CDFs with their
simultaneous bands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .._output import Curve, Plot
from .._statistics import (
    ADVICE_MARGIN,
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    all_finite,
    combined_halfwidth,
    dkw_halfwidth,
    ecdf,
    effect_verdict,
    kolmogorov_norm,
    l1_norm,
)
from .ladder_extrapolation import (
    RATIO_BAND,
    departure_weights,
    extrapolation_weights,
    rate_margin,
    reach,
    remainder_ratio,
)

LAWS = 5  # empirical CDFs whose bands the intervals need at once: three levels, the reference at S and S/2 steps
PLOT_POINTS = 201
SUPPORT_ROUNDING = 1e-9  # values this far (relative to b - a) outside a stated support [a, b] count as rounding


@dataclass(frozen=True)
class LawLadder:
    """A statistic's samples at each level of a ladder (each level twice the last) and under the claim's scheme."""

    label: str  # what a level is: "width n" or "depth L"
    levels: tuple[int, ...]
    values: tuple[np.ndarray, ...]
    reference: np.ndarray  # the claim's scheme at ``reference_steps``
    coarse_reference: np.ndarray  # at half as many
    reference_steps: int
    rounding: float  # a bound on the statistic's rounding at the finest level, in its units

    @property
    def laws(self) -> list[np.ndarray]:
        return [*self.values, self.reference, self.coarse_reference]

    @property
    def sizes(self) -> list[int]:
        return [v.shape[0] for v in self.laws]


# weights of ``LawLadder.laws`` (three levels, the reference at S and S/2 steps) in the combinations the checks read
FIRST = (1.0, -1.0, 0.0, 0.0, 0.0)  # F_1 - F_2: the first consecutive difference (sign irrelevant to a norm)
LAST = (0.0, 1.0, -1.0, 0.0, 0.0)  # F_2 - F_3
FINEST = (0.0, 0.0, 1.0, -1.0, 0.0)  # F_3 - F_claim
EULER = (0.0, 0.0, 0.0, 1.0, -1.0)  # the reference at S steps less at S/2: its weak-order-1 bias


def extrapolation(ladder: LawLadder, rate: float) -> tuple[float, ...]:
    """The weights of ``LawLadder.laws`` in G - F_claim: the levels' ``extrapolation_weights``, -1 on the reference,
    0 on its coarse run."""
    return (*extrapolation_weights(ladder.levels, rate), -1.0, 0.0)


def departure(rate: float) -> tuple[float, ...]:
    """The weights of ``LawLadder.laws`` in the departure -r F_1 + (1 + r) F_2 - F_3 (``departure_weights``)."""
    return (*departure_weights(rate), 0.0, 0.0)


@dataclass(frozen=True)
class Norm:
    """One distance (Kolmogorov: ``norm`` sup |.|, span 1; Wasserstein-1: int |.|, span b - a)."""

    name: str
    norm: object
    span: float

    def value(self, ladder: LawLadder, weights) -> float:
        return self.norm(ladder.laws, weights)

    def halfwidth(self, ladder: LawLadder, weights, alpha: float) -> float:
        return self.span * combined_halfwidth(ladder.sizes, weights, alpha / LAWS)


def upper_end(ladder: LawLadder, norm: Norm, weights, alpha: float) -> float:
    """The upper end of the norm of a combination of the laws: its value plus its half-width."""
    return norm.value(ladder, weights) + norm.halfwidth(ladder, weights, alpha)


def allowance(ladder: LawLadder, rate: float, norm: Norm, alpha: float, reference: float, rounding: float):
    """The bias bound of ``law_checks``' interval and its parts, described; ``reference``: the Euler bias bound."""
    remainder = remainder_ratio(ladder.levels, rate) * upper_end(ladder, norm, departure(rate), alpha)
    text = (
        f"allowance: extrapolation remainder {remainder:.3g}, Euler reference bias {reference:.3g} "
        f"({ladder.reference_steps} against {ladder.reference_steps // 2} steps), rounding {rounding:.2g}"
    )
    return remainder + reference + rounding, text


def outside_regime(ladder: LawLadder, rate: float, alpha: float) -> bool:
    """Whether the ladder is not shown in the rate's regime: the first consecutive difference sup |F_2 - F_1| resolved
    beyond its band and the departure's upper end above ``RATIO_BAND`` r times it."""
    kolmogorov = Norm("ks", kolmogorov_norm, 1.0)
    d1 = kolmogorov.value(ladder, FIRST)
    if d1 <= kolmogorov.halfwidth(ladder, FIRST, alpha):
        return False
    return upper_end(ladder, kolmogorov, departure(rate), alpha) > RATIO_BAND * 2.0**-rate * d1


def far_beyond(ladder: LawLadder, rate: float, norm: Norm, alpha: float, bias: float, steps: tuple) -> bool:
    """Whether the finest level is farther from the claim than the ladder could still move: the lower end of its
    distance from the claim, less ``bias`` (the reference's bias bound and the rounding), above the ladder's ``reach``
    from its consecutive ``differences`` (``steps``; norms: never of opposite signs). A fail outside the rate's regime
    stands on this evidence alone."""
    low = norm.value(ladder, FINEST) - norm.halfwidth(ladder, FINEST, alpha) - bias
    return bool(low > reach(*steps, rate)[0])


def differences(ladder: LawLadder, norm: Norm, alpha: float) -> tuple[float, float, float, float]:
    """The norms of the consecutive differences F_1 - F_2 and F_2 - F_3 with their half-widths: (D_1, h_1, D_2, h_2)."""
    return tuple(f(ladder, w, *a) for w in (FIRST, LAST) for f, a in ((norm.value, ()), (norm.halfwidth, (alpha,))))


def unsettled_fail(ladder: LawLadder, rate: float, norm: Norm, alpha: float, low: float, bias: float, fixed: float):
    """Why a fail of the limit at the claimed rate (interval's lower end ``low`` above the allowance ``bias``) is not
    evidence, or "" if it is: the levels not in the rate's regime (``outside_regime``), or ``low`` within the allowance
    widened by the ``rate_margin`` of the ratio the ladder shows; either way unless the finest level is
    ``far_beyond`` (``fixed``: the allowance's parts that do not extrapolate, the reference's bias and rounding)."""
    steps = differences(ladder, norm, alpha)
    if far_beyond(ladder, rate, norm, alpha, fixed, steps):
        return ""
    if outside_regime(ladder, rate, alpha):
        return "the levels are not shown in the claimed rate's regime"
    first, first_half, last, last_half = steps
    margin = float(rate_margin(*steps, rate)[0])
    if low <= bias + margin:
        return (
            f"the limit could lie within {bias + margin:.3g} of the claim at the rate the levels' differences "
            f"({first:.3g} +- {first_half:.2g}, {last:.3g} +- {last_half:.2g}) show"
        )
    return ""


ADVICE = "; the resolution exceeds the target: "  # where an inconclusive note's advice starts


def samples_advice(
    ladder: LawLadder, rate: float, norm: Norm, rounding: float, target: float, alpha: float, resolution: float
) -> str:
    """How many samples a level would decide an inconclusive ``distance_check``. Its ``resolution`` holds
    2 (c D + E + rounding), c the ``remainder_ratio``, D and E the departure from the ratio and the reference's S
    against S/2 steps: their true values do not shrink with samples, everything else does, as N^-1/2 at sizes in
    proportion. Where the ladder resolves neither (lower ends at 0) all of it scales, planned as ``samples_to_decide``
    plans a check's paths (``ADVICE_MARGIN`` included). Where it resolves one, D and E at their lower ends give a
    lower bound (fewer samples do not decide; as measured they would overestimate, sup-norm noise inflating them);
    and when that bound's fixed part reaches the target no sample size decides at these levels."""
    remainder = remainder_ratio(ladder.levels, rate)
    weights = (departure(rate), EULER)
    values = [norm.value(ladder, w) for w in weights]
    lower = [max(v - norm.halfwidth(ladder, w, alpha), 0.0) for v, w in zip(values, weights)]
    fixed = 2 * (remainder * lower[0] + lower[1] + rounding)
    if fixed >= target:
        return (
            "no sample size decides at these levels: the departure from the ratio and the reference's S against S/2 "
            "steps, at the lower ends of their intervals, with rounding, keep the resolution above the target; finer "
            "levels or a finer reference would"
        )
    ratio = ((resolution - fixed) / (target - fixed)) ** 2
    if not any(lower):
        planned = math.ceil(ADVICE_MARGIN * ladder.sizes[0] * ratio)
        return f"about {planned} samples a level (the reference's in proportion) would decide"
    return (
        f"at least about {math.ceil(ladder.sizes[0] * ratio)} samples a level (the reference's in proportion) would "
        f"be needed, more if the departure from the ratio ({values[0]:.3g} measured) or the reference's S against "
        f"S/2 steps ({values[1]:.3g}) exceed their lower ends"
    )


def distance_check(
    ladder: LawLadder, rate: float, norm: Norm, rounding: float, target: float, alpha: float, power: float, config
) -> Check:
    """``law_ks`` or ``law_w1`` (module docstring): the extrapolated law's distance from the claim's."""
    weights = extrapolation(ladder, rate)
    estimate = norm.value(ladder, weights)
    half = norm.halfwidth(ladder, weights, alpha)
    reference = upper_end(ladder, norm, EULER, alpha)
    bias, text = allowance(ladder, rate, norm, alpha, reference, rounding)
    resolution = 2 * bias + half + norm.halfwidth(ladder, weights, 2 * (1 - power))
    ci = (max(estimate - half, 0.0), estimate + half)
    verdict = effect_verdict(ci, 0.0, bias, resolution, target)
    levels = ", ".join(map(str, ladder.levels))
    note = (
        f"{ladder.label} {levels}, {ladder.sizes[0]} samples each, the claim's Euler scheme on {ladder.sizes[3]}; "
        f"extrapolated at the claimed rate {rate:g}; {text}"
    )
    unsettled = verdict == FAIL and all_finite(estimate, bias)
    unsettled = unsettled and unsettled_fail(ladder, rate, norm, alpha, ci[0], bias, reference + rounding)
    if unsettled:
        verdict = INCONCLUSIVE
        note = f"{unsettled}: a fail is not decided, finer levels would; {note}"
    elif verdict == INCONCLUSIVE:
        advice = samples_advice(ladder, rate, norm, rounding, target, alpha, resolution)
        note = f"{note}{ADVICE}{advice}"
    return Check(
        norm.name,
        0.0,
        estimate,
        ci,
        verdict,
        config,
        bias,
        1 - alpha,
        note=note,
        resolution=resolution,
        target=target,
        bias_span=2.0,
    )


def decay_check(ladder: LawLadder, rate: float, alpha: float, config) -> tuple[Check, Plot]:
    """``distance_decay`` (a finding): sup |F_k - F_claim| at each level, the least-squares rate of its decay and the
    range of rates its DKW intervals allow (from the coarsest level's and the finest's)."""
    kolmogorov = Norm("ks", kolmogorov_norm, 1.0)
    distances, halves = [], []
    for k in range(3):
        weights = tuple(1.0 if j == k else -1.0 if j == 3 else 0.0 for j in range(LAWS))
        distances.append(kolmogorov.value(ladder, weights))
        halves.append(kolmogorov.halfwidth(ladder, weights, alpha))
    logs = np.log(ladder.levels)
    span = logs[-1] - logs[0]
    low, high = distances[0] - halves[0], distances[-1] + halves[-1]
    lower = math.log(max(low, 0.0) / high) / span if low > 0 else -math.inf
    upper = (
        math.log((distances[0] + halves[0]) / (distances[-1] - halves[-1])) / span
        if distances[-1] > halves[-1]
        else math.inf
    )
    positive = np.array(distances) > 0
    fitted = (
        float(-np.polyfit(logs[positive], np.log(np.array(distances)[positive]), 1)[0])
        if positive.sum() > 1
        else math.nan
    )
    if not (lower <= rate <= upper):
        verdict = FAIL
    else:  # an unbounded interval cannot pass (its rate is not identified on this ladder)
        verdict = PASS if all_finite(lower, upper, fitted) else INCONCLUSIVE
    note = (
        f"Kolmogorov distance from the claim at {ladder.label} {', '.join(map(str, ladder.levels))}: "
        f"{', '.join(f'{d:.3g} +- {h:.2g}' for d, h in zip(distances, halves))}; a finding: it includes the "
        "reference's error and the sampling floor, and decides nothing (law_ks does)"
    )
    check = Check(
        "distance_decay", rate, fitted, (lower, upper), verdict, config, 0.0, 1 - alpha, note=note, claim=False
    )
    curve = Curve(
        "sup |F_level - F_claim|",
        list(map(float, ladder.levels)),
        distances,
        [max(d - h, 1e-6) for d, h in zip(distances, halves)],
        [d + h for d, h in zip(distances, halves)],
        style="points",
    )
    plot = Plot("Kolmogorov distance from the claim", ladder.label, "distance", [curve], logx=True, logy=True)
    return check, plot


def plot_range(laws: list[np.ndarray]) -> tuple[float, float]:
    """The plots' range: the 0.2% and 99.8% quantiles of the pooled values, widened by 1/2 each way where they meet
    (a statistic constant at T: an atom, which zero-width bins could not draw)."""
    low, high = np.quantile(np.concatenate(laws), [0.002, 0.998])
    return (float(low), float(high)) if high > low else (float(low) - 0.5, float(high) + 0.5)


def ecdf_plot(ladder: LawLadder, statistic: str, alpha: float) -> Plot:
    """The empirical CDFs of every level and of the claim's scheme, each with its simultaneous DKW band."""
    points = np.linspace(*plot_range(ladder.laws), PLOT_POINTS)
    names = [f"{ladder.label.split()[-1]} = {level}" for level in ladder.levels]
    curves = []
    for name, values in zip([*names, f"claim (Euler, {ladder.reference_steps} steps)"], ladder.laws[:4]):
        cdf = ecdf(values, points)
        band = dkw_halfwidth(values.shape[0], alpha / LAWS)
        lower, upper = np.clip(cdf - band, 0, 1), np.clip(cdf + band, 0, 1)
        curves.append(Curve(name, points.tolist(), cdf.tolist(), lower.tolist(), upper.tolist()))
    return Plot(f"law of {statistic} at T, with simultaneous bands", statistic, "CDF", curves)


def largest_atom(values: np.ndarray) -> float:
    """The largest fraction of ``values`` equal to one value."""
    _, counts = np.unique(values, return_counts=True)
    return float(counts.max()) / values.shape[0]


def histogram_plot(ladder: LawLadder, statistic: str, bins: int = 40) -> Plot:
    """Densities of every level and of the claim's scheme on common bins (as the papers draw the law at T)."""
    edges = np.linspace(*plot_range(ladder.laws[:4]), bins + 1)
    centres = ((edges[1:] + edges[:-1]) / 2).tolist()
    names = [*(f"{ladder.label.split()[-1]} = {level}" for level in ladder.levels), "claim (Euler)"]
    curves = [
        Curve(name, centres, np.histogram(values, edges, density=True)[0].tolist(), linestyle="--" if k == 3 else "-")
        for k, (name, values) in enumerate(zip(names, ladder.laws[:4]))
    ]
    return Plot(f"histogram of {statistic} at T", statistic, "density", curves)


def rounding_mass(values: np.ndarray, eta: float) -> float:
    """The largest fraction of ``values`` within +- eta of one of them, besides itself: an estimate of the mass
    P(|X - x| <= eta) by which a rounding of at most eta in each value can move the law's CDF (0 for eta = 0)."""
    if eta <= 0:
        return 0.0
    ordered = np.sort(values)
    within = np.searchsorted(ordered, ordered + eta, "right") - np.searchsorted(ordered, ordered - eta, "left")
    return float(np.max(within) - 1) / ordered.shape[0]  # besides the value itself


def law_checks(
    ladder: LawLadder,
    rate: float,
    target: float,
    support: tuple[float, float] | None,
    alpha: float,
    power: float,
    statistic: str,
    config: dict,
) -> tuple[list[Check], list[Plot]]:
    """``law_ks``, ``law_w1`` (with a ``support``) and ``distance_decay`` (module docstring), and the plots; a fail
    naming where when a value is not finite. ``target``: the distance the check may miss (Kolmogorov; Wasserstein-1
    in units of b - a). The rounding allowance: eta = ``ladder.rounding`` moves the Kolmogorov norm by at most the
    ``rounding_mass`` of the finest level and the Wasserstein-1 norm by eta, each times the extrapolation's weights."""
    labels = [*map(str, ladder.levels), "reference", "coarse reference"]
    bad = [label for label, v in zip(labels, ladder.laws) if not np.all(np.isfinite(v))]
    if bad:
        note = f"NaN or infinity in the statistic at {', '.join(bad)}: cannot pass"
        nan = (math.nan, math.nan)
        return [Check("law_ks", 0.0, math.nan, nan, FAIL, config, math.nan, 1 - alpha, note=note)], []
    mass = rounding_mass(ladder.values[-1], ladder.rounding)
    scale = sum(abs(c) for c in extrapolation(ladder, rate)[:3])
    args = (target, alpha, power, config)
    checks = [distance_check(ladder, rate, Norm("law_ks", kolmogorov_norm, 1.0), scale * mass, *args)]
    atom = largest_atom(ladder.reference)
    if atom > 2 * dkw_halfwidth(ladder.reference.shape[0], alpha / LAWS):  # no bounded density: KS cannot converge
        note = (
            f"the claim's law has an atom (mass {atom:.3g} at one value): laws converge to it in Wasserstein-1, not in "
            f"Kolmogorov distance, so law_ks cannot decide; {checks[0].note.split(ADVICE)[0]}"
        )
        checks[0] = replace(checks[0], verdict=INCONCLUSIVE, note=note, resolution=math.inf)
    if support is not None:
        a, b = support
        w1_args = (target * (b - a), alpha, power, config)
        w1 = distance_check(ladder, rate, Norm("law_w1", l1_norm, b - a), scale * ladder.rounding, *w1_args)
        slack = SUPPORT_ROUNDING * (b - a)
        outside = sum(int(np.sum((v < a - slack) | (v > b + slack))) for v in ladder.laws)
        if outside:  # the L1 bound needs the support: undecided, never a pass
            bound = f"{outside} values outside the stated support [{a:g}, {b:g}]: the bound does not hold"
            note = f"{bound}; {w1.note.split(ADVICE)[0]}"
            w1 = replace(w1, verdict=INCONCLUSIVE, note=note, resolution=math.inf)
        checks.append(w1)
    checks = [replace(c, false_failure_rate=alpha / len(checks)) for c in checks]  # one event: every band holds
    decay, decay_plot = decay_check(ladder, rate, alpha, config)
    return [*checks, decay], [ecdf_plot(ladder, statistic, alpha), histogram_plot(ladder, statistic), decay_plot]
