"""Model F's overlap statistics against the derived overlap SDE: for two tokens from a fixed overlap rho_0, smooth
functions of rho_T at increasing depth (coupled on one Brownian path, Gaussian entries) against E[f(rho_T) | rho_0]
from the backward Kolmogorov equation of ``verify.overlap_sde`` (``convergence._references.kolmogorov``): the weak
order, the weak limit, and universality (Rademacher and uniform entries, two independent finest depths). The
weak-fedorov study holds the design; ``weak_overlap`` runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

import verify
from verify._calculus import d as d_symbol
from verify._calculus import sigma as sigma_symbol
from verify._common import holding_precision
from verify._models import beta as beta_symbol

from .._models import FedorovModel
from .._output import Panel
from .._paths import fixed_overlap, overlap, simulate
from .._references import expectation, lambdify_overlap
from .._statistics import Check
from .strong import bootstrap_generator
from .weak import OVERLAP_OBSERVABLES, WeakDesign, coupled_observables, limit_check
from .weak_order_fit import order_check, weak_order


@dataclass(frozen=True)
class WeakOverlapOutcome:
    """The checks (weak order, weak limit per observable and entry law), a panel per configuration, and the reference
    values with their error estimates."""

    checks: list
    panels: list
    references: dict


def overlap_coefficients(dim: int, beta: float, sigma: float) -> tuple[Callable, Callable]:
    """numpy drift b(rho) and squared diffusion a(rho) of model F's derived overlap SDE (two tokens)."""
    drift, diffusion = verify.overlap_sde("fedorov", 2)
    with holding_precision():  # nsimplify sets mpmath's precision
        exact_beta = sp.nsimplify(beta)
    return lambdify_overlap(drift, diffusion, {d_symbol: dim, beta_symbol: exact_beta, sigma_symbol: sigma})


def reference_values(
    dim: int, beta: float, sigma: float, horizon: float, rho0: float
) -> dict[str, tuple[float, float]]:
    """E[f(rho_T) | rho_0] for each overlap observable f, from the backward Kolmogorov equation of the derived
    overlap SDE (value, error estimate)."""
    b, a = overlap_coefficients(dim, beta, sigma)
    out = {}
    for name, f in OVERLAP_OBSERVABLES.items():
        sol = expectation(b, a, f, horizon, rho0)
        out[name] = (float(sol.value[0]), float(sol.error[0]))
    return out


def weak_overlap(
    configs: Sequence[tuple[int, float]],
    designs: dict[int, WeakDesign],
    design: WeakDesign,
    rho0: float,
    laws: Sequence[str],
    law_paths: int,
    seed: int,
    study_key: int,
    z: float,
    advance: Callable[[int], None],
) -> WeakOverlapOutcome:
    """For each (d, beta) of ``configs`` (index i: streams ``(study_key, i)``, and ``(study_key, i, 1 + law, level)``
    for each entry law of ``laws`` on ``law_paths`` paths at the two finest depths), the coupled runs on ``designs[d]``
    and every check at z = ``z``; ``advance`` counts the coupled runs' layers."""
    observables = {name: (lambda x, f=f: f(overlap(x))) for name, f in OVERLAP_OBSERVABLES.items()}
    checks, panels, references = [], [], {}
    steps = design.steps()
    for index, (dim, b) in enumerate(configs):
        model = FedorovModel(tokens=2, dim=dim, beta=b)
        ref = reference_values(dim, b, model.sigma, design.horizon, rho0)
        references[f"d={dim}, beta={b}"] = {name: {"value": v, "error": e} for name, (v, e) in ref.items()}
        key = (study_key, index)
        values = coupled_observables(model, designs[dim], observables, seed, key, fixed_overlap(rho0), progress=advance)
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
        for law_index, law in enumerate(laws):
            law_key = (study_key, index, 1 + law_index)
            checks += _other_law_checks(dim, b, law, law_paths, law_key, ref, design, rho0, seed, z)
        panels.append(
            Panel(
                title=f"d={dim}, beta={b}, rho0={rho0}",
                xlabel="step h",
                ylabel="coupled weak difference",
                series=series,
                reference_order=design.order,
            )
        )
    return WeakOverlapOutcome(checks, panels, references)


def _other_law_checks(
    dim: int,
    beta: float,
    law: str,
    law_paths: int,
    law_key: tuple[int, ...],
    ref: dict,
    design: WeakDesign,
    rho0: float,
    seed: int,
    z: float,
) -> list[Check]:
    """weak_limit for an entry law other than Gaussian (no coupling to a Brownian path): independent runs at the two
    finest depths (streams ``(*law_key, level)``), their difference the bias allowance."""
    law_model = FedorovModel(tokens=2, dim=dim, beta=beta, law=law)
    finals = {}
    for level, depth in enumerate(design.depths[-2:]):
        x = simulate(
            law_model,
            depth,
            design.horizon,
            law_paths,
            seed,
            (*law_key, level),
            fixed_overlap(rho0),
            design.block_paths,
        )
        finals[depth] = overlap(x)
    coarse, finest = finals[design.depths[-2]], finals[design.depths[-1]]
    checks = []
    for name, f in OVERLAP_OBSERVABLES.items():
        config = {"d": dim, "beta": beta, "observable": name, "entries": law}
        diff = f(coarse).mean() - f(finest).mean()
        diff_se = np.sqrt(f(coarse).var(ddof=1) / coarse.size + f(finest).var(ddof=1) / finest.size)
        checks.append(
            limit_check(f(finest), diff, diff_se, ref[name][0], ref[name][1], design, z, config, name="weak_limit")
        )
    return checks
