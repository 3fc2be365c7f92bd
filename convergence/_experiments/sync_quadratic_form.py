"""The synchronisation study's calibration section: the random quadratic form (Engel, Shalova, arXiv:2603.06187),
whose two points synchronise to a random antipodal pair. Its derived exponents at the diagonal and the antipodal end
against the median slopes of log(1 -+ rho), and from each starting overlap the derived invariant's expectation and the
merge probability (``verify._analysis.quadratic_form_results``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy as sp

from verify._analysis import QuadraticFormResults, quadratic_form_results
from verify._analysis import rho as rho_symbol
from verify._calculus import d as d_symbol

from .._models import QuadraticFormModel
from .._paths import fixed_overlap, overlap, simulate
from .._statistics import Check
from .exponents import (
    exponent_check,
    median_exponent,
    record_log_distances,
)
from .overlap_ends import expectation_check, merge_probability_check
from .strong import bootstrap_generator
from .sync_design import (
    CHECK_ALPHA,
    CONFIDENCE_LEVEL,
    QF_DELTA,
    QF_DIM,
    QF_RHO0S,
    SyncDesign,
)


def quadratic_form_section(
    design: SyncDesign, seed: int, study_key: int, advance: Callable[[int], None]
) -> tuple[list[Check], list[dict]]:
    """The random quadratic form's derived exponents at the diagonal and the antipodal end, then its invariant and
    merge probability from each starting overlap."""
    results = quadratic_form_results()
    model = QuadraticFormModel(2, QF_DIM)
    checks = _quadratic_form_exponents(model, results, design, seed, study_key, advance)
    invariant = sp.lambdify(rho_symbol, results.invariant, "numpy")
    merge = sp.lambdify(rho_symbol, results.merge_probability, "numpy")
    rows = []
    for index, rho0 in enumerate(QF_RHO0S):
        invariant_check, merge_check = _quadratic_form_overlap(
            model, results, invariant, merge, rho0, index, design, seed, study_key
        )
        checks += [invariant_check, merge_check]
        rows.append(
            {
                "rho0": rho0,
                "invariant_target": invariant_check.expected,
                "merge_probability": merge_check.expected,
                "undecided": merge_check.allowance,
            }
        )
    return checks, rows


def _quadratic_form_exponents(
    model: QuadraticFormModel,
    results: QuadraticFormResults,
    design: SyncDesign,
    seed: int,
    study_key: int,
    advance: Callable[[int], None],
) -> list[Check]:
    """qf_exponent_diagonal and qf_exponent_antipodal: the median slopes of log(1 -+ rho) against the derived ones."""
    checks = []
    ed = design.qf_exponents
    for index, (antipodal, expected) in enumerate(
        ((False, results.exponent_diagonal), (True, results.exponent_antipodal))
    ):
        key = (study_key, 3, index)
        logs = record_log_distances(model, ed, seed, key, antipodal=antipodal, progress=advance)
        # log(1 -+ rho) = 2 log|x -+ y| - log 2: its slope is twice that of the log-distance.
        est = median_exponent(2 * logs, ed, bootstrap_generator(seed, key), CONFIDENCE_LEVEL)
        name = "qf_exponent_antipodal" if antipodal else "qf_exponent_diagonal"
        checks.append(
            exponent_check(
                name,
                float(sp.sympify(expected).subs(d_symbol, QF_DIM)),
                est,
                ed,
                {"d": QF_DIM},
                note=f"slope of the median of log(1 {'+' if antipodal else '-'} rho)",
                confidence=CONFIDENCE_LEVEL,
            )
        )
    return checks


def _quadratic_form_overlap(
    model: QuadraticFormModel,
    results: QuadraticFormResults,
    invariant: Callable[[np.ndarray], np.ndarray],
    merge: Callable[[float], float],
    rho0: float,
    index: int,
    design: SyncDesign,
    seed: int,
    study_key: int,
) -> tuple[Check, Check]:
    """qf_invariant (E S(rho_T) = S(rho0) for the derived invariant S, ``invariant`` its numpy form) and
    qf_merge_probability (``merge`` the derived probability) from overlap rho0."""
    finals = [
        overlap(simulate(model, depth, 1.0, design.qf_paths, seed, (study_key, 4, index), initial=fixed_overlap(rho0)))
        for depth in design.qf_depths
    ]
    coarse, fine = (invariant(np.clip(r, -1.0, 1.0)) for r in finals)
    config = {"d": QF_DIM, "rho0": rho0}
    expected = float(invariant(rho0))
    invariant_check = expectation_check(
        "qf_invariant",
        fine,
        coarse,
        expected,
        CHECK_ALPHA,
        config,
        f"E S(rho_T) at T = 1, L = {design.qf_depths[1]}, with S = {results.invariant} "
        f"the derived invariant; allowance = |difference to L = {design.qf_depths[0]}| "
        f"(O(h) bias); target {design.invariant_target:.0%} of |E S|",
        design.invariant_target * abs(expected),
    )
    final = overlap(
        simulate(
            model,
            design.qf_merge_depth,
            design.qf_merge_horizon,
            design.qf_paths,
            seed,
            (study_key, 5, index),
            initial=fixed_overlap(rho0),
        )
    )
    merge_check = merge_probability_check(
        "qf_merge_probability",
        final,
        float(merge(rho0)),
        QF_DELTA,
        CHECK_ALPHA,
        config,
        f"at T = {design.qf_merge_horizon}",
        design.merge_target,
    )
    return invariant_check, merge_check
