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
* local, the layer's own control: power's model F (n = 2, d = 16) and its model A (ReLU Gaussian field, n = 4, d = 5,
  attractive), each at the uniform state; the claim's diffusion on the
  same noise as control (``LocalDesign.control = "claim"``) against the layer's antithetic increments and its own
  first- and second-order noise response (``"layer"``), at equal samples; for drift_scale and diffusion_scale, from
  the squared half-widths of their intervals (each a fixed multiple of the standard error).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from verify._analysis import KernelSpec

from .._experiments import (
    OVERLAP_OBSERVABLES,
    LocalDesign,
    WeakDesign,
    betas_across_critical,
    coupled_observables,
    local_checks,
    states_for,
)
from .._models import AgazziModel, FedorovModel, GaussianField
from .._paths import fixed_overlap, overlap

WEAK_DIMS = (3, 4, 8)
WEAK_DESIGN = dict(depths=(4, 8, 16, 32, 64), horizon=2.0)
WEAK_RHO0 = -0.5
LOCAL_SAMPLES = 16384
Z_95 = 1.959963984540054


def log_interval(ratio: float, relative_variance: float) -> tuple[float, float]:
    """A 95% interval for a positive ratio whose logarithm has variance ``relative_variance``."""
    half = Z_95 * math.sqrt(relative_variance)
    return ratio * math.exp(-half), ratio * math.exp(half)


def variance_factor(without: np.ndarray, with_lever: np.ndarray, work: float = 1.0) -> dict:
    """Var(``without``) / (``work`` Var(``with_lever``)) per path, with its interval: a path with the lever costs
    ``work`` paths without it (2 for an antithetic pair), so this is the variance ratio at equal work."""
    a, b = np.asarray(without, dtype=np.float64), np.asarray(with_lever, dtype=np.float64)
    ratio = float(a.var(ddof=1) / (work * b.var(ddof=1)))

    def kurtosis(x: np.ndarray) -> float:
        centred = x - x.mean()
        return float(np.mean(centred**4) / np.mean(centred**2) ** 2)

    lo, hi = log_interval(ratio, (kurtosis(a) - 1) / a.size + (kurtosis(b) - 1) / b.size)
    return {"factor": ratio, "interval": [lo, hi]}


def timed(run: Callable[[], object]) -> tuple[object, float]:
    """``run()`` and its CPU seconds (this process, its threads included)."""
    start = time.process_time()
    result = run()
    return result, time.process_time() - start


def weak_antithetic_rows(pairs: int, seed: int = 0) -> list[dict]:
    """Antithetic pairs for weak-fedorov's estimators, per dimension and observable (module docstring)."""
    observables = {name: (lambda x, f=f: f(overlap(x))) for name, f in OVERLAP_OBSERVABLES.items()}
    rows = []
    for index, dim in enumerate(WEAK_DIMS):
        model = FedorovModel(tokens=2, dim=dim, beta=betas_across_critical(dim)[1])
        plain_design = WeakDesign(**WEAK_DESIGN, paths=2 * pairs, block_paths=min(2 * pairs, 2048))
        pair_design = WeakDesign(**WEAK_DESIGN, paths=pairs, block_paths=min(pairs, 1024))
        start = fixed_overlap(WEAK_RHO0)
        plain, plain_s = timed(lambda: coupled_observables(model, plain_design, observables, seed, (91, index), start))
        paired, paired_s = timed(
            lambda: coupled_observables(model, pair_design, observables, seed, (92, index), start, antithetic=True)
        )
        for name in observables:
            a, b = plain[name], paired[name]
            for quantity, without, with_lever in (
                ("finest mean (weak_limit)", a[:, -1], b[:, -1]),
                ("finest difference (weak_order)", a[:, -2] - a[:, -1], b[:, -2] - b[:, -1]),
            ):
                rows.append(
                    {
                        "check": "weak",
                        "study": "weak-fedorov",
                        "lever": "antithetic pairs",
                        "configuration": f"model F, d = {dim}, f = {name}",
                        "quantity": quantity,
                        **variance_factor(without, with_lever, work=2.0),
                        "cost_factor": paired_s / plain_s,
                        "paths": 2 * pairs,
                    }
                )
    return rows


LOCAL_MODELS = {
    "model F, n = 2, d = 16": lambda: FedorovModel(2, 16),
    "model A, ReLU Gaussian field, n = 4, d = 5, attractive": lambda: AgazziModel(
        4, GaussianField(KernelSpec("relu", 5, 0.0, 0.0), 4), 1.0, 1.0
    ),
}


def local_control_rows(samples: int, seed: int = 0) -> list[dict]:
    """The layer's own control against the claim's for the local check, on two of power's models (module
    docstring)."""
    rows = []
    for index, (label, build) in enumerate(LOCAL_MODELS.items()):
        model = build()
        states = states_for(model.tokens, model.dim, ("uniform",), seed, (93, index))
        outcomes = {}
        for control in ("claim", "layer"):
            design = LocalDesign(samples=samples, control=control)
            outcomes[control] = timed(
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


def variance_reduction(pairs: int = 4096, samples: int = LOCAL_SAMPLES, seed: int = 0) -> list[dict]:
    """Every lever's rows (module docstring), each with its efficiency (variance factor / cost factor)."""
    rows = weak_antithetic_rows(pairs, seed) + local_control_rows(samples, seed)
    return [{**row, "efficiency": row["factor"] / row["cost_factor"]} for row in rows]


def variance_markdown(rows: list[dict]) -> list[str]:
    """The variance-reduction table of ``performance.md``."""
    lines = [
        "## Variance reduction (measured)",
        "",
        __doc__.strip().split("\n\n")[1].replace("\n", " "),
        "",
        "| check | study | lever | configuration | quantity | variance factor [95%] | cost factor | efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lo, hi = row["interval"]
        lines.append(
            f"| {row['check']} | {row['study']} | {row['lever']} | {row['configuration']} | {row['quantity']} | "
            f"{row['factor']:.2f} [{lo:.2f}, {hi:.2f}] | {row['cost_factor']:.2f} | {row['efficiency']:.2f} |"
        )
    return lines
