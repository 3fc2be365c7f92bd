"""The local check of a covariance SDE on a width-indexed block (``convergence._models.width_blocks``): one block at
width n moves V = Z Z^T / n by b(V) / n plus a fluctuation of covariance Sigma(V) / n, so at h = 1/n

    n (E[V' | Z] - V) = b(V) + B n^-q + C n^-2q + ...,    n Cov(V') = Sigma(V) + B' n^-q + ...,

q the block's ``rate``. At each state V the block runs from representations Z with Z Z^T / n = V exactly
(``frame_states``: Haar frames; for a block that commutes with Z -> Z O they are all alike, for another the moments are
averages over frames) at every width of a ladder n_1 < n_2 < n_3 (each twice the last), equally many independent
samples at each: the per-sample drift n (V'_est - V) - b (V'_est the block's ``mean_estimate`` where it gives one, else
V') and the per-sample covariance n (y - mean y)(y - mean y)^T N / (N - 1) - Sigma over the N samples' coordinates y of
V'. The checks judge the limit at the claimed rate (a limit is judged at its rate, never with the rate fitted): the
Richardson combination of the two widest widths, exact on L + B n^-q, per sample, so its interval is a plain mean's.
Its allowance bounds the n^-2q remainder from the three widest widths (``remainder_allowance``: the upper end of the
interval of the consecutive differences' departure from the ratio 2^-q, times the remainder it implies) plus the
rounding of n (V' - V) in the block's own dtype. A fail also needs the widest width farther from the claim than the
ladder could still move at half the rate (``far_beyond``), or the widths shown in the rate's regime
(``outside_regime``: no resolved consecutive difference out of the ratio 2^-q by more than 50%; a scale check's own
series) and the fail standing with the allowance widened by the ``rate_margin``: the limit at the ratio the differences
show, where it differs from 2^-q (a block a little slower or faster than claimed is not failed for its rate); else the
fail is inconclusive. The resolution is the pass side's. Differences at the noise floor count as in the regime (a flat
ladder's limit is judged): three widths cannot tell a limit off the claim from one reached much more slowly than
claimed with its differences below the noise, nor a next term other than n^-2q.

Four checks per state: ``drift_scale`` (the drift error's projection on b / |b|, relative to |b|, or to the typical
noise sqrt(mean diag Sigma) where that is larger: a drift small beside the noise is judged in its units), ``drift``
(every coordinate, a max-z check in units of the typical noise, or of |V| when the claim has none),
``diffusion_scale`` (the covariance error's projection on Sigma, relative to |Sigma|^2) and ``diffusion`` (every
entry, in units of max |Sigma|, or |V|^2). A claim without drift or without diffusion has no scale check of it. The
estimates at each width are in the scale checks' notes. A user's block with a ``mean_estimate`` has a fifth check,
``mean_estimate``: the estimate's mean against V' itself at the widest width, at the drift's target (the suite's
blocks' estimates are unbiased by construction, shown in the tests, and skip it).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from verify._models import frame_states

from .._models.covariance_limits import CovarianceSDE, upper
from .._models.width_blocks import (
    ResidualBlock,
    ShapedAttentionBlock,
    ShapedMLPBlock,
    ShapedTransformerBlock,
    WidthBlock,
    covariance,
)
from .._paths import block_step, in_float64, seeded_block
from .._runtime import random_stream
from .._statistics import FAIL, INCONCLUSIVE, Check, z_value
from .ladder_extrapolation import (
    RATIO_BAND,
    departure_weights,
    extrapolation_weights,
    rate_margin,
    reach,
    remainder_ratio,
)
from .local_statistics import ROUNDING_OPERATIONS, interval_check, max_z_check

WIDTH_BLOCK = 256  # the looks' unit of samples


def draw_width(
    block: WidthBlock, state: np.ndarray, width: int, start: int, stop: int, seed: int, key: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Samples ``start`` .. ``stop`` - 1 (whole ``seeded_block``s, each its own seeded stream) at one state and width:
    the coordinates y of V' (samples, p), the per-sample drift n (V'_est - V) (samples, p) and the machine epsilon of
    the dtype the block returned (float64's at least)."""
    ys, drifts, precision = [], [], float(np.finfo(np.float64).eps)
    size = seeded_block(width)
    first = start // size
    for index in range(first, -(-stop // size)):
        rng = random_stream(seed, (*key, width, index))
        z = frame_states(state, width, size, rng)
        moved, weights, eps = block_step(block, z, rng)
        precision = max(precision, eps)
        v_moved = covariance(moved)
        estimator = getattr(block, "mean_estimate", None)
        estimate = v_moved
        if estimator is not None:
            estimate, eps = in_float64(estimator(z, weights))
            precision = max(precision, eps)
        ys.append(upper(v_moved))
        drifts.append(width * (upper(estimate) - upper(state)))
    skip = start - first * size
    rows = slice(skip, skip + stop - start)
    return np.concatenate(ys)[rows], np.concatenate(drifts)[rows], precision


@dataclass
class WidthLadder:
    """A state's samples so far at each width of the ladder (extended look by look)."""

    widths: tuple[int, ...]
    ys: dict[int, np.ndarray] = field(default_factory=dict)
    drifts: dict[int, np.ndarray] = field(default_factory=dict)
    precision: float = float(np.finfo(np.float64).eps)  # the coarsest dtype the block returned

    def extend(self, block, state: np.ndarray, samples: int, seed: int, key: tuple[int, ...]) -> None:
        for width in self.widths:
            have = 0 if width not in self.ys else self.ys[width].shape[0]
            if have >= samples:
                continue
            y, d, precision = draw_width(block, state, width, have, samples, seed, key)
            self.precision = max(self.precision, precision)
            self.ys[width] = y if have == 0 else np.concatenate([self.ys[width], y])
            self.drifts[width] = d if have == 0 else np.concatenate([self.drifts[width], d])

    def covariance_terms(self, width: int, samples: int) -> np.ndarray:
        """n (y - mean y)_i (y - mean y)_j N / (N - 1) for i <= j, per sample, of mean n Cov: (N, p (p + 1) / 2)."""
        y = self.ys[width][:samples]
        centred = y - y.mean(axis=0)
        rows, cols = np.triu_indices(y.shape[1])
        return width * centred[:, rows] * centred[:, cols] * samples / (samples - 1)


def combined(per_width: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """The per-sample combination sum_k c_k x_k of equally many independent samples at each width."""
    return sum(c * x for c, x in zip(weights, per_width) if c != 0)


def interval(values: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Per component, the mean of per-sample ``values`` (N, ...) and the half-width z se of its interval."""
    values = values.reshape(values.shape[0], -1)
    return values.mean(axis=0), z * values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def departure(per_width: list[np.ndarray], rate: float) -> np.ndarray:
    """Per sample, delta = -r m_1 + (1 + r) m_2 - m_3 over the three widths (r = 2^-q): D_2 - r D_1, the departure
    of the consecutive differences D_k from the ratio of the claimed rate."""
    return combined(per_width, departure_weights(rate))


def remainder_allowance(per_width: list[np.ndarray], widths: tuple[int, ...], rate: float, z: float) -> np.ndarray:
    """An upper bound on the n^-2q remainder of the extrapolation per component: on m(n) = L + B n^-q + C n^-2q the
    ``departure`` delta is C d.n^-2q (d its weights), and the extrapolation's bias C c.n^-2q, so the bias is delta
    (c.n^-2q) / (d.n^-2q); delta is taken at the upper end of its z interval (|mean| + z se), so the bound holds at the
    check's level. At the noise floor it is noise-sized: it costs samples, never a wrong fail."""
    mean, half = interval(departure(per_width, rate), z)
    return remainder_ratio(widths, rate) * (np.abs(mean) + half).reshape(per_width[0].shape[1:])


def outside_regime(per_width: list[np.ndarray], rate: float, z: float) -> bool:
    """Whether the three widths are not shown in the regime of the claimed rate q (a fail needs evidence
    there): some component whose first consecutive difference D_1 is resolved (beyond z standard errors) has a
    ``departure`` whose interval leaves +- ``RATIO_BAND`` 2^-q |D_1| (consecutive differences not in the ratio of one
    rate). Unresolved differences are at the noise floor: no bias shows."""
    first, first_half = interval(per_width[0] - per_width[1], z)
    delta, delta_half = interval(departure(per_width, rate), z)
    resolved = np.abs(first) > first_half
    return bool(np.any(resolved & (np.abs(delta) + delta_half > RATIO_BAND * 2.0**-rate * np.abs(first))))


def far_beyond(per_width: list[np.ndarray], allowance: np.ndarray, steps: tuple, rate: float, z: float) -> bool:
    """Whether some component at the widest width is farther from the claim than the ladder could still move: the lower
    end of |m_3| less its allowance above the ladder's ``reach`` from its consecutive ``differences`` (``steps``).
    A fail outside the rate's regime stands on this evidence alone (an ODE claimed for a block with noise)."""
    finest, finest_half = interval(per_width[-1], z)
    return bool(np.any(np.abs(finest) - finest_half - np.ravel(allowance) > reach(*steps, rate)))


def differences(per_width: list[np.ndarray], z: float) -> tuple[np.ndarray, ...]:
    """The widest widths' consecutive differences D_1 = m_2 - m_1 and D_2 = m_3 - m_2 with their half-widths, per
    component: (D_1, h_1, D_2, h_2)."""
    first, first_half = interval(per_width[-2] - per_width[-3], z)
    last, last_half = interval(per_width[-1] - per_width[-2], z)
    return first, first_half, last, last_half


def fail_gate(per_width: list[np.ndarray], allowance: np.ndarray, rate: float, z: float) -> tuple[str, np.ndarray]:
    """What a fail of the limit at the claimed rate must also show, and the margin it must stand by: nothing ("") when
    the widest width is ``far_beyond`` the ladder's reach; "regime" (undecided) when the widths are
    ``outside_regime``; else "shown": it must stand with the allowance widened by the ``rate_margin`` of the widths'
    consecutive differences (per component, the margin returned)."""
    steps = differences(per_width, z)
    margin = rate_margin(*steps, rate).reshape(per_width[0].shape[1:])
    if far_beyond(per_width, allowance, steps, rate, z):
        return "", margin
    return "regime" if outside_regime(per_width, rate, z) else "shown", margin


UNDECIDED = {
    "regime": "the widest widths are not shown in the regime of the claimed rate (consecutive differences not in the "
    "ratio 2^-q)",
    "shown": "at the rate the widths' consecutive differences show, the limit could be within the allowance",
}


def undecided_fail(check: Check, gate: str, widened: object) -> Check:
    """A fail that its ``fail_gate`` does not settle (``widened``: its verdict at the allowance widened by the
    ``rate_margin``) becomes inconclusive, saying what would decide; a fail on NaN or infinity stays."""
    finite = np.all(np.isfinite([check.estimate, *check.ci])) and np.all(np.isfinite(check.allowance))
    if check.verdict != FAIL or not finite or not gate or (gate == "shown" and widened == FAIL):
        return check
    note = f"{UNDECIDED[gate]}: a fail is not decided; wider widths would decide"
    return replace(check, verdict=INCONCLUSIVE, note=f"{note}; {check.note}")


def state_checks(
    ladder: WidthLadder,
    block: WidthBlock,
    claim: CovarianceSDE,
    state: np.ndarray,
    samples: int,
    z: float,
    confidence: float,
    power: float,
    target: float,
    config: dict,
) -> list[Check]:
    """The four checks at one state (module docstring) on the ladder's limit at the claimed rate."""
    weights = extrapolation_weights(ladder.widths, block.rate)
    b = upper(claim.drift(state[None])[0])
    sigma = claim.diffusion(state[None])[0]
    sigma_terms = sigma[np.triu_indices(sigma.shape[0])]
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(sigma))):
        where = f"the claim '{claim.name}' at {state.tolist()} (drift {b.tolist()}, diffusion {sigma.tolist()})"
        return [nonfinite_check(where, config)]
    drifts = [ladder.drifts[w][:samples] - b for w in ladder.widths]
    terms = [ladder.covariance_terms(w, samples) - sigma_terms for w in ladder.widths]
    if not np.allclose(sigma, sigma.T):
        raise ValueError(
            f"sde: the claimed diffusion is a covariance, symmetric; got {sigma.tolist()} at {state.tolist()}"
        )
    if not all(np.all(np.isfinite(x)) for x in (*drifts, *terms)):
        bad = [w for w in ladder.widths if not all(np.all(np.isfinite(x)) for x in (ladder.ys[w], ladder.drifts[w]))]
        return [nonfinite_check(f"the block's output or mean_estimate at width(s) {bad}", config)]
    single = ROUNDING_OPERATIONS * ladder.precision * ladder.widths[-1] * np.max(np.abs(state))
    rounding = single * float(np.sum(np.abs(weights)))
    noise_unit, cov_unit = units(sigma, state)
    drift_allowance = rounding + remainder_allowance(drifts, ladder.widths, block.rate, z)
    cov_allowance = rounding * cov_unit + remainder_allowance(terms, ladder.widths, block.rate, z)
    note = (
        f"widths {', '.join(map(str, ladder.widths))}, {samples} samples each, extrapolated at the claimed rate "
        f"n^-{block.rate:g} (weights {', '.join(f'{c:.3g}' for c in weights)})"
    )
    args = (z, config, confidence, power, target)

    allowances = (drift_allowance, cov_allowance)
    checks = claim_checks(drifts, terms, b, sigma_terms, weights, allowances, (noise_unit, cov_unit), note, args)
    if checks_estimate(block):
        checks.append(_estimate_check(ladder, state, samples, single, noise_unit, note, args))
    failed = {c.name for c in checks if c.verdict == FAIL}
    gates, widened = {}, {}
    vectors = {"drift": (drifts, drift_allowance, noise_unit), "diffusion": (terms, cov_allowance, cov_unit)}
    for name in failed & vectors.keys():  # a vector check is gated on every component
        per_width, allowance, unit = vectors[name]
        gates[name], margin = fail_gate(per_width, allowance, block.rate, z)
        widened[name] = _coordinates_check(name, per_width, weights, allowance + margin, unit, note, args).verdict
    scales = {
        "drift_scale": (drifts, b, drift_allowance, noise_unit),
        "diffusion_scale": (terms, sigma_terms, cov_allowance, 0.0),
    }
    for name in failed & scales.keys():  # a scale check on its own series, the projection it extrapolates
        gates[name], widened[name] = scale_gate(name, *scales[name], weights, note, args, block.rate)
    return [undecided_fail(c, gates.get(c.name, ""), widened.get(c.name, FAIL)) for c in checks]


def scale_gate(name, per_width, claimed, allowance, floor, weights, note, args, rate) -> tuple[str, object]:
    """``fail_gate`` on what a scale check extrapolates, the projection of the errors on ``claimed`` per sample (not
    on every component: one out of the rate's regime need not move the projection), and the check's verdict with its
    allowance widened by that series' ``rate_margin``."""
    norm = scale_norm(claimed, floor)
    projected = [(x @ claimed / norm)[:, None] for x in per_width]
    bias = along(allowance, claimed)
    gate, margin = fail_gate(projected, np.array([bias / norm]), rate, args[0])
    widened = _scale_check(name, per_width, claimed, weights, bias + float(margin[0]) * norm, note, args, floor)
    return gate, widened[0].verdict


def along(allowance: np.ndarray, claimed: np.ndarray) -> float:
    """The allowance of the projection on ``claimed``: sum_i a_i |c_i| over the components where c_i != 0 (an
    infinite a_i elsewhere has no weight)."""
    weighted = claimed != 0
    return float(allowance[weighted] @ np.abs(claimed[weighted]))


def claim_checks(drifts, terms, b, sigma_terms, weights, allowances, units, note, args) -> list[Check]:
    """``drift_scale``, ``drift``, ``diffusion_scale``, ``diffusion`` (module docstring) at the given per-component
    allowances of the drift and of the covariance terms."""
    drift_allowance, cov_allowance = allowances
    noise_unit, cov_unit = units
    return [
        *_scale_check("drift_scale", drifts, b, weights, along(drift_allowance, b), note, args, noise_unit),
        _coordinates_check("drift", drifts, weights, drift_allowance, noise_unit, note, args),
        *_scale_check("diffusion_scale", terms, sigma_terms, weights, along(cov_allowance, sigma_terms), note, args),
        _coordinates_check("diffusion", terms, weights, cov_allowance, cov_unit, note, args),
    ]


SUITE_BLOCKS = (ShapedMLPBlock, ResidualBlock, ShapedAttentionBlock, ShapedTransformerBlock)


def checks_estimate(block: WidthBlock) -> bool:
    """Whether a block's ``mean_estimate`` is checked: any but the suite's own blocks' (exactly those classes), which
    are unbiased by construction and tested."""
    return getattr(block, "mean_estimate", None) is not None and type(block) not in SUITE_BLOCKS


def nonfinite_check(where: str, config: dict) -> Check:
    """NaN or infinity ``where`` (the block's samples, or the claim): a fail, saying where."""
    note = f"NaN or infinity in {where}: cannot pass"
    return Check("finite", 0.0, math.nan, (math.nan, math.nan), FAIL, config, note=note, false_failure_rate=0.0)


def _estimate_check(ladder: WidthLadder, state: np.ndarray, samples: int, rounding: float, unit: float, note, args):
    """``mean_estimate``: the block's estimate of E[V' | Z] against V' itself at the widest width, n (y - estimate) per
    sample, every coordinate within its interval of 0 at the drift check's target (an estimate with another mean
    would move the drift checks; the plain V' it is compared with needs O(n) samples per unit of precision)."""
    z, config, confidence, power, target = args
    width = ladder.widths[-1]
    gap = width * (ladder.ys[width][:samples] - upper(state)) - ladder.drifts[width][:samples]
    text = f"{note}; the block's mean_estimate against V' itself at width {width}, in units of {unit:.3g}"
    allowance = np.full(gap.shape[1], rounding)
    return max_z_check("mean_estimate", gap, allowance, z, config, text, confidence, unit, 5 * target, power)


def units(sigma: np.ndarray, state: np.ndarray) -> tuple[float, float]:
    """The drift's unit, the typical noise sqrt(mean diag Sigma), and the covariance's, max |Sigma| (|V| and |V|^2
    for a claim without noise)."""
    if not np.any(sigma):
        return float(np.max(np.abs(state))), float(np.max(np.abs(state))) ** 2
    return float(np.sqrt(np.mean(np.diag(sigma)))), float(np.max(np.abs(sigma)))


def scale_norm(claimed: np.ndarray, floor: float) -> float:
    """|c| max(|c|, floor): a scale check's error projected on the claimed c, relative to |c| or to ``floor``."""
    length = float(np.sqrt(claimed @ claimed))
    return length * max(length, floor)


def _scale_check(name, per_width, claimed, weights, allowance, note, args, floor: float = 0.0) -> list[Check]:
    """The projection of the error on the claimed vector, relative to its norm or to ``floor`` where that is larger
    (a drift small beside the noise is judged in units of the noise); none for a zero claim."""
    if not np.any(claimed):
        return []
    z, config, confidence, power, target = args
    norm = scale_norm(claimed, floor)
    relative = [float((x @ claimed).mean() / norm) for x in per_width]
    ladder = ", ".join(f"{a:.4g}" for a in relative)
    per_sample = combined(per_width, weights) @ claimed / norm
    text = f"{note}; relative error along the widths {ladder}"
    advice = "the extrapolation's remainder exceeds the target: wider widths, or more samples (it is measured)"
    return [interval_check(name, per_sample, allowance / norm, z, target, config, text, confidence, power, 2.0, advice)]


def _coordinates_check(name, per_width, weights, allowance, unit, note, args) -> Check:
    z, config, confidence, power, target = args
    text = f"{note}; every coordinate, in units of {unit:.3g}"
    return max_z_check(
        name,
        combined(per_width, weights),
        allowance,
        z,
        config,
        text,
        confidence,
        unit,
        5 * target,
        power,
        bias_span=2.0,
    )


def covariance_local_checks(
    block: WidthBlock,
    claim: CovarianceSDE,
    states: dict[str, np.ndarray],
    ladders: dict[str, WidthLadder],
    samples: int,
    target: float,
    seed: int,
    key: tuple[int, ...],
    family_alpha: float,
    power: float,
    config: dict,
) -> list[Check]:
    """Every state's checks at ``samples`` samples a width (the ``ladders`` extended to it), each at the Bonferroni
    level of the family (``family_alpha`` over all the checks)."""
    tests = (4 + checks_estimate(block)) * len(states)
    z = z_value(tests, family_alpha)
    confidence = 1 - family_alpha / tests
    checks = []
    for name, state in states.items():
        ladders[name].extend(block, state, samples, seed, (*key, zlib.crc32(name.encode())))  # keyed by name
        cfg = {**config, "state": name}
        checks += state_checks(ladders[name], block, claim, state, samples, z, confidence, power, target, cfg)
    return checks
