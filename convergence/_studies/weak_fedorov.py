"""Study ``weak-fedorov``: statistics of the discrete model F converge to those of the derived overlap SDE.

Two tokens start at a fixed overlap rho_0; the observables are smooth functions of rho_T. The
reference E[f(rho_T) | rho_0] solves the backward Kolmogorov equation of ``verify.overlap_sde``
(``convergence._references.kolmogorov``): if the derivation were wrong, the transformer's statistics would
converge to something else and ``weak_limit`` would fail. ``weak_order`` measures the rate from
coupled differences between consecutive depths (Gaussian entries, one Brownian path). Universality:
Rademacher and uniform entries (no pathwise coupling) are checked against the same limit, with the
bias allowance taken from two independent depths.
"""

from __future__ import annotations

from dataclasses import replace

import mpmath
import numpy as np
import sympy as sp

import verify
from verify._calculus import d as d_symbol
from verify._calculus import sigma as sigma_symbol
from verify._common import holding_precision
from verify._models import beta as beta_symbol

from .._experiments import (
    OVERLAP_OBSERVABLES,
    WeakDesign,
    betas_across_critical,
    bootstrap_generator,
    coupled_observables,
    limit_check,
    order_check,
    weak_order,
)
from .._models import FedorovModel
from .._output import Panel, StudyResult, headline
from .._paths import fixed_overlap, overlap, simulate
from .._references import expectation, lambdify_overlap
from .._runtime import STREAM_KEYS, block_count
from .._statistics import z_value
from .base import ProgressFactory, Study

NAME = "weak-fedorov"
STUDY_KEY = STREAM_KEYS[NAME]
RHO0 = -0.5
LAWS = ("rademacher", "uniform")
# full: 50k paths per law and depth put the universality checks at about 0.6 of their target (200k: 0.3)
UNIVERSALITY_PATHS = {"quick": 30_000, "full": 50_000}
# Coupled paths per d where the profile's are more than its order checks need: at d = 8 (most of the cost: d^2
# normals per step) the order intervals at 400k paths lay above the floor with resolutions 0.19-0.22 (target 0.45)
COUPLED_PATHS = {"quick": {}, "full": {8: 200_000}}


DIMS = (3, 4, 8)
DESIGNS = {
    # the quick profile accepts a coarser order interval (0.9 wide across the band's floor); its report states it
    "quick": WeakDesign(depths=(4, 8, 16, 32, 64), horizon=2.0, paths=100_000, block_paths=5000, order_target=0.825),
    "full": WeakDesign(depths=(4, 8, 16, 32, 64, 128), horizon=2.0, paths=400_000, block_paths=10_000),
}


def reference_values(dim: int, beta: float, sigma: float, horizon: float) -> dict[str, tuple[float, float]]:
    drift, diffusion = verify.overlap_sde("fedorov", 2)
    with holding_precision():  # nsimplify sets mpmath's precision
        exact_beta = sp.nsimplify(beta)
    b, a = lambdify_overlap(drift, diffusion, {d_symbol: dim, beta_symbol: exact_beta, sigma_symbol: sigma})
    out = {}
    for name, f in OVERLAP_OBSERVABLES.items():
        sol = expectation(b, a, f, horizon, RHO0)
        out[name] = (float(sol.value[0]), float(sol.error[0]))
    return out


def execute(profile: str, seed: int, progress: ProgressFactory) -> StudyResult:
    design = DESIGNS[profile]
    configs = [(dim, b) for dim in DIMS for b in betas_across_critical(dim)]
    checks_per_config = 1 + len(OVERLAP_OBSERVABLES) * (1 + len(LAWS))
    z = z_value(len(configs) * checks_per_config)
    observables = {name: (lambda x, f=f: f(overlap(x))) for name, f in OVERLAP_OBSERVABLES.items()}
    designs = {
        dim: replace(design, paths=min(design.paths, COUPLED_PATHS[profile].get(dim, design.paths))) for dim in DIMS
    }
    advance = progress(
        sum(block_count(designs[dim].paths, design.block_paths) for dim, _ in configs) * design.depths[-1], NAME
    )
    checks, panels, references = [], [], {}
    steps = design.steps()
    for index, (dim, b) in enumerate(configs):
        model = FedorovModel(tokens=2, dim=dim, beta=b)
        ref = reference_values(dim, b, model.sigma, design.horizon)
        references[f"d={dim}, beta={b}"] = {name: {"value": v, "error": e} for name, (v, e) in ref.items()}
        key = (STUDY_KEY, index)
        values = coupled_observables(model, designs[dim], observables, seed, key, fixed_overlap(RHO0), progress=advance)
        rng = bootstrap_generator(seed, key)
        series = []
        fits = weak_order(values, steps, rng, design.replicates, z)
        checks.append(
            order_check(fits, design, z, {"d": dim, "beta": b, "observable": "all (pooled)", "entries": "gaussian"})
        )
        for name in OVERLAP_OBSERVABLES:
            config = {"d": dim, "beta": b, "observable": name, "entries": "gaussian"}
            fit = fits[name]
            checks.append(
                limit_check(
                    values[name],
                    fit.differences[-1],
                    fit.standard_errors[-1],
                    ref[name][0],
                    ref[name][1],
                    design,
                    z,
                    config,
                )
            )
            series.append(fit.series(f"|E f(L) - E f(2L)|, f = {name}", z))
        for law_index, law in enumerate(LAWS):
            law_model = FedorovModel(tokens=2, dim=dim, beta=b, law=law)
            finals = {}
            for level, depth in enumerate(design.depths[-2:]):
                law_key = (STUDY_KEY, index, 1 + law_index, level)
                x = simulate(
                    law_model,
                    depth,
                    design.horizon,
                    UNIVERSALITY_PATHS[profile],
                    seed,
                    law_key,
                    fixed_overlap(RHO0),
                    design.block_paths,
                )
                finals[depth] = overlap(x)
            coarse, finest = finals[design.depths[-2]], finals[design.depths[-1]]
            for name, f in OVERLAP_OBSERVABLES.items():
                config = {"d": dim, "beta": b, "observable": name, "entries": law}
                diff = f(coarse).mean() - f(finest).mean()
                diff_se = np.sqrt(f(coarse).var(ddof=1) / coarse.size + f(finest).var(ddof=1) / finest.size)
                checks.append(
                    limit_check(
                        f(finest), diff, diff_se, ref[name][0], ref[name][1], design, z, config, name="weak_limit"
                    )
                )
        panels.append(
            Panel(
                title=f"d={dim}, beta={b}, rho0={RHO0}",
                xlabel="step h",
                ylabel="coupled weak difference",
                series=series,
                reference_order=design.order,
            )
        )
    params = {
        "dims": list(DIMS),
        "configs": [{"d": dim, "beta": b} for dim, b in configs],
        "rho0": RHO0,
        "sigma2": "1/d",
        "horizon": design.horizon,
        "depths": list(design.depths),
        "paths": {dim: designs[dim].paths for dim in DIMS},
        "observables": list(OVERLAP_OBSERVABLES),
        "laws": ["gaussian", *LAWS],
        "z": z,
        # 15 digits whatever mpmath's process-wide precision is when this runs (str would follow it)
        "beta_c": {dim: [mpmath.nstr(v, 15) for v in verify.critical_beta(dim)] for dim in DIMS},
        "reference": "backward Kolmogorov equation of verify.overlap_sde, Chebyshev collocation (N = 96 and 192)",
        "reference_values": references,
    }
    notes = [
        f"Bonferroni: {len(configs) * checks_per_config} checks at z = {z:.3f}, family-wise false-failure rate "
        "at most 1%.",
        "weak_order uses only coupled differences significantly different from zero; levels at the noise "
        "floor are flagged in the plot. The claim is one-sided (error O(h)): it fails below order "
        f"{design.order - design.order_allowance:g}, and it is inconclusive when its resolution exceeds its target "
        f"{design.order_target:g} (in order units).",
        "Resolution: weak_order's is in order units; weak_limit's in the observable's units (relative resolution: "
        f"in units of its standard deviation; inconclusive when it exceeds the target {design.resolution:g} sd).",
        "Rademacher and uniform entries cannot share a Brownian path: their limit checks use two independent "
        "runs at the two finest depths for the bias allowance.",
    ]
    return StudyResult(study=NAME, profile=profile, seed=seed, params=params, checks=checks, panels=panels, notes=notes)


STUDY = Study(
    NAME,
    "model F statistics -> derived overlap SDE (weak order 1, same limit, universality)",
    execute,
    headlines=(
        headline("weak_order"),
        headline("weak_limit", summary=True),
    ),
)
