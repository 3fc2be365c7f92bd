"""Synchronisation by noise in model A, a calibration model, and the paper's figure (the sync-agazzi study's docstring
states each section): two-point exponents against lambda_1 and lambda_bar, the energy bound, the random quadratic
form's exponents, invariant and merge probability (``sync_quadratic_form``), and the figure's final cosines. The
study holds the profiles (``sync_design.SyncDesign``); ``synchronisation_by_noise`` runs one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verify._analysis import KernelSpec, activation_constants
from verify._rigorous import attention_energy_rate, lambda_bar_prime

from .._models import ATTENTION, AgazziModel, FreshFeatureField, GaussianField
from .._output import Curve, Plot
from .._paths import simulate
from .._runtime import block_count
from .._statistics import Check
from .energy import compare_with_bound, energy_bound_check, record_energy
from .exponents import (
    ExponentDesign,
    ExponentEstimate,
    exponent_check,
    mean_square_exponent,
    median_exponent,
    record_log_distances,
)
from .overlap_ends import antipodal_share_check
from .strong import bootstrap_generator
from .sync_design import (
    ALIGNED,
    ANTIPODAL_SHARE,
    CHECK_ALPHA,
    CONFIDENCE_LEVEL,
    ENERGY_CONFIGS,
    EXPONENT_CONFIGS,
    FIGURE_DIM,
    FIGURE_HORIZON,
    FIGURE_TOKENS,
    SYNC_BETA,
    SyncDesign,
)
from .sync_quadratic_form import quadratic_form_section


@dataclass(frozen=True)
class SyncOutcome:
    """Every check of the four sections (one family of ``sync_design.SYNC_CHECKS``), their figures by file suffix, and
    the rows the report's parameters show."""

    checks: list[Check]
    plots: dict[str, list[Plot]]
    exponent_rows: list[dict]
    energy_rows: list[dict]
    qf_rows: list[dict]
    figure_summary: dict


def synchronisation_by_noise(
    design: SyncDesign, seed: int, study_key: int, start: Callable[[int], Callable[[int], None]]
) -> SyncOutcome:
    """Run the four sections of ``design`` (streams ``(study_key, section, configuration)``); ``start(total)``
    returns the callback advanced through the ``total`` block-steps of the exponent and energy runs."""

    def units(exp_design, configs) -> int:
        return configs * block_count(exp_design.paths, exp_design.block_paths) * exp_design.steps

    total = (
        sum(units(design.exponent_design(act, dim), 1) for act, dim, _ in EXPONENT_CONFIGS)
        + units(design.qf_exponents, 2)
        + sum(units(design.energy_design(act, attention), 1) for act, _, _, attention in ENERGY_CONFIGS)
    )
    advance = start(total)
    exp_checks, exp_plots, exp_rows = exponents_section(design, seed, study_key, advance)
    energy_checks, energy_plots, energy_rows = energy_section(design, seed, study_key, advance)
    qf_checks, qf_rows = quadratic_form_section(design, seed, study_key, advance)
    fig_checks, fig_plots, fig_summary = figure_section(design, seed, study_key)
    return SyncOutcome(
        exp_checks + energy_checks + qf_checks + fig_checks,
        {"exponents": exp_plots, "energy": energy_plots, "": fig_plots},
        exp_rows,
        energy_rows,
        qf_rows,
        fig_summary,
    )


def _label(**items) -> dict:
    return dict(items)


def exponents_section(
    design: SyncDesign, seed: int, study_key: int, advance
) -> tuple[list[Check], list[Plot], list[dict]]:
    checks, plots, rows = [], [], []
    for index, (act, dim, bias) in enumerate(EXPONENT_CONFIGS):
        ed = design.exponent_design(act, dim)
        spec = KernelSpec(act, dim, bias, bias)
        constants = activation_constants(act, dim, bias, bias)
        model = AgazziModel(2, GaussianField(spec, 2), SYNC_BETA, 0.0)
        key = (study_key, 1, index)
        logs = record_log_distances(model, ed, seed, key, progress=advance)
        rng = bootstrap_generator(seed, key)
        med, ms = (
            median_exponent(logs, ed, rng, CONFIDENCE_LEVEL),
            mean_square_exponent(logs, ed, rng, CONFIDENCE_LEVEL),
        )
        config = _label(act=act, d=dim, bias=bias)
        checks.append(
            exponent_check(
                "median_exponent",
                constants["lambda_1"],
                med,
                ed,
                config,
                note="slope of the median of log|X - Y|: the almost-sure exponent lambda_1",
                confidence=CONFIDENCE_LEVEL,
            )
        )
        checks.append(
            exponent_check(
                "mean_square_exponent",
                constants["lambda_bar"],
                ms,
                ed,
                config,
                note="slope of log E|X - Y|^2: the mean-square exponent lambda_bar",
                confidence=CONFIDENCE_LEVEL,
            )
        )
        rows.append({**config, **constants, "paths": ed.paths})
        plots.append(_exponent_plot(f"{act}, d = {dim}, sigma = {bias}", ed, med, ms, constants))
    return checks, plots, rows


def _exponent_plot(
    title: str, ed: ExponentDesign, med: ExponentEstimate, ms: ExponentEstimate, constants: dict
) -> Plot:
    """The median log-distance and the log mean square against t, each beside its exponent's line."""
    t = ed.times.tolist()
    return Plot(
        title,
        "t",
        "log-distance",
        [
            Curve(
                "median log|X-Y| - log delta0",
                t,
                (med.curve - np.log(ed.delta0)).tolist(),
                (med.curve_ci[0] - np.log(ed.delta0)).tolist(),
                (med.curve_ci[1] - np.log(ed.delta0)).tolist(),
                style="points",
            ),
            Curve(
                f"lambda_1 t (lambda_1 = {constants['lambda_1']:.4g})",
                t,
                (constants["lambda_1"] * ed.times).tolist(),
            ),
            Curve(
                "log E|X-Y|^2 / delta0^2",
                t,
                ms.curve.tolist(),
                ms.curve_ci[0].tolist(),
                ms.curve_ci[1].tolist(),
                style="points",
            ),
            Curve(
                f"lambda_bar t (lambda_bar = {constants['lambda_bar']:.4g})",
                t,
                (constants["lambda_bar"] * ed.times).tolist(),
            ),
        ],
    )


def energy_section(
    design: SyncDesign, seed: int, study_key: int, advance
) -> tuple[list[Check], list[Plot], list[dict]]:
    checks, plots, rows = [], [], []
    for index, (act, dim, bias, attention) in enumerate(ENERGY_CONFIGS):
        spec = KernelSpec(act, dim, bias, bias)
        v = ATTENTION[attention]
        lam = lambda_bar_prime(act, dim, bias, bias, SYNC_BETA)
        eps = attention_energy_rate(v)
        rate = eps + float(lam.upper)
        lambda_bar = activation_constants(act, dim, bias, bias)["lambda_bar"]
        failed = [
            reason
            for reason, bad in (
                (f"lambda_bar = {lambda_bar:.4g} >= 0", lambda_bar >= 0),
                ("the field is a.s. odd", spec.odd),
            )
            if bad
        ]
        hypotheses = "hold" if not failed else "do not hold (" + "; ".join(failed) + ")"
        model = AgazziModel(design.energy_tokens, GaussianField(spec, design.energy_tokens), SYNC_BETA, v)
        energy_design = design.energy_design(act, attention)
        energy = record_energy(model, SYNC_BETA, energy_design, seed, (study_key, 2, index), progress=advance)
        comparison = compare_with_bound(energy, rate, energy_design, CHECK_ALPHA)
        config = _label(act=act, d=dim, bias=bias, attention=attention, n=design.energy_tokens)
        note = (
            f"lambda_bar' in [{float(lam.lower):.6g}, {float(lam.upper):.6g}] "
            f"({'rigorous' if lam.rigorous else 'given the quadrature error estimate'}), eps = {eps:g}; "
            f"theorem hypotheses {hypotheses}"
        )
        checks.append(energy_bound_check(comparison, rate, config, note, CHECK_ALPHA, design.energy_target))
        rows.append(
            {
                **config,
                "lambda_bar_prime": [float(lam.lower), float(lam.upper)],
                "eps": eps,
                "lambda_bar": lambda_bar,
                "hypotheses": hypotheses,
                "measured_rate": comparison.rate,
                "paths": energy_design.paths,
            }
        )
        t = comparison.times.tolist()
        plots.append(
            Plot(
                f"{act}, d = {dim}, {attention}",
                "t",
                "E[E_beta(mu_t)]",
                [
                    Curve(
                        "measured (level h)",
                        t,
                        comparison.mean.tolist(),
                        comparison.mean_ci[0].tolist(),
                        comparison.mean_ci[1].tolist(),
                        style="points",
                    ),
                    Curve(f"bound, rate eps + lambda_bar' = {rate:.4g}", t, comparison.bound.tolist()),
                ],
                logy=True,
            )
        )
    return checks, plots, rows


def figure_section(design: SyncDesign, seed: int, study_key: int) -> tuple[list[Check], list[Plot], dict]:
    bins = np.linspace(-1.0, 1.0, 81)
    centres = 0.5 * (bins[1:] + bins[:-1])
    curves, checks, summary = [], [], {}
    upper = np.triu_indices(FIGURE_TOKENS, 1)
    for index, act in enumerate(("relu", "tanh")):
        model = AgazziModel(
            FIGURE_TOKENS, FreshFeatureField(KernelSpec(act, FIGURE_DIM), design.figure_width), SYNC_BETA, 0.0
        )
        x = simulate(
            model, design.figure_depth, FIGURE_HORIZON, design.figure_paths, seed, (study_key, 6, index), block_paths=64
        )
        cosines = (x @ np.swapaxes(x, -1, -2))[:, upper[0], upper[1]]
        density, _ = np.histogram(cosines.ravel(), bins=bins, density=True)
        curves.append(Curve(f"{act}", centres.tolist(), density.tolist()))
        antipodal = np.mean(cosines < -ALIGNED, axis=1)  # per path
        aligned = np.mean(np.abs(cosines) > ALIGNED, axis=1)
        summary[act] = {"fraction_antipodal_pairs": antipodal.tolist(), "fraction_aligned_pairs": aligned.tolist()}
        config = {
            "act": act,
            "d": FIGURE_DIM,
            "n": FIGURE_TOKENS,
            "m": design.figure_width,
            "L": design.figure_depth,
            "T": FIGURE_HORIZON,
        }
        name = "figure_tanh_antipodal" if act == "tanh" else "figure_relu_one_cluster"
        checks.append(
            antipodal_share_check(
                name, antipodal, ANTIPODAL_SHARE, ALIGNED, above=act == "tanh", config=config, alpha=CHECK_ALPHA
            )
        )
    plot = Plot(
        f"final pairwise cosines, d = {FIGURE_DIM}, n = {FIGURE_TOKENS}, m = {design.figure_width}, "
        f"L = {design.figure_depth}, T = {FIGURE_HORIZON:g}, no attention, no biases",
        "cos",
        "density",
        curves,
    )
    return checks, [plot], summary
