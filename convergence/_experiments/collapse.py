"""How fast model A's tokens collapse: the interaction energy and the mean pairwise cosine over depth, the late-layer
rate of the energy, its agreement with the certified two-point exponent, and orderings of rates across configurations.

Observables per layer and path: E_beta(mu) (``energy.interaction_energy``) and the mean pairwise cosine
(1/(n(n-1))) sum_{i != j} <x_i, x_j>.

Rate: the mean over paths of each path's least-squares slope of log E_beta against time over a window of the late
layers, with a Student t interval over the paths (the median curves and their bootstrap bands are for figures).
The window ends at the last record above the rounding floor (the median energy at least ``ENERGY_FLOOR``; at T when
it is never reached) and starts at the first record at which the median cosine reaches ``CLUSTERED``, or a quarter
of the way in if that is later. With fewer than ``MIN_WINDOW`` records there, or a cosine below ``CLUSTERED`` in it,
the run is *not clustered*: its rate is measured over the later half of the records above the floor and no
exponent predicts it.

Prediction: in one tight cluster every pairwise difference follows the same linearised flow: the field's, whose top
Lyapunov exponent is the two-point exponent lambda_1 = ((d-3) k'(1) - (d-1) k(1)) / 2 (``verify.activation_constants``),
and the attention's, which moves each token towards the cluster's mean at rate v (Q^T K = beta I, V = v I; the
softmax weights are uniform to O(beta r^2)). So log E_beta (a sum of squared distances, e^beta beta |x_i - x_j|^2 / 2
per pair) decays at 2 (lambda_1 - v) almost surely in continuous time, and at ``layer_rate`` under layers of step h.
A layer's contraction of distances must be small (``CONTINUUM``) for the continuous-time exponent to describe the
layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._models import LayerMap
from .._paths import BrownianBlock, InitialState, Level, PathStreams, run_seeded, sampled_state, uniform_sphere
from .._paths.coupling import run_recorded
from .._runtime import concatenate_blocks
from .._statistics import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    all_finite,
    bootstrap_interval,
    confidence_label,
    detectable_effect,
    effect_verdict,
    first_nonfinite,
)
from .energy import interaction_energy

CLUSTERED = 0.99  # median mean pairwise cosine from which the run counts as one tight cluster
ENERGY_FLOOR = 1e-11  # median E_beta below this is near the sampler's rounding floor (pairs closer than ~1e-6)
MIN_WINDOW = 8  # records a run must stay one tight cluster over (0.7 units of time at T = 5, 51 records)
CONTINUUM = 0.1  # largest contraction of distances per layer at which a continuous-time exponent predicts the rate
MIN_EFFECT = 0.5  # orderings: the smallest predicted difference of rates (of log E_beta per unit time) compared
RATE_TARGET = 0.25  # collapse_rate may miss a relative error of this size in the layers' rate, allowance included


def collapse_observables(beta: float) -> Callable[[np.ndarray], np.ndarray]:
    """(mean pairwise cosine, E_beta) per path: shape (paths, 2)."""

    def observe(x: np.ndarray) -> np.ndarray:
        n = x.shape[-2]
        gram_sum = np.sum(np.einsum("...id,...jd->...ij", x, x), axis=(-1, -2))
        cosine = (gram_sum - n) / (n * (n - 1))
        return np.stack([cosine, interaction_energy(x, beta)], axis=-1)

    return observe


def record_collapse(
    model: LayerMap,
    depth: int,
    horizon: float,
    paths: int,
    beta: float,
    seed: int,
    key: Sequence[int],
    block_paths: int,
    every: int = 1,
    progress: Callable[[int], None] | None = None,
    initial: InitialState = uniform_sphere,
) -> np.ndarray:
    """(mean pairwise cosine, E_beta) after every ``every``-th layer from ``initial`` tokens (uniform by default):
    shape (paths, depth // every + 1, 2)."""
    observe = collapse_observables(beta)

    def compute(streams: PathStreams, advance) -> np.ndarray:
        x0 = initial(streams, model.tokens, model.dim)
        block = BrownianBlock(model.noise, streams, horizon / depth)
        return run_recorded([Level("layer", model, 1)], x0, block, depth, depth // every, observe, advance)[:, 0]

    return concatenate_blocks(
        run_seeded(
            compute,
            name="record_collapse",
            configuration=(model, depth, horizon, beta, every, initial),
            seed=seed,
            key=key,
            paths=paths,
            block_paths=block_paths,
            progress=progress,
        )
    )


def tight_cluster(radius: float) -> InitialState:
    """Initial state: n tokens e_1 + radius g_i (g_i standard normal in R^d), normalised: one cluster of radius about
    radius sqrt(d), where the linearised flow (the two-point exponent and the attention's rate) governs E_beta."""

    def sample(rng: np.random.Generator, paths: int, tokens: int, dim: int) -> np.ndarray:
        x = radius * rng.standard_normal((paths, tokens, dim))
        x[..., 0] += 1.0
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    return sampled_state(sample)


@dataclass(frozen=True)
class CollapseRate:
    """A run's rate of log E_beta: the mean of the paths' slopes, its standard error and the number of paths, the
    window (record indices start..stop-1), whether the run is one tight cluster over it, the pre-asymptotic drift
    (twice the mean slope over the window's later half minus the rate: the bias of a slope drifting linearly), and
    the medians over paths with bootstrap bands (for figures)."""

    rate: float
    se: float
    paths: int
    window: tuple[int, int]
    clustered: bool
    transient: float
    median_log_energy: np.ndarray
    log_energy_band: np.ndarray  # (2, records)
    median_cosine: np.ndarray
    cosine_band: np.ndarray

    def interval(self, confidence: float) -> tuple[float, float]:
        """Student t interval over the paths (few paths, Bonferroni tails: a normal quantile would be too short)."""
        return _t_interval(self.rate, self.se, self.paths - 1, confidence)


def _t_interval(mean: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    t = float(stats.t.ppf(0.5 + confidence / 2, df)) if np.isfinite(df) else float("nan")
    return mean - t * se, mean + t * se


def _slopes(times: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """Least-squares slopes of curves (..., records) against times."""
    centred = times - times.mean()
    return (curves - curves.mean(axis=-1, keepdims=True)) @ centred / np.sum(centred**2)


def collapse_rate(
    records: np.ndarray, times: np.ndarray, rng: np.random.Generator, replicates: int, confidence: float
) -> CollapseRate:
    """The rate of one configuration from ``record_collapse``'s output (see the module docstring)."""
    cosine, log_energy = records[..., 0], np.log(np.maximum(records[..., 1], np.finfo(float).tiny))
    boot = rng.integers(0, records.shape[0], size=(replicates, records.shape[0]))
    median_log, median_cos = np.median(log_energy, axis=0), np.median(cosine, axis=0)
    above = np.flatnonzero(median_log >= np.log(ENERGY_FLOOR))
    stop = max(int(above[-1]) + 1, 3) if above.size else 3  # the records above the floor
    late = stop // 2  # the later half of them (of [0, T] when the floor is never reached)
    tight = np.flatnonzero(median_cos >= CLUSTERED)
    start = max(stop // 4, int(tight[0])) if tight.size else late  # from the cluster's forming, past the first quarter
    clustered = stop - start >= MIN_WINDOW and bool(np.all(median_cos[start:stop] >= CLUSTERED))
    if not clustered:
        start = late
    slopes = _slopes(times[start:stop], log_energy[:, start:stop])
    half = start + (stop - start) // 2
    later = _slopes(times[half:stop], log_energy[:, half:stop]) if stop - half >= 2 else slopes
    return CollapseRate(
        rate=float(slopes.mean()),
        se=float(slopes.std(ddof=1) / np.sqrt(slopes.size)),
        paths=int(slopes.size),
        window=(start, stop),
        clustered=bool(clustered),
        # a slope drifting linearly over the window is off by twice the later half's departure from it
        transient=2.0 * float(later.mean() - slopes.mean()),
        median_log_energy=median_log,
        log_energy_band=bootstrap_interval(median_log, np.median(log_energy[boot], axis=1), confidence),
        median_cosine=median_cos,
        cosine_band=bootstrap_interval(median_cos, np.median(cosine[boot], axis=1), confidence),
    )


def layer_rate(lambda_1: float, v: float, h: float) -> float:
    """The rate of log E_beta of a tight cluster under the layers of step h: the attention's half-step divides each
    pairwise difference by |x + h v a| = 1 + h v (exact to first order in the cluster's radius: test), a rate
    -2 log(1 + h v) / h = -2 v + v^2 h + O(h^2); the noise's share is the continuous 2 lambda_1, whose own O(h)
    correction goes into the allowance (``discretisation``)."""
    return -2.0 * np.log1p(h * v) / h + 2.0 * lambda_1


def discretisation(estimate: CollapseRate, v: float, h: float) -> float:
    """An estimate (not a bound) of the O(h) error of the continuous 2 lambda_1 under the layers: twice the
    second-order term s^2 h / 2 of log(1 + s h) / h, s = the measured rate less the attention's share
    (``layer_rate``; the attention's own second-order term, v^2 h, is a quarter of (2 v)^2 h). From
    the run, not from the exponent under test, so a wrong exponent cannot widen its own allowance."""
    noise = estimate.rate + 2.0 * np.log1p(h * v) / h
    return float(noise**2 * h)


def rate_check(
    estimate: CollapseRate,
    predicted: float,
    confidence: float,
    config: dict,
    note: str,
    target: float = RATE_TARGET,
    bias: float = 0.0,
) -> Check:
    """``collapse_rate``: the rate against ``predicted`` (``layer_rate``). Allowance: twice the pre-asymptotic drift
    of the slope within its window plus ``bias`` (``discretisation``); target: ``target`` x |predicted|; two-sided.
    A non-finite rate, interval or allowance fails."""
    ci = estimate.interval(confidence)
    allowance = abs(estimate.transient) + bias
    bad = first_nonfinite({"rate": np.array([estimate.rate]), "interval": np.array(ci), "drift": np.array([allowance])})
    resolution = detectable_effect(ci, allowance, confidence) if not bad else float("nan")
    verdict = FAIL if bad else effect_verdict(ci, predicted, allowance, resolution, target * abs(predicted))
    return Check(
        "collapse_rate",
        predicted,
        estimate.rate,
        ci,
        verdict,
        config,
        allowance,
        confidence,
        note=note + (f"; {bad}" if bad else ""),
        resolution=resolution,
        relative_resolution=resolution / abs(predicted),
        target=target * abs(predicted),
    )


def sign_decision(signed: Sequence[tuple[float, tuple[float, float]]]) -> tuple[str, tuple[float, tuple[float, float]]]:
    """Claims that each of several signed statistics (value, interval) is positive: ``fail`` when some interval lies
    below 0, ``pass`` when every one lies above, else ``inconclusive``; with the row that decides it: a non-finite
    one (it fails), the most contradicted (lowest upper bound) on a fail, else the one with the lowest lower bound."""
    if not signed:
        raise ValueError("sign_decision needs at least one row")
    finite = [all_finite(value, *ci) for value, ci in signed]
    if not all(finite):
        return FAIL, signed[finite.index(False)]
    if any(ci[1] < 0 for _, ci in signed):
        return FAIL, min(signed, key=lambda row: row[1][1])
    verdict = PASS if all(ci[0] > 0 for _, ci in signed) else INCONCLUSIVE
    return verdict, min(signed, key=lambda row: row[1][0])


@dataclass(frozen=True)
class Comparison:
    """Rate of ``first`` minus rate of ``second`` (labels; independent runs, so their standard errors add in
    quadrature), predicted ``predicted`` (its sign is the claim)."""

    first: str
    second: str
    difference: float
    se: float
    predicted: float
    df: float  # Welch-Satterthwaite degrees of freedom of the difference

    @classmethod
    def of(cls, first: str, second: str, a: CollapseRate, b: CollapseRate, predicted: float) -> Comparison:
        se = float(np.hypot(a.se, b.se))
        df = se**4 / (a.se**4 / (a.paths - 1) + b.se**4 / (b.paths - 1)) if se > 0 else float(a.paths + b.paths - 2)
        return cls(first, second, a.rate - b.rate, se, predicted, df)


def _interval(c: Comparison, level: float) -> tuple[float, float]:
    return _t_interval(c.difference, c.se, c.df, level)


def ordering_check(name: str, comparisons: Sequence[Comparison], confidence: float, config: dict, note: str) -> Check:
    """An ordering claim over ``comparisons`` (each predicted by at least ``MIN_EFFECT`` in size; those whose
    predicted difference is below their own resolution are left out, and the note says how many): every measured
    difference must have its predicted sign. Each comparison's interval is at the check's level divided among them
    (Bonferroni); the statistic is the smallest signed difference s_k D_k (s_k the predicted sign). Fails when some
    interval lies entirely on the wrong side of 0 (the simulation contradicts the prediction), passes when every
    interval lies on the predicted side; else inconclusive. Resolution: the largest over the comparisons of the
    effect each confirms with 90% probability, as a fraction of its predicted difference (target 1)."""
    level = 1.0 - (1.0 - confidence) / max(len(comparisons), 1)
    bad = [f"{c.first} vs {c.second}" for c in comparisons if not all_finite(c.difference, c.se, c.df)]
    if bad:  # a diverged run is a failure, never a comparison left out
        nan = float("nan")
        return Check(name, 0.0, nan, (nan, nan), FAIL, config, 0.0, confidence, note=f"{note}; not finite: {bad}")
    # a comparison is decidable when its predicted difference is at least its resolution (the effect confirmed with
    # probability 90%); the standard errors do not depend on the measured signs, so this choice cannot favour them
    decidable = [c for c in comparisons if abs(c.predicted) >= detectable_effect(_interval(c, level), 0.0, level)]
    undecidable = len(comparisons) - len(decidable)
    note += f"; {undecidable} of {len(comparisons)} comparisons left out: predicted differences below their resolution"
    comparisons = decidable
    if not comparisons:
        nan = float("nan")
        return Check(
            name, 0.0, nan, (nan, nan), INCONCLUSIVE, config, 0.0, confidence, note=note + "; no comparison qualifies"
        )
    signed = []
    for c in comparisons:
        s = np.sign(c.predicted)
        lo, hi = sorted(float(s * v) for v in _interval(c, level))
        signed.append((float(s * c.difference), (lo, hi), c))
    verdict, worst = sign_decision([(value, ci) for value, ci, _ in signed])
    # in units of each comparison's predicted difference: every one kept is resolved (<= 1)
    resolution = max(detectable_effect(ci, 0.0, level) / abs(c.predicted) for _, ci, c in signed)
    contradicted = [f"{c.first} vs {c.second}" for _, ci, c in signed if ci[1] < 0]
    detail = "; ".join(
        f"{c.first} - {c.second}: {c.difference:+.3g} (predicted {c.predicted:+.3g})" for _, _, c in signed
    )
    note += f"; {len(comparisons)} decided, each at {confidence_label(level)}: {detail}"
    if contradicted:
        note += f"; contradicted: {', '.join(contradicted)}"
    return Check(
        name,
        0.0,
        worst[0],
        worst[1],
        verdict,
        config,
        0.0,
        confidence,
        note=note,
        resolution=resolution,
        target=1.0,
    )


__all__ = [
    "CLUSTERED",
    "CONTINUUM",
    "ENERGY_FLOOR",
    "MIN_EFFECT",
    "MIN_WINDOW",
    "RATE_TARGET",
    "CollapseRate",
    "Comparison",
    "collapse_observables",
    "collapse_rate",
    "discretisation",
    "layer_rate",
    "ordering_check",
    "rate_check",
    "record_collapse",
    "sign_decision",
    "tight_cluster",
]
