"""The phase transition's n-token runs (model F at d = ``many_dim``, uniform start): the final configuration classes
against beta with the noise and with it switched off (the deterministic attention flow with mean value part M = I,
which must collapse: Geshkovski, Letrouit, Polyanskiy, Rigollet), and the checks that antipodal clusters persist for
n > 2 and that the noise-free flow collapses."""

from __future__ import annotations

import numpy as np

import verify

from .._models import FedorovModel
from .._output import Curve, Plot
from .._paths import CLASSES, class_fractions, simulate
from .._runtime import concurrent_map
from .._statistics import FAIL, NO_TARGET, PASS, Check, confidence_z, excess_resolution, wilson
from .overlap_ends import DELTA, MAX_UNDECIDED
from .phase_design import PhaseDesign

NOISE_OFF_HORIZON, NOISE_OFF_STEP = 400.0, 0.05  # the deterministic flow of the n-token runs without noise


def many_tokens(
    design: PhaseDesign, seed: int, study_key: int, confidence: float
) -> tuple[list[Check], list[Plot], list[dict]]:
    """n tokens (uniform start) at d = many_dim: final configuration classes against beta, with noise and
    with the noise switched off (deterministic attention flow with mean value part M = I), which must
    collapse (GLPR). Check ``antipodal_persists``: at the largest beta some runs end antipodal (the Wilson
    interval at ``confidence`` excludes 0); ``noise_off_collapse``: no noise-free run ends antipodal, and the
    fraction still merging at T is not significantly above 2%."""
    lo, hi = verify.critical_beta(design.many_dim)
    betas = [round(f * float(hi), 4) for f in design.many_beta_factors]
    checks, plots, rows = [], [], []
    z = confidence_z(confidence)
    modes = (
        ("noise", 1.0, None, design.many_horizon, design.many_tokens_step),
        # The deterministic flow merges metastable clusters slowly at large beta: a longer horizon.
        ("noise off", 0.0, np.eye(design.many_dim), NOISE_OFF_HORIZON, NOISE_OFF_STEP),
    )
    runs = [(i, n, mode, j, b) for i, n in enumerate(design.many_tokens) for mode in modes for j, b in enumerate(betas)]

    def run(item: tuple) -> dict:
        i, n, (_, sigma, mean, horizon_, step), j, b = item
        model = FedorovModel(tokens=n, dim=design.many_dim, beta=b, sigma=sigma, mean_value=mean)
        # the full value matrix: at d = 4 its d^2 normals cost less than the reduced sampler's d n + eigh; one block
        # a run, the runs side by side (two blocks a run cost 10-15% more)
        steps = round(horizon_ / step)
        x = simulate(
            model, steps, horizon_, design.many_paths, seed, (study_key, 100 + i, j), block_paths=design.many_paths
        )
        return class_fractions(x, DELTA)

    all_fractions = iter(concurrent_map(run, runs))
    for n in design.many_tokens:
        by_mode = {}
        for mode, *_ in modes:
            fractions = [next(all_fractions) for _ in betas]
            rows += [{"n": n, "beta": b, "mode": mode, **f} for b, f in zip(betas, fractions)]
            by_mode[mode] = fractions
            plots.append(
                Plot(
                    f"n = {n}, d = {design.many_dim}, {mode}",
                    "beta",
                    "fraction of runs",
                    [Curve(name, betas, [f[name] for f in fractions], style="stacked") for name in CLASSES],
                    [(float(hi), "beta_c (n=2)")],
                )
            )
        checks.append(_antipodal_persists(by_mode["noise"][-1], n, betas[-1], design, z, confidence))
        checks.append(_noise_off_collapse(by_mode["noise off"], n, betas, design, z, confidence))
    return checks, plots, rows


def _antipodal_persists(top: dict, n: int, beta: float, design: PhaseDesign, z: float, confidence: float) -> Check:
    """``antipodal_persists``: at the largest beta some noisy runs of n tokens end antipodal (``top``: the class
    fractions there)."""
    config = {"n": n, "d": design.many_dim, "beta": beta}
    k = round((top["balanced antipodal"] + top["unbalanced antipodal"]) * design.many_paths)
    a_lo, a_hi = wilson(k, design.many_paths, z)
    seen = excess_resolution(design.many_paths, 0.0, z)
    return Check(
        "antipodal_persists",
        0.0,
        k / design.many_paths,
        (a_lo, a_hi),
        PASS if k > 0 else FAIL,
        config,
        0.0,
        confidence,
        resolution=seen,
        target=NO_TARGET,
        note="fraction of runs ending in two antipodal clusters (paper: they persist for n > 2); "
        "the check asks that it is positive: one run shows it, so no target needed; a "
        f"fraction of {seen:.3g} shows in at least one run with probability 90% (below it "
        "the check may fail a true claim)",
    )


def _noise_off_collapse(
    off: list[dict], n: int, betas: list[float], design: PhaseDesign, z: float, confidence: float
) -> Check:
    """``noise_off_collapse``: no noise-free run of n tokens ends antipodal, and the fraction still merging at T is
    not significantly above ``MAX_UNDECIDED`` (``off``: the class fractions per beta)."""
    # Noise off: a run may still be merging metastable clusters at T ("other", like an undecided
    # run); the claim fails if any run ends antipodal or significantly more than 2% are still merging.
    antipodal_off = max(f["balanced antipodal"] + f["unbalanced antipodal"] for f in off)
    undecided_off = max(f["other"] for f in off)
    merging_lo, _ = wilson(round(undecided_off * design.many_paths), design.many_paths, z)
    collapsed = min(f["one cluster"] for f in off)
    c_lo, c_hi = wilson(round(collapsed * design.many_paths), design.many_paths, z)
    verdict = FAIL if antipodal_off > 0 or merging_lo > MAX_UNDECIDED else PASS
    merging_seen = excess_resolution(design.many_paths, MAX_UNDECIDED, z)
    return Check(
        "noise_off_collapse",
        1.0,
        collapsed,
        (c_lo, c_hi),
        verdict,
        {"n": n, "d": design.many_dim},
        MAX_UNDECIDED,
        confidence,
        resolution=merging_seen,
        target=design.fraction_target,
        note=f"deterministic flow (sigma = 0, M = I, T = {NOISE_OFF_HORIZON:g}): smallest one-cluster "
        f"fraction over beta in {betas}; antipodal {antipodal_off:.3f} (any fails: a fraction "
        f"{excess_resolution(design.many_paths, 0.0, z):.3g} shows with probability 90%), "
        f"still merging {undecided_off:.3f} (fails when significantly above "
        f"{MAX_UNDECIDED:.0%}; resolution: a merging fraction of {merging_seen:.3g})",
    )
