"""Certified checks of the latent diffusion stopping problem (docs/models.md section 4): ball arithmetic
(``verify._rigorous.latent_stopping``) decides signs, exact algebra decides optima; none of them samples, so none can
fail falsely.

``switching_checks``: coordinate j helps exactly after its switching time t_j (certified gain signs);
``monotone_checks``: the exact score's distance is non-increasing, and the paper's plug-in criterion against
certified monotonicity (``iff_check``); ``criterion_search``: a counterexample search for that criterion over many
plug-in draws; ``low_rank_optimum``: the joint optimum (d_0, early stop) for low-rank data; ``capped_growth``: the
optimal dimension grows like log C with a capped score. Plug-in estimates are seeded by ``data_rng``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mpmath
import numpy as np

from verify._common import DOUBLE, working_bits
from verify._rigorous import (
    BALLS,
    DerivativesByDimension,
    LatentSetting,
    certify_sign,
    coordinate_gain,
    distance,
    ldm_switching_times,
    monotone_criterion,
    optimal_dimension,
    optimal_stopping_time,
    plugin_criterion,
)

from .._models import joint_optimum, plugin_variances
from .._output import Curve, Plot
from .._runtime import random_stream
from .._statistics import (
    CONFIDENCE,
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    Verdict,
    confidence_label,
    confidence_z,
    least_squares_slope,
    wilson,
)

END_MARGIN = 1e-6  # certification stops this far from t = T, where the exact derivative vanishes
CRITERION_BITS = 136


def data_rng(seed: int, key: Sequence[int], index: int) -> np.random.Generator:
    """The data samples of plug-in estimate ``index`` under stream ``key``."""
    return random_stream(seed, (*key, index))


def switching_checks(name: str, variances: tuple[float, ...], horizon: float) -> tuple[list[Check], list[float]]:
    """Certify, for every coordinate of the spectrum ``name``, the sign of its gain before and after its switching
    time (exact score); also return the switching times."""
    setting = LatentSetting(variances, horizon)
    times = [float(x) for x in ldm_switching_times(variances, horizon)]
    certified = 0
    notes = []
    for j, tj in enumerate(times[:-1]):
        gain = lambda ctx, box, j=j: coordinate_gain(ctx, setting, j, box)
        if tj == 0:  # helps throughout
            ok = certify_sign(gain, 0, horizon, -1) is True
        elif tj == horizon:  # a zero variance: never helps (its gain vanishes only at t = T)
            ok = certify_sign(gain, 0, horizon - END_MARGIN, +1) is True
        else:
            margin = 1e-3 * min(tj, horizon - tj)
            ok = certify_sign(gain, 0, tj - margin, +1) is True and certify_sign(gain, tj + margin, horizon, -1) is True
        certified += ok
        notes.append(f"t_{j + 1} = {tj:.15g}")
    check = Check(
        "switching_times",
        len(variances),
        certified,
        (certified, certified),
        Verdict.of(certified == len(variances)),
        {"spectrum": name},
        false_failure_rate=0.0,
        note="coordinates whose gain sign is certified: positive before t_j, negative after (ball "
        "arithmetic, margins 1e-3 of the distance to the ends); " + ", ".join(notes) + f", t_D+1 = T = {horizon}",
    )
    return [check], times


def plugin_stops(setting: LatentSetting) -> dict[int, tuple[mpmath.mpf, mpmath.mpf]]:
    """``{d: (t*, W2^2(t*))}`` for every latent dimension (``optimal_stopping_time``)."""
    return {d: optimal_stopping_time(setting, d) for d in range(1, setting.dim + 1)}


def monotone_checks(
    name: str,
    variances: tuple[float, ...],
    hat: tuple[float, ...] | None,
    horizon: float,
    stops: dict[int, tuple[mpmath.mpf, mpmath.mpf]] | None = None,
) -> list[Check]:
    """Spectrum ``name``; exact score: certified non-increasing distance for every d. Plug-in (``stops`` from
    ``plugin_stops``): per-coordinate criterion vs certified monotonicity."""
    setting = LatentSetting(variances, horizon, hat)
    derivatives = DerivativesByDimension(setting)
    checks = []
    for d in range(1, len(variances) + 1):
        slope = derivatives.slope(d)
        config = {"spectrum": name, "score": "exact" if hat is None else "plug-in", "d": d}
        if hat is None:
            ok = certify_sign(slope, 0, horizon - END_MARGIN, -1, budget=4000, strict=False)
            checks.append(
                Check(
                    "exact_monotone",
                    1,
                    float(ok is True),
                    (float(ok is True),) * 2,
                    Verdict.of(ok),
                    config,
                    false_failure_rate=0.0,
                    note=f"d/dt W2^2 <= 0 certified on [0, T - {END_MARGIN}] (and up to T by the "
                    "symbolic identity in symbolic.md)",
                )
            )
            continue
        monotone = certify_sign(slope, 0, horizon, -1, budget=4000, strict=False)  # d/dt at T is not 0 here
        paper = criterion_sign(setting, d)
        coordinates = monotone_criterion(setting, d)
        stop, value = stops[d]
        end, criterion = distance(DOUBLE, setting, horizon, d), plugin_criterion(setting, d, DOUBLE)
        detail = (
            f"paper's criterion sum = {float(criterion):+.6g}; certified monotone: {monotone}; "
            f"t* = T - {float(horizon - stop):.3g}, W2^2(t*) = {float(value):.9g}, W2^2(T) = {float(end):.9g}"
        )
        checks.append(iff_check("plugin_criterion", paper, monotone, config, detail))
        # the per-coordinate criterion (sigma_hat_j between s_j and 1 for every j <= d): sufficient, not necessary
        per_coordinate = all(coordinates)
        verdict = Verdict.of(None if monotone is None else per_coordinate == monotone)
        checks.append(
            Check(
                "coordinate_criterion",
                float(per_coordinate),
                float(monotone is True),
                (0.0, 1.0),
                verdict,
                config,
                note=f"per coordinate {''.join('+' if c else '-' for c in coordinates)} against "
                "certified monotonicity (a finding: the paper's criterion is the sum)",
                claim=False,
                false_failure_rate=0.0,
            )
        )
    return checks


def criterion_sign(setting: LatentSetting, d: int) -> bool | None:
    """The paper's criterion ``>= 0`` decided in ball arithmetic (None: the enclosure contains 0)."""
    with working_bits(CRITERION_BITS):
        enclosure = plugin_criterion(setting, d, BALLS)
        if (enclosure >= 0) is True:
            return True
        return False if (enclosure < 0) is True else None


def iff_check(name: str, criterion: bool | None, monotone: bool | None, config: dict, detail: str) -> Check:
    """Criterion >= 0 iff the distance is certified non-increasing: both are certified, so a disagreement is a
    certified counterexample (``fail``); undecided on either side: ``inconclusive``."""
    if criterion is None or monotone is None:
        verdict = INCONCLUSIVE
    else:
        verdict = Verdict.of(criterion == monotone)
    return Check(
        name,
        float(criterion is True),
        float(monotone is True),
        (0.0, 1.0),
        verdict,
        config,
        note=detail,
        false_failure_rate=0.0,
    )


def criterion_search(
    spectra: dict[str, tuple[float, ...]], horizon: float, draws: int, data_samples: int, seed: int, key: Sequence[int]
) -> list[Check]:
    """Counterexample search for the paper's criterion, both directions: for ``draws`` plug-in estimates
    (``data_samples`` data samples each, seeded by ``data_rng(seed, key, 2000 + draw)``) of every spectrum and every d,
    the certified criterion sign against certified monotonicity.
    ``plugin_criterion_if``: criterion >= 0 => monotone; ``plugin_criterion_only_if``: monotone => criterion >= 0."""
    tally = {"if": [0, 0, 0], "only_if": [0, 0, 0]}  # agree, certified counterexamples, undecided
    examples: dict[str, list[str]] = {"if": [], "only_if": []}
    for name, variances in spectra.items():
        for draw in range(draws):
            hat = tuple(plugin_variances(np.array(variances), data_samples, data_rng(seed, key, 2000 + draw)))
            setting = LatentSetting(variances, horizon, hat)
            derivatives = DerivativesByDimension(setting)
            for d in range(1, len(variances) + 1):
                paper = criterion_sign(setting, d)
                monotone = certify_sign(derivatives.slope(d), 0, horizon, -1, budget=4000, strict=False)
                # "if": criterion => monotone; "only if": monotone => criterion (a case tests an implication
                # unless its premise is certified false)
                for direction, premise, conclusion in (("if", paper, monotone), ("only_if", monotone, paper)):
                    if premise is False:
                        continue
                    if premise is None or conclusion is None:
                        tally[direction][2] += 1
                    elif conclusion:
                        tally[direction][0] += 1
                    else:
                        tally[direction][1] += 1
                        examples[direction].append(f"{name} draw {draw} d={d}")
    checks = []
    for direction, (agree, counter, undecided) in tally.items():
        total = agree + counter + undecided
        verdict = FAIL if counter else (PASS if agree and undecided <= 0.05 * total else INCONCLUSIVE)
        claim = "criterion >= 0 => non-increasing" if direction == "if" else "non-increasing => criterion >= 0"
        checks.append(
            Check(
                f"plugin_criterion_{direction}",
                0.0,
                float(counter),
                (float(counter), float(counter)),
                verdict,
                {"spectra": "both" if len(spectra) == 2 else ", ".join(spectra), "draws": draws},
                false_failure_rate=0.0,
                note=f"{claim}: {agree} certified cases agree, {counter} certified counterexamples"
                f"{' (' + ', '.join(examples[direction][:5]) + ')' if counter else ''}, {undecided} "
                "undecided (criterion enclosure or monotonicity certificate)",
            )
        )
    return checks


def low_rank_optimum(
    variances: tuple[float, ...],
    rank: int,
    horizon: float,
    draws: int,
    data_samples: int,
    seed: int,
    key: Sequence[int],
    start: str = "forward",
) -> Check:
    """Joint optimum (d, t) for a spectrum of rank ``rank`` over ``draws`` plug-in estimates (seeded by
    ``data_rng(seed, key, 1000 + i)``), run started from the score model's law at T (our convention, a claim) or from
    N(0, I) (a finding): d* = rank in every draw."""
    at_rank, early = 0, 0
    for i in range(draws):
        hat = plugin_variances(np.array(variances), data_samples, data_rng(seed, key, 1000 + i))
        d_star, t_star = joint_optimum(variances, hat, start, horizon)
        at_rank += d_star == rank
        early += t_star < horizon
    return Check(
        "low_rank_joint_optimum",
        1.0,
        at_rank / draws,
        wilson(at_rank, draws, confidence_z(CONFIDENCE)),
        Verdict.of(at_rank == draws),
        {"spectrum": "low-rank", "draws": draws, "start": start},
        false_failure_rate=0.0,
        note=f"d* = d_0 = {rank} in {at_rank}/{draws} plug-in draws ({confidence_label(CONFIDENCE)} Wilson interval); "
        f"stopping before T is optimal in {early}/{draws} draws; with the exact score every d >= d_0 ties at t = T "
        f"({'the claim: our start convention' if start == 'forward' else 'a finding: run started from N(0, I)'})",
        claim=start == "forward",
    )


def capped_growth(ratio: float, dim: int, caps: tuple[float, ...], horizon: float) -> tuple[Check, Plot]:
    """Optimal dimension at t = T with the score capped at each C of ``caps``, geometric spectrum ratio^(j-1) of
    ``dim`` coordinates: d* grows like log(C) / log(1/ratio)."""
    variances = tuple(ratio**k for k in range(dim))
    dims = [optimal_dimension(LatentSetting(variances, horizon, cap=c), horizon) for c in caps]
    slope = float(least_squares_slope(np.log(caps), dims))
    expected = 1 / math.log(1 / ratio)
    check = Check(
        "capped_dimension_growth",
        expected,
        slope,
        (slope, slope),
        Verdict.of(abs(slope - expected) <= 0.15 * expected),
        {"ratio": ratio, "D": dim},
        0.15 * expected,
        false_failure_rate=0.0,
        note=f"d*(C) = {dims} for C = 1e1..1e8 (closed form); slope of d* against log C, expected "
        "1/log(1/r) (allowance 15% for the integer steps)",
    )
    plot = Plot(
        "capped score: optimal dimension at t = T",
        "log10 C",
        "d*",
        [
            Curve("closed form", [math.log10(c) for c in caps], [float(x) for x in dims], style="points"),
            Curve(
                "slope 1/log(1/r)",
                [math.log10(c) for c in caps],
                [dims[0] + expected * math.log(c / caps[0]) for c in caps],
            ),
        ],
    )
    return check, plot
