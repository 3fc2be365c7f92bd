"""The phase transition of two tokens of model F (where they end against the scale function of the derived overlap
diffusion, over a (d, beta, rho_0) grid), n tokens (antipodal formations persist; without noise, one cluster) and the
hybrid model's dichotomy: every run and every check of the phase-transition study, and its figures (the n-token runs
in ``phase_many_tokens``). The study holds the design (``phase_design.PHASE_DESIGNS``) and its notes;
``phase_transition`` runs it."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import verify
from verify._analysis import hybrid_ends, p_antipodal_double
from verify._models import beta as beta_symbol
from verify._models import eps as eps_symbol

from .._models import FedorovModel, HybridModel, TwoTokenOverlapChain
from .._output import CellMap, Curve, Plot
from .._paths import fixed_overlap, overlap, simulate
from .._runtime import concurrent_map
from .._statistics import FAIL, PASS, Check, confidence_z, excess_resolution, family_confidence, wilson, z_confidence
from .overlap_ends import DELTA, MAX_UNDECIDED, decided_ends, probability_check, run_until_decided
from .phase_design import HORIZON_FACTOR, PhaseDesign, phase_horizon, planned_paths
from .phase_many_tokens import many_tokens


@dataclass(frozen=True)
class PhaseOutcome:
    """The study's checks (one Bonferroni family of ``n_checks`` at z = ``z``), its figures by file suffix, and the
    rows of the grid, the n-token runs and the hybrid runs."""

    checks: list[Check]
    plots: dict[str, list]
    rows: list[dict]
    many_rows: list[dict]
    hybrid_rows: list[dict]
    n_checks: int
    z: float


def beta_grid(dim: int, design: PhaseDesign) -> list[float]:
    lo, hi = verify.critical_beta(dim)
    if hi == 0:
        return list(design.betas_d3)
    return [round(f * float(hi), 4) for f in design.beta_factors]


def family_size(design: PhaseDesign, grid_points: int) -> int:
    """Statistical checks of one run: p_antipodal and undecided per (d, beta, rho0); antipodal_persists and
    noise_off_collapse per token count; hybrid_dichotomy per (beta, eps^2)."""
    return (
        2 * grid_points * len(design.rho0s)
        + 2 * len(design.many_tokens)
        + len(design.hybrid_betas) * len(design.hybrid_factors)
    )


def phase_transition(
    design: PhaseDesign, seed: int, study_key: int, start: Callable[[int], Callable[[int], None]]
) -> PhaseOutcome:
    """Run ``design``: the (d, beta, rho_0) grid of two-token runs (each cell's streams keyed ``(study_key, cell,
    rho_0)``), the n-token runs and the hybrid dichotomy; ``start(total)`` returns the callback advanced after each of
    the grid's ``total`` cells."""
    grid = [(dim, b) for dim in design.dims for b in beta_grid(dim, design)]
    n_checks = family_size(design, len(grid))
    confidence = family_confidence(n_checks)
    z = confidence_z(confidence)
    runs = [(index, j) for index in range(len(grid)) for j in range(len(design.rho0s))]
    advance = start(len(runs))
    predictions = [p_antipodal_double(dim, b, design.rho0s) for dim, b in grid]

    def grid_run(run: tuple[int, int]) -> tuple[list[Check], dict]:
        index, j = run
        key = (study_key, index, j)
        result = _grid_cell(design, grid[index], design.rho0s[j], float(predictions[index][j]), seed, key, confidence)
        advance(1)
        return result

    # the grid's 2 x (points x rho0s) blocks are submitted at once: short runs one after the other would each wait
    # behind the other study's queue of blocks
    checks, rows = [], []
    for run_checks, row in concurrent_map(grid_run, runs):
        checks += run_checks
        rows.append(row)
    many_checks, many_plots, many_rows = many_tokens(design, seed, study_key, confidence)
    hybrid_checks, hybrid_rows = hybrid_dichotomy(design, seed, study_key, confidence)
    checks += many_checks + hybrid_checks
    plots = {
        "": _probability_plots(design, rows),
        "phase-diagram": _phase_maps(rows),
        "many-tokens": many_plots,
    }
    return PhaseOutcome(checks, plots, rows, many_rows, hybrid_rows, n_checks, z)


def _grid_cell(
    design: PhaseDesign,
    cell: tuple[int, float],
    rho0: float,
    predicted: float,
    seed: int,
    key: tuple[int, ...],
    confidence: float,
) -> tuple[list[Check], dict]:
    """One cell (d, beta) of the grid from overlap ``rho0``: the antipodal probability against ``predicted`` (the
    scale function's) and the undecided fraction, run until decided; and the cell's row."""
    dim, b = cell
    T = phase_horizon(dim, b, design)
    model = TwoTokenOverlapChain(FedorovModel(tokens=2, dim=dim, beta=b, sigma=1.0))
    z = confidence_z(confidence)
    paths = planned_paths(design, predicted, z)
    rho, depth, followed = run_until_decided(model, rho0, T, design.step, paths, seed, key, design.block_paths)
    antipodal, undecided, allowance = decided_ends(rho, dim, b)
    config = {"d": dim, "beta": b, "rho0": rho0}
    probability = probability_check(
        antipodal,
        paths,
        predicted,
        allowance,
        confidence,
        config,
        f"T = {T:.2f}, L = {depth}, {undecided} undecided of {paths}{followed}",
        design.probability_target,
    )
    # A design requirement (the horizon): fails when the undecided fraction is significantly above 2%.
    undecided_check = small_fraction_check(
        "undecided",
        undecided,
        paths,
        z,
        design.fraction_target,
        config,
        f"runs with |rho| < {1 - DELTA} at the end (T = {T:.2f}, or later for runs followed further)",
    )
    return [probability, undecided_check], {
        "d": dim,
        "beta": b,
        "rho0": rho0,
        "predicted": predicted,
        "fraction": antipodal / paths,
        "ci": list(probability.ci),
        "undecided": undecided,
        "horizon": T,
        "depth": depth,
        "paths": paths,
    }


def _probability_plots(design: PhaseDesign, rows: list[dict]) -> list[Plot]:
    plots = []
    for dim in design.dims:
        lo, hi = verify.critical_beta(dim)
        betas = sorted({r["beta"] for r in rows if r["d"] == dim})
        fine = np.linspace(0.0 if hi == 0 else 0.3 * float(hi), 1.1 * max(betas), 60)[1:]
        curves = []
        for rho0 in design.rho0s:
            theory = [float(p_antipodal_double(dim, float(bb), [rho0])[0]) for bb in fine]
            curves.append(Curve(f"theory rho0={rho0}", fine.tolist(), theory))
            pts = [r for r in rows if r["d"] == dim and r["rho0"] == rho0]
            curves.append(
                Curve(
                    f"simulation rho0={rho0}",
                    [r["beta"] for r in pts],
                    [r["fraction"] for r in pts],
                    [r["ci"][0] for r in pts],
                    [r["ci"][1] for r in pts],
                    style="points",
                )
            )
        plots.append(Plot(f"d = {dim}", "beta", "P(antipodal)", curves, [(float(hi), "beta_c")]))
    return plots


def standard_error_units(fraction: float, predicted: float, paths: int) -> float:
    """(simulated - predicted) / SE, SE = sqrt(q (1 - q) / n) at q = (k + 1/2) / (n + 1) (k = n x fraction): the
    binomial standard error at a Jeffreys-type centre, never 0 (a fraction of 0 against a prediction of 0 is 0)."""
    q = (fraction * paths + 0.5) / (paths + 1)
    return (fraction - predicted) / math.sqrt(q * (1 - q) / paths)


def _phase_maps(rows: list[dict]) -> list[CellMap]:
    """Per rho_0: the simulated fraction ending antipodal over (d, beta), the scale function's P(antipodal), and
    their difference in standard errors, each with the certified beta_c(d) drawn over it."""
    dims = sorted({r["d"] for r in rows})
    d_line = np.arange(dims[0], dims[-1] + 1)
    curve = Curve(
        "beta_c(d) = acosh(d - 2) / 2 (certified)",
        d_line.tolist(),
        [float(verify.critical_beta(int(dv))[1]) for dv in d_line],
    )
    maps = []
    for rho0 in sorted({r["rho0"] for r in rows}, reverse=True):
        cells = [
            sorted((r for r in rows if r["d"] == dim and r["rho0"] == rho0), key=lambda r: r["beta"]) for dim in dims
        ]
        betas = [[r["beta"] for r in column] for column in cells]
        for title, scale, value in (
            ("simulated fraction ending antipodal", "unit", lambda r: r["fraction"]),
            ("P(antipodal), scale function", "unit", lambda r: r["predicted"]),
            (
                "(simulated - predicted) / SE",
                "signed",
                lambda r: standard_error_units(r["fraction"], r["predicted"], r["paths"]),
            ),
        ):
            values = [[value(r) for r in column] for column in cells]
            maps.append(CellMap(f"{title}, rho0 = {rho0:g}", "d", "beta", dims, betas, values, scale, [curve]))
    return maps


def small_fraction_check(name: str, count: int, runs: int, z: float, target: float, config: dict, note: str) -> Check:
    """A fraction claimed at most ``MAX_UNDECIDED``: fails when its Wilson interval (at ``z``) lies above it;
    resolution ``excess_resolution``."""
    lo, hi = wilson(count, runs, z)
    return Check(
        name,
        0.0,
        count / runs,
        (lo, hi),
        FAIL if lo > MAX_UNDECIDED else PASS,
        config,
        MAX_UNDECIDED,
        z_confidence(z),
        resolution=excess_resolution(runs, MAX_UNDECIDED, z),
        target=target,
        note=f"{note}; fails when significantly above {MAX_UNDECIDED:.0%}",
    )


def hybrid_dichotomy(
    design: PhaseDesign, seed: int, study_key: int, confidence: float
) -> tuple[list[Check], list[dict]]:
    """Hybrid model on both sides of eps_c^2(beta): collapse a.s. below, antipodal a.s. above. The check
    ``hybrid_dichotomy`` fails when the runs ending at the wrong end are significantly more (Wilson interval at
    ``confidence``) than the undecided ones could explain."""
    runs = []
    # the symbolic and mpmath work here, in the calling thread: mpmath's working precision is process-wide, and the
    # runs below go side by side in threads
    for i, b in enumerate(design.hybrid_betas):
        crit = float(verify.critical_eps2(b))
        for j, factor in enumerate(design.hybrid_factors):
            eps = math.sqrt(factor * crit)
            exponents = [
                float(end.growth_exponent.subs({beta_symbol: b, eps_symbol: eps})) for end in hybrid_ends().values()
            ]
            attracting = min(abs(lam) for lam in exponents if lam < 0)
            T = min(design.max_horizon, HORIZON_FACTOR / attracting)
            runs.append((i, b, j, factor, crit, eps, T))

    run = functools.partial(_hybrid_run, design, seed, study_key, confidence)
    results = concurrent_map(run, runs)  # one block a run, the runs side by side
    return [check for check, _ in results], [row for _, row in results]


def _hybrid_run(
    design: PhaseDesign,
    seed: int,
    study_key: int,
    confidence: float,
    item: tuple[int, float, int, float, float, float, float],
) -> tuple[Check, dict]:
    """One hybrid run, ``item`` = (i, beta, j, factor, eps_c^2, eps, T) with eps^2 = factor x eps_c^2, from rho_0 = 0
    until T; the fraction ending at the wrong end against the undecided one, and the run's row."""
    i, b, j, factor, crit, eps, T = item
    z = confidence_z(confidence)
    depth = round(T / design.hybrid_step)
    model = HybridModel(dim=3, beta=b, eps=eps)
    rho = overlap(
        simulate(
            model,
            depth,
            T,
            design.hybrid_paths,
            seed,
            (study_key, 200 + i, j),
            fixed_overlap(0.0),
            block_paths=design.block_paths,
        )
    )
    expected_end = "collapse" if factor < 1 else "antipodal"
    wrong = int(np.sum(rho < -1 + DELTA)) if factor < 1 else int(np.sum(rho > 1 - DELTA))
    undecided = int(np.sum(np.abs(rho) <= 1 - DELTA))
    w_lo, w_hi = wilson(wrong, design.hybrid_paths, z)
    allowance = undecided / design.hybrid_paths
    verdict = FAIL if w_lo > allowance else PASS
    config = {"beta": b, "eps2_over_eps2c": factor, "expected": expected_end}
    check = Check(
        "hybrid_dichotomy",
        0.0,
        wrong / design.hybrid_paths,
        (w_lo, w_hi),
        verdict,
        config,
        allowance,
        confidence,
        target=design.hybrid_target,
        resolution=excess_resolution(design.hybrid_paths, min(allowance, 1.0), z),
        note=f"fraction ending at the other end; eps_c^2 = {crit:.4f}, T = {T:.1f}, "
        f"L = {depth}, {undecided} undecided of {design.hybrid_paths}",
    )
    row = {
        "beta": b,
        "eps2": factor * crit,
        "eps2_c": crit,
        "expected": expected_end,
        "wrong_end": wrong,
        "undecided": undecided,
        "paths": design.hybrid_paths,
    }
    return check, row
