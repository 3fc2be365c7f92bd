"""Variance reduction, measured: for each lever tried on a check kind, its variance factor and its cost factor.

Variance factor: the estimator's variance without the lever over its variance with it, at equal work (the same number
of layer-map runs). Cost factor: the CPU seconds with the lever over those without it, at equal work. A lever pays
when the variance factor exceeds the cost factor (their ratio, the efficiency, is the factor by which it cuts the
samples a decision needs). Each variance factor has a 95% interval on the log scale, from the two samples' kurtoses
(a variance estimate's relative variance is (kurtosis - 1) / n).

Levers measured (``variance_reduction``):

* weak, antithetic pairs: weak-fedorov's overlap of model F (two tokens, beta above beta_c, rho_0 = -0.5, T = 2, the
  study's three observables) on ``pairs`` noise paths, each with its reverse (``coupled_observables(antithetic=
  True)``), against twice as many independent paths; for the finest depth's mean (weak_limit's estimate) and the
  finest coupled difference (weak_order's).
* local, the layer's own control: power's model F (n = 2, d = 16) and its two model A maps (frozen tanh features,
  n = 4, d = 8, repulsive; ReLU Gaussian field, n = 4, d = 5, attractive), each at the uniform state; the claim's
  diffusion on the same noise as control (``LocalDesign.control = "claim"``) against the layer's antithetic
  increments and its own first- and second-order noise response (``"layer"``: from its Hessian where that is
  affordable, the ReLU field's; along each draw otherwise), at equal samples; for drift_scale and diffusion_scale, from
  the squared half-widths of their intervals (each a fixed multiple of the standard error).

Taken: where a lever is in use (``TAKEN``).

* weak, martingale control: the same estimators less M = sum_k u_rho(t_k, rho_k) <the overlap's first-order response
  to dW_k> at every level, u(t, rho) = E[f(rho_T) | rho_t = rho] from the backward Kolmogorov equation of the derived
  overlap SDE (``weak_overlap.OverlapControl``): M is linear in each dW_k with a coefficient known before it, so
  E[M] = 0 exactly whatever u, and f(rho_T) - M keeps only the discretisation's fluctuations; on the same paths.

Beside them, Giles' multilevel diagnostics of the weak ladders and of commute's (``multilevel_diagnostics``): whether
a coupled multilevel estimator would pay, predicted from the measured variances of the level corrections.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from .._experiments import (
    OVERLAP_OBSERVABLES,
    CommuteDesign,
    LocalDesign,
    WeakDesign,
    betas_across_critical,
    coupled_energies,
    coupled_observables,
    local_checks,
    overlap_control,
    states_for,
    token_observables,
)
from .._models import FedorovModel
from .._paths import fixed_overlap
from .._statistics import confidence_z
from .._studies.commute import DESIGNS as COMMUTE_DESIGNS
from .._studies.commute import models as commute_models
from .._studies.power import local_models

WEAK_DIMS = (3, 4, 8)
WEAK_DESIGN = dict(depths=(4, 8, 16, 32, 64), horizon=2.0)
WEAK_RHO0 = -0.5
LOCAL_SAMPLES = 16384


def log_interval(ratio: float, relative_variance: float) -> tuple[float, float]:
    """A 95% interval for a positive ratio whose logarithm has variance ``relative_variance``."""
    half = confidence_z(0.95) * math.sqrt(relative_variance)
    return ratio * math.exp(-half), ratio * math.exp(half)


def variance_factor(without: np.ndarray, with_lever: np.ndarray, work: float = 1.0) -> dict:
    """Var(``without``) / (``work`` Var(``with_lever``)) per path, with its interval: a path with the lever costs
    ``work`` paths without it (2 for an antithetic pair), so this is the variance ratio at equal work."""
    a, b = np.asarray(without, dtype=np.float64), np.asarray(with_lever, dtype=np.float64)
    ratio = float(a.var(ddof=1) / (work * b.var(ddof=1)))
    lo, hi = log_interval(ratio, (kurtosis(a) - 1) / a.size + (kurtosis(b) - 1) / b.size)
    return {"factor": ratio, "interval": [lo, hi]}


def kurtosis(x: np.ndarray) -> float:
    """E (x - mean)^4 / (E (x - mean)^2)^2 of a sample (3 for a normal law)."""
    centred = x - x.mean()
    return float(np.mean(centred**4) / np.mean(centred**2) ** 2)


def cpu_timed(run: Callable[[], object]) -> tuple[object, float]:
    """``run()`` and its CPU seconds (this process, its threads included)."""
    start = time.process_time()
    result = run()
    return result, time.process_time() - start


def multilevel_diagnostics(values: np.ndarray, depths: tuple[int, ...]) -> dict:
    """Giles' diagnostics of a depth ladder on coupled paths (``values`` (paths, levels), depths doubling): the level
    corrections Y_0 = P_0 and Y_l = P_l - P_{l-1}; alpha and beta, the decay rates in log2 of |E Y_l| and Var Y_l over
    the corrections l >= 1 (least squares); gamma = 1, the cost of a level in layer steps (L_l + L_{l-1}); the
    kurtosis of the finest correction (large values make its variance estimate unreliable); and the saving a multilevel
    estimator would make at the finest level's accuracy, V[P_L] C_L / (sum_l sqrt(V_l C_l))^2, from these measured
    variances and this cost model (a prediction: no multilevel estimator is run)."""
    corrections = np.column_stack([values[:, 0], np.diff(values, axis=1)])
    variances = corrections.var(axis=0, ddof=1)
    means = np.abs(corrections.mean(axis=0))
    costs = np.array([depths[0], *(depths[k] + depths[k - 1] for k in range(1, len(depths)))], dtype=np.float64)
    levels = np.arange(1, len(depths))
    beta = -float(np.polyfit(levels, np.log2(variances[1:]), 1)[0])
    alpha = -float(np.polyfit(levels, np.log2(np.maximum(means[1:], np.finfo(float).tiny)), 1)[0])
    saving = float(values[:, -1].var(ddof=1) * depths[-1] / np.sum(np.sqrt(variances * costs)) ** 2)
    return {"alpha": alpha, "beta": beta, "gamma": 1.0, "kurtosis": kurtosis(corrections[:, -1]), "saving": saving}


def weak_antithetic_rows(pairs: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Antithetic pairs for weak-fedorov's estimators, per dimension and observable (module docstring); and the
    multilevel diagnostics of the same plain paths (``multilevel_diagnostics``)."""
    observables = token_observables()
    rows, multilevel = [], []
    for index, dim in enumerate(WEAK_DIMS):
        model = FedorovModel(tokens=2, dim=dim, beta=betas_across_critical(dim)[1])
        plain_design = WeakDesign(**WEAK_DESIGN, paths=2 * pairs, block_paths=min(2 * pairs, 2048))
        pair_design = WeakDesign(**WEAK_DESIGN, paths=pairs, block_paths=min(pairs, 1024))
        start = fixed_overlap(WEAK_RHO0)
        plain, plain_s = cpu_timed(
            lambda: coupled_observables(model, plain_design, observables, seed, (91, index), start)
        )
        paired, paired_s = cpu_timed(
            lambda: coupled_observables(model, pair_design, observables, seed, (92, index), start, antithetic=True)
        )
        for name in observables:
            a, b = plain[name], paired[name]
            multilevel.append(
                {
                    "check": "weak",
                    "study": "weak-fedorov",
                    "configuration": f"model F, d = {dim}, f = {name}",
                    "depths": list(WEAK_DESIGN["depths"]),
                    **multilevel_diagnostics(a, WEAK_DESIGN["depths"]),
                }
            )
            lever = {"lever": "antithetic pairs", "configuration": f"model F, d = {dim}, f = {name}"}
            rows += weak_lever_rows(lever, a, b, work=2.0, cost_factor=paired_s / plain_s, paths=2 * pairs)
    return rows, multilevel


def weak_lever_rows(
    lever: dict, without: np.ndarray, with_lever: np.ndarray, work: float, cost_factor: float, paths: int
) -> list[dict]:
    """A weak lever's rows (``lever``: its name and configuration) from per-path values at every depth, (paths,
    levels), without and with it: the finest mean (weak_limit's estimate) and the finest coupled difference
    (weak_order's)."""
    return [
        {
            "check": "weak",
            "study": "weak-fedorov",
            **lever,
            "quantity": quantity,
            **variance_factor(plain, levered, work=work),
            "cost_factor": cost_factor,
            "paths": paths,
        }
        for quantity, plain, levered in (
            ("finest mean (weak_limit)", without[:, -1], with_lever[:, -1]),
            ("finest difference (weak_order)", without[:, -2] - without[:, -1], with_lever[:, -2] - with_lever[:, -1]),
        )
    ]


def weak_martingale_rows(paths: int, seed: int = 0) -> list[dict]:
    """The martingale control (``OverlapControl``) for weak-fedorov's estimators, per dimension and observable, on the
    same noise paths with and without it (module docstring)."""
    observables = token_observables()
    design = WeakDesign(**WEAK_DESIGN, paths=paths, block_paths=min(paths, 2048))
    start, rows = fixed_overlap(WEAK_RHO0), []
    for index, dim in enumerate(WEAK_DIMS):
        model = FedorovModel(tokens=2, dim=dim, beta=betas_across_critical(dim)[1])
        control = overlap_control(model, OVERLAP_OBSERVABLES, design.horizon, design.depths[-1])
        runs = [
            cpu_timed(lambda c=c: coupled_observables(model, design, observables, seed, (96, index), start, control=c))
            for c in (None, control)
        ]
        (plain, plain_s), (controlled, controlled_s) = runs
        for name in observables:
            lever = {"lever": "martingale control", "configuration": f"model F, d = {dim}, f = {name}"}
            rows += weak_lever_rows(
                lever, plain[name], controlled[name], work=1.0, cost_factor=controlled_s / plain_s, paths=paths
            )
    return rows


LOCAL_MODELS = ("F n=2 d=16", "A tanh frozen m=32 d=8 repulsive", "A relu Gaussian field d=5 attractive")  # power's
# where each lever is in use, and why not where it is not
TAKEN = {
    "antithetic pairs": "no: weak_order, the ladders' binding check, gains nothing",
    "the layer's own control variate": "yes: the public local check (default) and power's local rows",
    "martingale control": "yes: weak-fedorov's coupled ladders and universality runs; not the public weak checks "
    "(a user's claim has no one-dimensional Kolmogorov equation to give u)",
}


def local_control_rows(samples: int, seed: int = 0) -> list[dict]:
    """The layer's own control against the claim's for the local check, on power's models ``LOCAL_MODELS`` (module
    docstring)."""
    rows = []
    models = local_models(seed, (2,))
    for index, label in enumerate(LOCAL_MODELS):
        model = models[label]
        states = states_for(model.tokens, model.dim, ("uniform",), seed, (93, index))
        outcomes = {}
        for control in ("claim", "layer"):
            design = LocalDesign(samples=samples, control=control)
            outcomes[control] = cpu_timed(
                lambda d=design: local_checks(model, model.limit_sde(), states, d, seed, (94, index))
            )
        for name in ("drift_scale", "diffusion_scale"):
            widths = {}
            for control, (checks, _) in outcomes.items():
                check = next(c for c in checks if c.name == name and c.config.get("state") == "uniform")
                widths[control] = (check.ci[1] - check.ci[0]) / 2
            ratio = float((widths["claim"] / widths["layer"]) ** 2)
            lo, hi = log_interval(ratio, 4.0 / samples)  # two variance estimates of relative variance 2 / n each
            rows.append(
                {
                    "check": "local",
                    "study": "power",
                    "lever": "the layer's own control variate",
                    "configuration": f"{label}, uniform state",
                    "quantity": name,
                    "factor": ratio,
                    "interval": [lo, hi],
                    "cost_factor": outcomes["layer"][1] / outcomes["claim"][1],
                    "paths": samples,
                }
            )
    return rows


COMMUTE_DESIGN = dict(depths=(4, 8, 16, 32, 64), tokens=(8, 16, 32), large=64, reference_factor=2, beta=1.0)


def commute_multilevel_rows(pairs: int, seed: int = 0) -> list[dict]:
    """Giles' diagnostics of commute's depth ladders for its own models (``models``, at its horizons), per model and
    token count N on a shorter token ladder (each sample an antithetic pair, as the study's): ``multilevel_diagnostics``
    of u(N, L) over L."""
    rows = []
    for index, (label, model_for) in enumerate(commute_models(seed).items()):
        horizon = COMMUTE_DESIGNS["quick"][label].horizon  # the study's own: T = 2 for model F, 1 for model A
        design = CommuteDesign(**COMMUTE_DESIGN, horizon=horizon, paths=pairs, block_paths=min(pairs, 128))
        energies = coupled_energies(model_for, design, seed, (95, index))
        levels = len(design.depths)
        for position, tokens in enumerate(design.tokens):
            rows.append(
                {
                    "check": "commute",
                    "study": "commute",
                    "configuration": f"model {label}, N = {tokens}, energy at T = {horizon:g}",
                    "depths": list(design.depths),
                    **multilevel_diagnostics(energies[:, position * levels : (position + 1) * levels], design.depths),
                }
            )
    return rows


def variance_reduction(
    pairs: int = 4096, samples: int = LOCAL_SAMPLES, commute_pairs: int = 256, seed: int = 0
) -> dict[str, list[dict]]:
    """Every lever's rows (module docstring), each with its efficiency (variance factor / cost factor), and the
    multilevel diagnostics of the weak and commute ladders."""
    weak, multilevel = weak_antithetic_rows(pairs, seed)
    multilevel += commute_multilevel_rows(commute_pairs, seed)
    rows = weak + weak_martingale_rows(2 * pairs, seed) + local_control_rows(samples, seed)
    return {
        "levers": [
            {**row, "efficiency": row["factor"] / row["cost_factor"], "taken": TAKEN[row["lever"]]} for row in rows
        ],
        "multilevel": multilevel,
    }


def variance_markdown(measured: dict[str, list[dict]] | list[dict]) -> list[str]:
    """The variance-reduction tables of ``performance.md``: the levers, then the multilevel diagnostics (a plain list:
    the levers alone, as the first reports wrote them)."""
    measured = {"levers": measured} if isinstance(measured, list) else measured
    rows = measured["levers"]
    lines = [
        "## Variance reduction (measured)",
        "",
        __doc__.strip().split("\n\n")[1].replace("\n", " "),
        "",
        "| check | study | lever | configuration | quantity | variance factor [95%] | cost factor | efficiency "
        "| taken |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row["interval"]
        lines.append(
            f"| {row['check']} | {row['study']} | {row['lever']} | {row['configuration']} | {row['quantity']} | "
            f"{row['factor']:.2f} [{lo:.2f}, {hi:.2f}] | {row['cost_factor']:.2f} | {row['efficiency']:.2f} | "
            f"{row.get('taken', '-')} |"
        )
    if measured.get("multilevel"):
        depths = ", ".join(map(str, measured["multilevel"][0]["depths"]))
        lines += [
            "",
            f"Multilevel diagnostics (Giles) of the weak rows' plain paths and of commute's energies (pairs), levels "
            f"L = {depths}: alpha and beta, the decay "
            "rates in log2 of the mean and the variance of the level corrections P_l - P_(l-1); gamma, the growth of "
            "a level's cost in layer steps; the kurtosis of the finest correction; and the saving a multilevel "
            "estimator would make at the finest level's accuracy, predicted from these measured variances "
            "(V[P_L] C_L / (sum_l sqrt(V_l C_l))^2; no multilevel estimator is run yet).",
            "",
            "| check | study | configuration | alpha | beta | gamma | kurtosis (finest) | predicted saving |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in measured["multilevel"]:
            numbers = f"{row['alpha']:.2f} | {row['beta']:.2f} | {row['gamma']:g} | {row['kurtosis']:.1f}"
            lines.append(
                f"| {row['check']} | {row['study']} | {row['configuration']} | {numbers} | {row['saving']:.2f} |"
            )
    return lines
