"""The local check of a covariance SDE on a width-indexed block (``convergence._models.width_blocks``): one block at
width n moves V = Z Z^T / n by b(V) / n plus a fluctuation of covariance Sigma(V) / n, so at h = 1/n

    n (E[V' | Z] - V) = b(V) + B n^-q + ...,    n Cov(V' | Z) = Sigma(V) + B' n^-q + ...,

q the block's ``rate``. At each state V the block runs from representations Z with Z Z^T / n = V exactly
(``frame_states``: a Haar frame, as good as any for a block that commutes with rotations of R^n) at every width of a
ladder n_1 < ... < n_K (each twice the last), equally many independent samples at each: the per-sample drift
n (V'_est - V) - b (V'_est the block's ``mean_estimate`` where it gives one, else V') and the per-sample covariance
n (y - mean y)(y - mean y)^T - Sigma over the coordinates y of V'. The checks judge the limit at the claimed rate
(MATH.md's rule: a limit is judged at its rate, never with the rate fitted): the least-norm combination of the widths
that is exact on L + B n^-q (``extrapolation_weights``), per sample, so its interval is a plain mean's. Its allowance
is the bound on its n^-2q remainder from the three widest widths (``remainder_allowance``: the consecutive
differences' departure from the ratio 2^-q, as the depth check bounds its Richardson remainder) plus the rounding of
n (V' - V) in float64. A fail also needs the widest widths shown in the rate's regime (``outside_regime``: resolved
consecutive differences in the ratio 2^-q within 50%; three widths at least), else it is inconclusive.

Four checks per state: ``drift_scale`` (the drift error's projection on b / |b|, relative to |b|, or to the typical
noise sqrt(mean diag Sigma) where that is larger: a drift small beside the noise is judged in its units), ``drift``
(every coordinate, a max-z check in units of the typical noise, or of |V| when the claim has none),
``diffusion_scale`` (the covariance error's projection on Sigma, relative to |Sigma|^2) and ``diffusion`` (every
entry, in units of max |Sigma|, or |V|^2). A claim without drift or without diffusion has no scale check of it. The
estimates at each width are in the scale checks' notes. A block with a ``mean_estimate`` has a fifth check,
``mean_estimate``: the estimate's mean against V' itself (plain sampling, no target: its interval decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .._models.covariance_limits import CovarianceSDE, upper
from .._models.width_blocks import WidthBlock, covariance, frame_states
from .._runtime import random_stream
from .._statistics import FAIL, INCONCLUSIVE, NO_TARGET, Check, z_value
from .local_statistics import interval_check, max_z_check

WIDTH_BLOCK = 256  # the looks' unit of samples
BLOCK_ENTRIES = 1 << 22  # the entries of one n x n weight a seeded block draws at most (32 MB in float64)


def seeded_block(width: int) -> int:
    """Samples drawn at once from one seeded stream at ``width``: ``WIDTH_BLOCK`` down to 1, halving while a block's
    n x n weight has more than ``BLOCK_ENTRIES`` entries (a power of 2 dividing ``WIDTH_BLOCK``, a function of the
    width alone: results do not depend on the looks)."""
    size = WIDTH_BLOCK
    while size > 1 and size * width * width > BLOCK_ENTRIES:
        size //= 2
    return size


ROUNDING_OPERATIONS = 16


def draw_width(
    block: WidthBlock, state: np.ndarray, width: int, start: int, stop: int, seed: int, key: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Samples ``start`` .. ``stop`` - 1 (whole ``seeded_block``s, each its own seeded stream) at one state and width:
    the coordinates y of V' (samples, p) and the per-sample drift n (V'_est - V) (samples, p)."""
    ys, drifts = [], []
    size = seeded_block(width)
    first = start // size
    for index in range(first, -(-stop // size)):
        rng = random_stream(seed, (*key, width, index))
        z = frame_states(state, width, size, rng)
        weights = {name: rng.standard_normal((size, *shape)) for name, shape in block.weight_shapes(width).items()}
        moved = np.asarray(block.block(z, weights), dtype=np.float64)
        if moved.shape != z.shape:
            raise ValueError(f"block: expected an output of shape {z.shape} (samples, m, n), got {moved.shape}")
        v_moved = covariance(moved)
        estimator = getattr(block, "mean_estimate", None)
        estimate = v_moved if estimator is None else np.asarray(estimator(z, weights), dtype=np.float64)
        ys.append(upper(v_moved))
        drifts.append(width * (upper(estimate) - upper(state)))
    skip = start - first * size
    return np.concatenate(ys)[skip : skip + stop - start], np.concatenate(drifts)[skip : skip + stop - start]


@dataclass
class WidthLadder:
    """A state's samples so far at each width of the ladder (extended look by look)."""

    widths: tuple[int, ...]
    ys: dict[int, np.ndarray] = field(default_factory=dict)
    drifts: dict[int, np.ndarray] = field(default_factory=dict)

    def extend(self, block, state: np.ndarray, samples: int, seed: int, key: tuple[int, ...]) -> None:
        for width in self.widths:
            have = 0 if width not in self.ys else self.ys[width].shape[0]
            if have >= samples:
                continue
            y, d = draw_width(block, state, width, have, samples, seed, key)
            self.ys[width] = y if have == 0 else np.concatenate([self.ys[width], y])
            self.drifts[width] = d if have == 0 else np.concatenate([self.drifts[width], d])

    def covariance_terms(self, width: int, samples: int) -> np.ndarray:
        """n (y - mean y)_i (y - mean y)_j for i <= j, per sample: (samples, p (p + 1) / 2)."""
        y = self.ys[width][:samples]
        centred = y - y.mean(axis=0)
        rows, cols = np.triu_indices(y.shape[1])
        return width * centred[:, rows] * centred[:, cols]


def extrapolation_weights(widths: tuple[int, ...], rate: float) -> np.ndarray:
    """Weights c over the ladder with sum c_k = 1 and sum c_k n_k^-q = 0 of least norm: the limit of m(n) = L + B n^-q,
    judged at the claimed rate q."""
    basis = np.stack([np.ones(len(widths)), np.asarray(widths, dtype=np.float64) ** -rate], axis=1)
    return basis @ np.linalg.solve(basis.T @ basis, np.array([1.0, 0.0]))


def combined(per_width: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """The per-sample combination sum_k c_k x_k of equally many independent samples at each width."""
    return sum(c * x for c, x in zip(weights, per_width))


REMAINDER_MARGIN = 1.5  # the depth check's margin on its Richardson remainder


def remainder_allowance(per_width: list[np.ndarray], widths: tuple[int, ...], rate: float) -> np.ndarray:
    """A bound on the n^-2q remainder of the extrapolation (``extrapolation_weights``) per component, from the three
    widest widths: on m(n) = L + B n^-q + C n^-2q the combination delta = -r m_1 + (1 + r) m_2 - m_3 (r = 2^-q; the
    departure of the consecutive differences from the ratio r) is C d.n^-2q and the extrapolation's bias C c.n^-2q,
    so the bias is delta (c.n^-2q) / (d.n^-2q), taken with ``REMAINDER_MARGIN`` (the depth check's Richardson rule;
    its noise makes it conservative, and at the noise floor it is noise-sized)."""
    if len(widths) < 3:
        return np.zeros(per_width[0].shape[1:])
    r = 2.0**-rate
    second = np.asarray(widths[-3:], dtype=np.float64) ** (-2 * rate)
    full = np.asarray(widths, dtype=np.float64) ** (-2 * rate)
    departure = np.array([-r, 1 + r, -1.0])
    delta = np.tensordot(departure, np.stack([x.mean(axis=0) for x in per_width[-3:]]), axes=1)
    return REMAINDER_MARGIN * np.abs(delta * (extrapolation_weights(widths, rate) @ full) / (departure @ second))


RATIO_BAND = 0.5  # consecutive differences within 50% of the ratio 2^-q: the widths in the regime of the rate


def outside_regime(per_width: list[np.ndarray], rate: float, z: float) -> bool:
    """Whether the three widest widths are not shown in the regime of the claimed rate q (MATH.md: a fail needs
    evidence there): some component whose first consecutive difference D_1 is resolved (beyond z standard errors)
    has a departure delta = D_2 - 2^-q D_1 whose interval leaves +- ``RATIO_BAND`` 2^-q |D_1| (consecutive
    differences not in the ratio of one rate). Unresolved differences are at the noise floor: no bias shows."""
    if len(per_width) < 3:
        return True
    x0, x1, x2 = (x.reshape(x.shape[0], -1) for x in per_width[-3:])
    r = 2.0**-rate

    def interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return values.mean(axis=0), z * values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])

    first, first_half = interval(x0 - x1)
    departure, departure_half = interval(x1 - x2 - r * (x0 - x1))
    resolved = np.abs(first) > first_half
    return bool(np.any(resolved & (np.abs(departure) + departure_half > RATIO_BAND * r * np.abs(first))))


def undecided_fail(check: Check, outside: bool, widths: tuple[int, ...]) -> Check:
    """A fail where the widths are not shown in the claimed rate's regime (``outside_regime``) becomes inconclusive,
    saying what would decide."""
    if not (outside and check.verdict == FAIL) or not np.all(np.isfinite([check.estimate, *check.ci])):
        return check  # NaN or infinity fails whatever the regime
    note = (
        "two widths cannot show the regime of the claimed rate: a fail is not decided; a third width would"
        if len(widths) < 3
        else "the widest widths are not shown in the regime of the claimed rate (consecutive differences not in the "
        "ratio 2^-q): a fail is not decided; wider widths would decide"
    )
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
    drifts = [ladder.drifts[w][:samples] - b for w in ladder.widths]
    terms = [ladder.covariance_terms(w, samples) - sigma_terms for w in ladder.widths]
    rounding = ROUNDING_OPERATIONS * np.finfo(np.float64).eps * ladder.widths[-1] * np.max(np.abs(state))
    rounding *= float(np.sum(np.abs(weights)))
    noise_unit = float(np.sqrt(np.mean(np.diag(sigma)))) if np.any(sigma) else float(np.max(np.abs(state)))
    cov_unit = float(np.max(np.abs(sigma))) if np.any(sigma) else float(np.max(np.abs(state))) ** 2
    drift_allowance = rounding + remainder_allowance(drifts, ladder.widths, block.rate)
    cov_allowance = rounding * cov_unit + remainder_allowance(terms, ladder.widths, block.rate)
    note = (
        f"widths {', '.join(map(str, ladder.widths))}, {samples} samples each, extrapolated at the claimed rate "
        f"n^-{block.rate:g} (weights {', '.join(f'{c:.3g}' for c in weights)})"
    )
    args = (z, config, confidence, power, target)
    checks = [
        *_scale_check("drift_scale", drifts, b, weights, drift_allowance @ np.abs(b), note, args, noise_unit),
        _coordinates_check("drift", drifts, weights, drift_allowance, noise_unit, note, args),
        *_scale_check("diffusion_scale", terms, sigma_terms, weights, cov_allowance @ np.abs(sigma_terms), note, args),
        _coordinates_check("diffusion", terms, weights, cov_allowance, cov_unit, note, args),
    ]
    if getattr(block, "mean_estimate", None) is not None:
        checks.append(_estimate_check(ladder, state, samples, rounding, noise_unit, note, args))
    outside = {"drift": outside_regime(drifts, block.rate, z), "diffusion": outside_regime(terms, block.rate, z)}
    return [undecided_fail(c, outside.get(c.name.split("_")[0], False), ladder.widths) for c in checks]


def _estimate_check(ladder: WidthLadder, state: np.ndarray, samples: int, rounding: float, unit: float, note, args):
    """``mean_estimate``: the block's estimate of E[V' | Z] against V' itself at the widest width, n (y - estimate) per
    sample, every coordinate within its interval of 0 (an estimate with another mean would move the drift checks)."""
    z, config, confidence, power, _ = args
    width = ladder.widths[-1]
    gap = width * (ladder.ys[width][:samples] - upper(state)) - ladder.drifts[width][:samples]
    text = f"{note}; the block's mean_estimate against V' itself at width {width}, in units of {unit:.3g}"
    allowance = np.full(gap.shape[1], rounding)
    return max_z_check("mean_estimate", gap, allowance, z, config, text, confidence, unit, NO_TARGET, power)


def _scale_check(name, per_width, claimed, weights, allowance, note, args, floor: float = 0.0) -> list[Check]:
    """The projection of the error on the claimed vector, relative to its norm or to ``floor`` where that is larger
    (a drift small beside the noise is judged in units of the noise); none for a zero claim."""
    if not np.any(claimed):
        return []
    z, config, confidence, power, target = args
    norm = float(np.sqrt(claimed @ claimed)) * max(float(np.sqrt(claimed @ claimed)), floor)
    along = [float((x @ claimed).mean() / norm) for x in per_width]
    ladder = ", ".join(f"{a:.4g}" for a in along)
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
    tests = (4 + (getattr(block, "mean_estimate", None) is not None)) * len(states)
    z = z_value(tests, family_alpha)
    confidence = 1 - family_alpha / tests
    checks = []
    for index, (name, state) in enumerate(states.items()):
        ladders[name].extend(block, state, samples, seed, (*key, index))
        cfg = {**config, "state": name}
        checks += state_checks(ladders[name], block, claim, state, samples, z, confidence, power, target, cfg)
    return checks
