"""Conditional propagation of chaos: systems of N tokens driven by one common noise.

Experiment (one Brownian path per sample, shared by every system):
  - systems a_N and b_N for each N of a ladder: i.i.d. uniform initial tokens, independent between a
    and b (a_N holds the first N tokens of one draw, b_N the first N of another), same noise;
  - a large system of M tokens whose first N tokens are a_N's (the Sznitman coupling).
The layer map must take a noise whose law does not depend on N (a field of position: model F's
value matrices, model A's MLP block), so every system sees the same noise.

Measured per path at T (and at time 0, the sampling baseline):
  phi_sq    |<phi, mu_a> - <phi, mu_b>|^2 for smooth test functions phi (``TEST_FUNCTIONS``);
  w2_sq     W_2^2(mu_a, mu_b): exact assignment (scipy) for N <= ``assignment_max``;
  sliced_sq sliced W_2^2 over fixed random directions, for every N;
  sznitman  (1/N) sum_i |X_i^N - X_i^M|^2 against the large system.

Given the noise the tokens are (asymptotically) i.i.d., so E|<phi, mu_a> - <phi, mu_b>|^2 =
2 E Var(phi | noise) / N + O(N^-2): order 1 in 1/N. At time 0 it is exactly 2 Var(phi) / N under the
uniform law (``baseline_variance``). The Sznitman distance compares nested empirical measures, whose
difference has variance proportional to 1/N - 1/M; it is fitted against that step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from verify._common import check_int, check_ladder, check_real

from .._models import LayerMap
from .._output import Panel, Series
from .._paths import BrownianBlock, Level, PathStreams, RateTolerance, common_noise, run_coupled, run_seeded
from .._runtime import STREAM_KEYS, concatenate_blocks, random_stream
from .._statistics import (
    CONFIDENCE,
    FAIL,
    INCONCLUSIVE,
    NO_TARGET,
    PASS,
    Check,
    bootstrap_counts,
    detectable_effect,
    effect_check,
    fit_order,
    limit_plateau,
    limit_verdict,
    scale_family_interval,
)

TEST_FUNCTIONS = ("x_0", "x_0 x_1", "x_0^2")


def empirical_means(x: np.ndarray) -> np.ndarray:
    """<phi, mu> for each test function: (paths, 3)."""
    return np.stack([x[..., 0].mean(-1), (x[..., 0] * x[..., 1]).mean(-1), (x[..., 0] ** 2).mean(-1)], axis=-1)


def baseline_variance(dim: int) -> np.ndarray:
    """Var(phi(X)) for X uniform on S^{d-1}: 1/d, 1/(d(d+2)), 2(d-1)/(d^2(d+2)) (moments of the sphere)."""
    d = float(dim)
    return np.array([1 / d, 1 / (d * (d + 2)), 2 * (d - 1) / (d * d * (d + 2))])


def w2_squared(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact W_2^2 between the empirical measures of x and y (paths, N, d), by optimal assignment."""
    out = np.empty(x.shape[0])
    for p in range(x.shape[0]):
        cost = np.sum((x[p, :, None, :] - y[p, None, :, :]) ** 2, axis=-1)
        rows, cols = linear_sum_assignment(cost)
        out[p] = cost[rows, cols].mean()
    return out


def sliced_w2_squared(x: np.ndarray, y: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Sliced W_2^2: mean over unit ``directions`` (k, d) of the 1-D W_2^2 of the projections."""
    px = np.sort(x @ directions.T, axis=-2)
    py = np.sort(y @ directions.T, axis=-2)
    return np.mean((px - py) ** 2, axis=(-1, -2))


@dataclass(frozen=True, kw_only=True)
class ChaosDesign(RateTolerance):
    """Token ladder, large system M, depth, horizon, paths; the order is the mean-square order in 1/N."""

    tokens: tuple[int, ...]
    large: int
    depth: int = 16
    horizon: float = 1.0
    paths: int = 128
    block_paths: int = 64
    assignment_max: int = 512
    slices: int = 64
    order_target: float = 0.6
    sampler_target: float = 0.3  # sampler_baseline may miss a relative error of the initial variance up to this

    def __post_init__(self) -> None:
        check_ladder("tokens", self.tokens, minimum=2)
        check_int("large", self.large, minimum=2 * self.tokens[-1])
        check_int("depth", self.depth, minimum=1)
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("paths", self.paths, minimum=2)


@dataclass(frozen=True)
class ChaosData:
    phi_sq: np.ndarray  # (paths, tokens, 3) at T
    phi_sq0: np.ndarray  # at time 0
    w2_sq: np.ndarray  # (paths, exact levels) at T
    w2_sq0: np.ndarray
    sliced_sq: np.ndarray  # (paths, tokens)
    sliced_sq0: np.ndarray
    sznitman: np.ndarray  # (paths, tokens)


def _pair_measures(a: np.ndarray, b: np.ndarray, exact: bool, directions: np.ndarray) -> tuple[np.ndarray, ...]:
    phi = (empirical_means(a) - empirical_means(b)) ** 2
    w2 = w2_squared(a, b) if exact else None
    return phi, w2, sliced_w2_squared(a, b, directions)


def coupled_chaos(
    model_for: Callable[[int], LayerMap],
    design: ChaosDesign,
    seed: int,
    key: Sequence[int],
    progress: Callable[[int], None] | None = None,
) -> ChaosData:
    """Run the experiment of the module docstring; ``model_for(n)`` is the layer map for n tokens."""
    sizes = list(design.tokens)
    models = [model_for(n) for n in sizes] + [model_for(design.large)]
    dim = models[0].dim
    levels = [Level(f"a{n}", m, 1) for n, m in zip(sizes, models)]
    levels += [Level(f"b{n}", m, 1) for n, m in zip(sizes, models)]
    levels.append(Level(f"M={design.large}", models[-1], 1))
    noise = common_noise(levels)
    h = design.horizon / design.depth
    direction_rng = random_stream(seed, (STREAM_KEYS["derived"], *key, 1))
    directions = direction_rng.standard_normal((design.slices, dim))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    exact = [n <= design.assignment_max for n in sizes]

    def compute(streams: PathStreams, advance) -> dict[str, np.ndarray]:
        big = streams.initial(lambda rng, k: rng.standard_normal((k, design.large, dim)))
        other = streams.initial(lambda rng, k: rng.standard_normal((k, sizes[-1], dim)))
        big /= np.linalg.norm(big, axis=-1, keepdims=True)
        other /= np.linalg.norm(other, axis=-1, keepdims=True)
        x0 = [big[:, :n] for n in sizes] + [other[:, :n] for n in sizes] + [big]
        block = BrownianBlock(noise, streams, h)
        final = run_coupled(levels, [], x0, block, design.depth, advance).final
        k = len(sizes)
        at_t = [_pair_measures(final[i], final[k + i], exact[i], directions) for i in range(k)]
        at_0 = [_pair_measures(x0[i], x0[k + i], exact[i], directions) for i in range(k)]
        diff = [final[i] - final[-1][:, :n] for i, n in enumerate(sizes)]
        return {
            "phi_sq": np.stack([m[0] for m in at_t], axis=1),
            "phi_sq0": np.stack([m[0] for m in at_0], axis=1),
            "w2_sq": np.stack([m[1] for m, e in zip(at_t, exact) if e], axis=1),
            "w2_sq0": np.stack([m[1] for m, e in zip(at_0, exact) if e], axis=1),
            "sliced_sq": np.stack([m[2] for m in at_t], axis=1),
            "sliced_sq0": np.stack([m[2] for m in at_0], axis=1),
            "sznitman": np.stack([np.mean(np.sum(dd * dd, axis=-1), axis=-1) for dd in diff], axis=1),
        }

    return ChaosData(
        **concatenate_blocks(
            run_seeded(
                compute,
                name="coupled_chaos",
                configuration=(design, models),
                seed=seed,
                key=key,
                paths=design.paths,
                block_paths=design.block_paths,
                progress=progress,
            )
        )
    )


def theorem_rate(dim: int) -> float:
    """The exponent q of the theorem's bound r_d(N) ~ N^-q: 1/2 for d <= 4 (with a log at d = 4), 2/d above."""
    return 0.5 if dim <= 4 else 2.0 / dim


CHECKS = 2 * len(TEST_FUNCTIONS) + 3  # per model: chaos_rate and sampler_baseline per phi, chaos_limit, w2, sznitman


def analyse_chaos(
    data: ChaosData,
    design: ChaosDesign,
    dim: int,
    config: dict,
    rng: np.random.Generator,
    confidence: float = CONFIDENCE,
) -> tuple[list[Check], list[Panel]]:
    """Checks ``chaos_rate`` (per test function), ``sampler_baseline``, ``chaos_limit``, ``w2_rate``,
    ``sznitman_rate`` (intervals at ``confidence``); panels for the test functions, W_2 and the Sznitman distance.

    These compare systems built by the same code on the same noise: they test the *rate*. The limit itself is
    tested against the SPDE in ``convergence._experiments.mean_field``."""
    counts = bootstrap_counts(rng, data.phi_sq.shape[0], design.replicates)
    checks, series = _test_function_checks(data, design, config, counts, confidence)
    checks += _sampler_baseline_checks(data, design, dim, config, confidence)
    panels = [Panel(f"chaos: {_label(config)}", "1/N", "RMS |<phi,mu_a> - <phi,mu_b>|", series, design.order / 2)]
    w2_check, w2_panel = _w2_rate_check(data, design, dim, config, counts, confidence)
    sznitman_check, sznitman_panel = _sznitman_check(data, design, config, counts, confidence)
    return checks + [w2_check, sznitman_check], panels + [w2_panel, sznitman_panel]


def _test_function_checks(
    data: ChaosData, design: ChaosDesign, config: dict, counts: np.ndarray, confidence: float
) -> tuple[list[Check], list[Series]]:
    """``chaos_rate`` per test function and ``chaos_limit`` (their sum's plateau), with the per-phi series."""
    steps = 1.0 / np.asarray(design.tokens, dtype=np.float64)
    checks, series = [], []
    for j, name in enumerate(TEST_FUNCTIONS):
        fit = fit_order(steps, data.phi_sq[:, :, j], counts, confidence)
        checks.append(
            design.mean_square_order_check(
                "chaos_rate",
                fit,
                {**config, "phi": name},
                "E|<phi, mu_a> - <phi, mu_b>|^2 ~ C N^(-q) at T (mean-square order q = 2 x RMS order)",
                confidence,
            )
        )
        series.append(Series.from_fit(f"phi = {name}, T", fit))
    fit = fit_order(steps, data.phi_sq.sum(axis=-1), counts, confidence)
    point, ci, how = limit_plateau(fit, design.order, confidence=confidence)
    smallest = float(fit.error[-1] ** 2)
    checks.append(
        Check(
            "chaos_limit",
            0.0,
            point,
            ci,
            limit_verdict(ci, 0.1 * smallest, smallest),
            config,
            0.1 * smallest,
            note=f"{how}, summed over the test functions; allowance 0.1 x the largest N's "
            "value (two systems of the same code: the rate's plateau, not the limit; see mean_field); "
            "target: a plateau as large as the largest N's value",
            resolution=detectable_effect(ci, 0.1 * smallest, confidence),
            confidence=confidence,
            target=smallest,
        )
    )
    return checks, series


def _sampler_baseline_checks(
    data: ChaosData, design: ChaosDesign, dim: int, config: dict, confidence: float
) -> list[Check]:
    """Exact algebra at time 0: N |<phi, mu_a> - <phi, mu_b>|^2 / 2 has mean Var(phi) under the uniform law
    (a calibration of the initial sampler, not a chaos claim: named for what it tests)."""
    sizes = np.asarray(design.tokens, dtype=np.float64)
    scaled = (data.phi_sq0 * sizes[None, :, None] / 2).mean(axis=1)
    checks = []
    for j, name in enumerate(TEST_FUNCTIONS):
        mean, lower, upper = scale_family_interval(scaled[:, j], confidence)
        variance = float(baseline_variance(dim)[j])
        checks.append(
            effect_check(
                "sampler_baseline",
                variance,
                mean,
                (lower, upper),
                0.0,
                design.sampler_target * variance,
                {**config, "phi": name},
                confidence=confidence,
                scale=variance,
                note="time 0: N E|<phi, mu_a> - <phi, mu_b>|^2 / 2 = Var(phi) under the uniform law; "
                f"target {design.sampler_target:.0%} of Var(phi) (a calibration of the initial "
                "sampler)",
            )
        )
    return checks


def _w2_rate_check(
    data: ChaosData, design: ChaosDesign, dim: int, config: dict, counts: np.ndarray, confidence: float
) -> tuple[Check, Panel]:
    """``w2_rate``: the decay of W_2^2(mu_a, mu_b) at T (exact assignment) against the theorem's bound, one-sided."""
    sizes = np.asarray(design.tokens, dtype=np.float64)
    steps = 1.0 / sizes
    w2_steps = steps[sizes <= design.assignment_max]
    at_t = fit_order(w2_steps, data.w2_sq, counts, confidence)
    at_0 = fit_order(w2_steps, data.w2_sq0, counts, confidence)
    w2_series = [Series.from_fit("W2 at T", at_t), Series.from_fit("W2 at 0 (sampling)", at_0)]
    for label, values in (("sliced W2 at T", data.sliced_sq), ("sliced W2 at 0", data.sliced_sq0)):
        w2_series.append(Series.from_fit(label, fit_order(steps, values, counts)))
    bound = theorem_rate(dim)
    ci = (2 * at_t.order_ci[0], 2 * at_t.order_ci[1])
    resolution = detectable_effect(ci, design.order_allowance, confidence)
    floor = bound - design.order_allowance
    # one-sided: an interval above the floor holds the claim at this level however wide (no target needed)
    target = NO_TARGET if ci[0] > floor else design.order_target
    verdict = FAIL if ci[1] < floor else INCONCLUSIVE if resolution > target else PASS
    check = Check(
        "w2_rate",
        bound,
        2 * at_t.order,
        ci,
        verdict,
        config,
        design.order_allowance,
        confidence,
        resolution=resolution,
        target=target,
        note=(
            f"W_2^2(mu_a, mu_b) ~ N^(-q) at T (exact assignment, N <= {design.assignment_max}); "
            f"the theorem's bound r_d(N) decays like N^-{bound:g}: the claim holds unless the "
            f"measured decay is slower"
            + (f" (the interval lies above {floor:g}: no target needed)" if target == NO_TARGET else "")
            + "; at time "
            f"0 (sampling) q = {2 * at_0.order:.3g} [{2 * at_0.order_ci[0]:.3g}, "
            f"{2 * at_0.order_ci[1]:.3g}]"
        ),
    )
    return check, Panel(f"W2: {_label(config)}", "1/N", "RMS W2", w2_series, bound / 2)


def _sznitman_check(
    data: ChaosData, design: ChaosDesign, config: dict, counts: np.ndarray, confidence: float
) -> tuple[Check, Panel]:
    """``sznitman_rate``: the token-mean distance to the large system driven by the same noise."""
    sz_steps = 1.0 / np.asarray(design.tokens, dtype=np.float64) - 1.0 / design.large
    sz_fit = fit_order(sz_steps, data.sznitman, counts, confidence)
    check = design.mean_square_order_check(
        "sznitman_rate",
        sz_fit,
        config,
        f"(1/N) sum_i |X_i^N - X_i^M|^2 ~ C (1/N - 1/M)^q, M = {design.large}, same noise and shared initial tokens",
        confidence,
    )
    panel = Panel(
        f"Sznitman: {_label(config)}",
        "1/N - 1/M",
        "RMS distance to the large system",
        [Series.from_fit("token-mean distance at T", sz_fit)],
        design.order / 2,
    )
    return check, panel


def _label(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
