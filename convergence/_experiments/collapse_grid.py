"""Model A's experimental grid (Agazzi et al., arXiv:2604.26898) run and judged: every configuration's run from
uniform tokens and the repulsive ones' from one tight cluster (``record_collapse``), their collapse rates, the claim
checks of ``grid_claims`` on the configurations of ``grid_configs``, the table and the figures of the grid-agazzi
study. The study holds the profiles (``grid_configs.GridDesign``); ``run_collapse_grid`` runs one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verify._analysis import KernelSpec

from .._models import AgazziModel, GaussianField
from .._output import Curve, Plot
from .._runtime import concurrent_map
from .._statistics import FAIL, PASS, Check, family_confidence, first_nonfinite
from .collapse import collapse_rate, record_collapse, tight_cluster
from .grid_claims import claim_checks, paper_wording_findings
from .grid_configs import (
    ACTIVATIONS,
    ATTENTION,
    BETA,
    BIASES,
    CLUSTER_DEPTH,
    CLUSTER_HORIZON,
    CLUSTER_RADIUS,
    CLUSTER_TIMES,
    DEPTH,
    EVERY,
    HORIZON,
    TIMES,
    TOKENS,
    WRONG_PREDICTIONS,
    Config,
    GridDesign,
    cluster_key,
    configs,
    lambda_true,
    predicted_rate,
    repulsion_configs,
    stream_key,
)
from .strong import bootstrap_generator


@dataclass(frozen=True)
class GridOutcome:
    """The grid's checks (one Bonferroni family of ``family`` claim checks), its figures by file suffix and its
    per-configuration table."""

    checks: list[Check]
    plots: dict[str, list[Plot]]
    table: list[dict]
    family: int


def run_collapse_grid(
    design: GridDesign, seed: int, study_key: int, start: Callable[[int], Callable[[int], None]]
) -> GridOutcome:
    """Run ``design``'s grid (each configuration's streams keyed by ``stream_key(study_key, c)``) and its runs from one
    cluster, and judge every claim; ``start(total)`` returns the callback advanced after each of ``total`` runs."""
    grid = configs(design)
    repulsive = repulsion_configs(grid)
    records, cluster_records = _grid_records(design, seed, study_key, grid, repulsive, start)

    def estimate(level: float, replicates: int) -> tuple[dict, dict]:
        rates = {
            c: collapse_rate(records[c], TIMES, bootstrap_generator(seed, stream_key(study_key, c)), replicates, level)
            for c in grid
        }
        cluster = {
            c: collapse_rate(
                cluster_records[c], CLUSTER_TIMES, bootstrap_generator(seed, cluster_key(study_key, c)), 10, level
            )
            for c in repulsive
        }
        return rates, cluster

    # the family: every claim check the certified exponent produces (known before the rates' intervals are drawn)
    family = 1 + sum(c.claim for c in claim_checks(grid, *estimate(0.99, 10), predicted_rate, 0.99, design))
    confidence = family_confidence(max(family, 1))
    rates, cluster = estimate(confidence, design.replicates)
    bad = first_nonfinite(
        {c.label: records[c] for c in grid} | {f"{c.label} (cluster)": cluster_records[c] for c in repulsive}
    )
    finite = Check(
        "finite_records",
        0.0,
        0.0 if not bad else 1.0,
        (0.0, 0.0) if not bad else (1.0, 1.0),
        FAIL if bad else PASS,
        {},
        confidence=1.0,
        false_failure_rate=0.0,
        note=bad or "every recorded cosine and energy of every configuration is finite (a diverged run fails here)",
    )
    checks = [finite, *claim_checks(grid, rates, cluster, predicted_rate, confidence, design)]
    for mutant in WRONG_PREDICTIONS:
        checks += claim_checks(grid, rates, cluster, WRONG_PREDICTIONS[mutant], confidence, design, mutant)
    checks += paper_wording_findings(grid)
    plots = {"": _figure(design, rates, "log"), "cosine": _figure(design, rates, "cosine")}
    return GridOutcome(checks, plots, _grid_table(grid, rates, cluster), family)


def _grid_records(
    design: GridDesign,
    seed: int,
    study_key: int,
    grid: list[Config],
    repulsive: list[Config],
    start: Callable[[int], Callable[[int], None]],
) -> tuple[dict, dict]:
    """The recorded collapse of every configuration from uniform tokens, and of the repulsive ones from one tight
    cluster, the runs side by side."""
    tasks = [(c, False) for c in grid] + [(c, True) for c in repulsive]
    advance = start(len(tasks))

    def run(task: tuple[Config, bool]) -> np.ndarray:
        c, from_cluster = task
        model = AgazziModel(
            TOKENS, GaussianField(KernelSpec(c.act, c.dim, c.bias, c.bias), TOKENS, pivoted=True), BETA, c.v
        )
        paths = design.paths[c.dim]
        if from_cluster:
            paths = design.cluster_paths.get(c.dim, paths)
            records = record_collapse(
                model,
                CLUSTER_DEPTH,
                CLUSTER_HORIZON,
                paths,
                BETA,
                seed,
                cluster_key(study_key, c),
                design.block_paths,
                initial=tight_cluster(CLUSTER_RADIUS),
            )
        else:
            records = record_collapse(
                model, DEPTH, HORIZON, paths, BETA, seed, stream_key(study_key, c), design.block_paths, EVERY
            )
        advance(1)
        return records

    results = concurrent_map(run, tasks)
    records = {c: r for (c, from_cluster), r in zip(tasks, results) if not from_cluster}
    cluster_records = {c: r for (c, from_cluster), r in zip(tasks, results) if from_cluster}
    return records, cluster_records


def _grid_table(grid: list[Config], rates: dict, cluster: dict) -> list[dict]:
    """One row per configuration: its exponents, measured rate, window and final medians."""
    return [
        {
            "act": c.act,
            "d": c.dim,
            "bias": c.bias,
            "v": c.v,
            "lambda_1": lambda_true(c),
            "predicted_rate": predicted_rate(c),
            "rate": rates[c].rate,
            "clustered": rates[c].clustered,
            "window": [float(TIMES[rates[c].window[0]]), float(TIMES[rates[c].window[1] - 1])],
            "final_cosine": float(rates[c].median_cosine[-1]),
            "final_log_energy": float(rates[c].median_log_energy[-1]),
            "cluster_rate": cluster[c].rate if c in cluster else None,
        }
        for c in grid
    ]


def _figure(design: GridDesign, rates: dict, kind: str) -> list[Plot]:
    """Rows: activation; columns: d; colour: bias; line style: attention sign. Median over paths with its band."""
    colours = {0.0: "tab:blue", 0.1: "tab:orange"}
    styles = {1.0: "-", 0.0: "--", -1.0: ":"}
    plots = []
    layers = list(range(0, DEPTH + 1, EVERY))
    for act in ACTIVATIONS:
        for dim in tuple(design.paths):
            curves = []
            for bias in BIASES:
                for v in ATTENTION:
                    r = rates[Config(act, dim, bias, v)]
                    values, band = (
                        (r.median_log_energy / np.log(10), r.log_energy_band / np.log(10))
                        if kind == "log"
                        else (r.median_cosine, r.cosine_band)
                    )
                    curves.append(
                        Curve(
                            f"bias {bias:g}, v {v:+g}",
                            layers,
                            values.tolist(),
                            band[0].tolist(),
                            band[1].tolist(),
                            color=colours[bias],
                            linestyle=styles[v],
                        )
                    )
            ylabel = "log10 E_beta (median)" if kind == "log" else "mean pairwise cosine (median)"
            plots.append(Plot(f"{act}, d = {dim}", "layer", ylabel, curves))
    return plots
