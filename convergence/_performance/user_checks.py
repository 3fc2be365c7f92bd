"""What a user's own checks cost at their defaults, in ref units, and whether they decide.

Model F with n = 2 tokens in d = 16 (sigma^2 = 1/d, beta = 1), its limit SDE (the true claim) and that SDE with its
drift x 1.05 (a 5% error the local and weak checks must reject; the strong check's default target is a drift error
of ``DRIFT_TARGET``, 20%, so its mutant is that one, rejected with probability about 90% by design), through the
public checks at their default settings: ``check_local_consistency``, ``check_strong_order`` and
``check_weak_limit`` (f = <x_0, x_1>^2). Each run's cost is the CPU seconds of this process (``time.process_time``:
every thread, BLAS included; the checks run in process by default), also in units of the reference kernel
(``convergence._runtime.reference``). Budgets (ref units per run): local 0.5, strong 3, weak 5.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .._checks import check_local_consistency, check_strong_order, check_weak_limit
from .._experiments import DRIFT_TARGET, DriftScaled
from .._models import FedorovModel
from .._statistics import FAIL, PASS
from .._studies.calibration_cases import overlap_squared

DRIFT_ERRORS = {"local": 0.05, "strong": DRIFT_TARGET, "weak": 0.05}  # each check's mutant: drift x (1 + error)
BUDGETS = {"local": 0.5, "strong": 3.0, "weak": 5.0}  # ref units per run, true claim or mutant


def _checks() -> dict[str, Callable]:
    return {
        "local": lambda model, claim, seed: check_local_consistency(model, claim, seed=seed),
        "strong": lambda model, claim, seed: check_strong_order(model, claim, seed=seed),
        "weak": lambda model, claim, seed: check_weak_limit(model, claim, overlap_squared, seed=seed),
    }


def user_check_costs(ref_s: float, seed: int = 0, progress: Callable[[str], None] = lambda name: None) -> list[dict]:
    """One row per (check, claim): the verdict wanted and reached, CPU seconds, ref units and the budget."""
    model = FedorovModel(2, 16)
    true_claim = model.limit_sde()
    rows = []
    for name, run in _checks().items():
        mutant = 1 + DRIFT_ERRORS[name]
        claims = (("true claim", true_claim, PASS), (f"drift x {mutant:g}", DriftScaled(true_claim, mutant), FAIL))
        for label, claim, wanted in claims:
            progress(f"user check: {name}, {label}")
            start = time.process_time()
            outcome = run(model, claim, seed)
            cpu = time.process_time() - start
            rows.append(
                {
                    "check": name,
                    "claim": label,
                    "wanted": str(wanted),
                    "verdict": str(outcome.verdict),
                    "cpu_s": cpu,
                    "ref": cpu / ref_s,
                    "budget_ref": BUDGETS[name],
                }
            )
    return rows


def user_checks_markdown(rows: list[dict]) -> list[str]:
    """The rows as a table: decided as wanted and within budget."""
    lines = [
        "## A user's own checks at their defaults",
        "",
        __doc__.strip().split("\n\n")[1].replace("\n", " "),
        "",
        "| check | claim | verdict (wanted) | CPU s | ref units | budget | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "yes" if r["verdict"] == r["wanted"] and r["ref"] <= r["budget_ref"] else "**no**"
        lines.append(
            f"| {r['check']} | {r['claim']} | {r['verdict']} ({r['wanted']}) | {r['cpu_s']:.2f} | {r['ref']:.3g} | "
            f"{r['budget_ref']:g} | {met} |"
        )
    return lines


__all__ = ["BUDGETS", "user_check_costs", "user_checks_markdown"]
