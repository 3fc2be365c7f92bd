"""Where two tokens end: runs decided at an end, the bound on decided runs still switching ends, and the check of
the antipodal fraction against a predicted probability.

A run is decided when its final overlap rho_T is within ``DELTA`` of an end. A decided run could still switch ends:
``decided_ends`` bounds that by the scale function of the overlap diffusion (``verify.analysis.hitting``) at the
next tabulated distance at least as large as the run's own distance to its end (``SWITCH_GRID``; P(antipodal | rho)
is monotone). ``probability_check`` compares the Wilson interval of the antipodal fraction with the prediction
plus that allowance; it is inconclusive when its resolution (the smallest probability error it rejects with 90%
power) exceeds ``PROBABILITY_RESOLUTION``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from verify.analysis import p_antipodal_double

from ..statistics import Check, confidence_z, detectable_effect, effect_verdict, wilson

DELTA = 0.01
SWITCH_GRID = 10.0 ** -np.arange(2, 17)  # distances to an end at which switching probabilities are tabulated
PROBABILITY_RESOLUTION = 0.2  # p_antipodal is inconclusive when it cannot see a probability error this large


def switch_bound(distances: np.ndarray, table: np.ndarray) -> float:
    """Sum over runs of the tabulated switching probability at the smallest tabulated distance that is
    at least the run's distance (SWITCH_GRID decreases; runs closer than its last entry use that entry)."""
    if distances.size == 0:
        return 0.0
    # index of the smallest grid distance >= the run's distance
    index = np.searchsorted(-SWITCH_GRID, -np.maximum(distances, SWITCH_GRID[-1]), side="right") - 1
    return float(np.sum(table[np.clip(index, 0, SWITCH_GRID.size - 1)]))


@cache
def switch_tables(dim: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """P(switching to the other end) from each distance of ``SWITCH_GRID`` to the antipodal end and to the
    collapse end (scale function at (d, beta); computed once per grid point, shared by its rho0 runs)."""
    return 1 - p_antipodal_double(dim, beta, -1 + SWITCH_GRID), p_antipodal_double(dim, beta, 1 - SWITCH_GRID)


def decided_ends(rho: np.ndarray, dim: int, beta: float) -> tuple[int, int, float]:
    """Final overlaps of two-token runs: (runs ending antipodal, undecided runs, allowance). The allowance is the
    undecided fraction plus the bound on decided runs still switching ends (``switch_bound``, from the scale
    function of the overlap diffusion at (d, beta))."""
    switch_from_antipodal, switch_from_collapse = switch_tables(dim, beta)
    antipodal, collapsed = rho < -1 + DELTA, rho > 1 - DELTA
    undecided = rho.size - int(antipodal.sum()) - int(collapsed.sum())
    switching = switch_bound(1 + rho[antipodal], switch_from_antipodal) + switch_bound(1 - rho[collapsed],
                                                                                       switch_from_collapse)
    return int(antipodal.sum()), undecided, (undecided + switching) / rho.size


def probability_check(antipodal: int, paths: int, predicted: float, allowance: float, confidence: float,
                      config: dict, note: str = "") -> Check:
    """``p_antipodal``: the Wilson interval (at ``confidence``) of ``antipodal / paths`` against the predicted
    probability +- ``allowance``; ``inconclusive`` when the resolution exceeds ``PROBABILITY_RESOLUTION``."""
    lo, hi = wilson(antipodal, paths, confidence_z(confidence))
    resolution = detectable_effect((lo, hi), allowance, confidence)
    verdict = effect_verdict((lo, hi), predicted, allowance, resolution, PROBABILITY_RESOLUTION)
    return Check("p_antipodal", predicted, antipodal / paths, (lo, hi), verdict, config, allowance, confidence,
                 note=f"{note}; inconclusive when the resolution exceeds {PROBABILITY_RESOLUTION:g}".lstrip("; "),
                 resolution=resolution)
