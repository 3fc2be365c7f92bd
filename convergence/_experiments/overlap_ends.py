"""Where tokens end: runs decided at an end, the bound on decided runs still switching ends, and the checks of the
antipodal fraction against a predicted probability, of a merge probability, of a derived invariant's expectation,
and of the share of antipodal pairs among many tokens.

A run is decided when its final overlap rho_T is within ``DELTA`` of an end; ``run_until_decided`` stops each
two-token run once it is decided and unlikely to switch ends, and follows the others past the horizon. A decided run
could still switch ends: ``decided_ends`` bounds that by the scale function of the overlap diffusion
(``verify._analysis.hitting``) at the next tabulated distance at least as large as the run's own distance to its end
(``SWITCH_GRID``; P(antipodal | rho) is monotone). ``probability_check`` compares the Wilson interval of the
antipodal fraction with the prediction plus that allowance; it is inconclusive when its resolution (the smallest
probability error it rejects with 90% power) exceeds its target (``PROBABILITY_TARGET`` unless the design says
otherwise). ``merge_probability_check`` counts undecided runs half, with half their fraction as its allowance;
``expectation_check`` allows the O(h) bias measured against a coarser depth; ``antipodal_share_check`` is a Student
t interval over the paths' shares. Each is inconclusive when its resolution exceeds its target. The phase
experiment's design, which runs these, is ``phase_design``."""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy import stats

import verify
from verify._analysis import p_antipodal_double

from .._models import TwoTokenOverlapChain
from .._paths import fixed_overlap, overlap, path_states, simulate
from .._statistics import DETECTION_POWER, FAIL, INCONCLUSIVE, PASS, Check, confidence_z, effect_check, wilson, z_value

DELTA = 0.01
SWITCH_GRID = 10.0 ** -np.arange(2, 17)  # distances to an end at which switching probabilities are tabulated
PROBABILITY_TARGET = 0.075  # p_antipodal is inconclusive when it cannot see a probability error this large
MERGE_TARGET = 0.05  # the same for merge_probability_check (its allowance, half the undecided fraction, included)
SHARE_TARGET = 0.3  # antipodal_share_check may miss a share this far on the other side of its threshold
CHUNKS = 4  # a horizon is run in parts; after each, runs decided (and unlikely to switch ends) stop
FOLLOW_CHUNKS = 8  # runs undecided or likely to switch at T are followed for up to this many more horizons
SWITCH_THRESHOLD = 1e-3  # a decided run that switches ends with a larger probability is followed
FOLLOW_ALLOWANCE = 0.005  # above beta_c, runs are followed while the allowance exceeds this (a fifteenth of the target)
MAX_UNDECIDED = 0.02  # a fraction of runs claimed small (undecided, still merging) may be up to this


def switch_probabilities(distances: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per run, the tabulated switching probability at the smallest tabulated distance that is at least the run's
    distance (SWITCH_GRID decreases; runs closer than its last entry use that entry)."""
    # index of the smallest grid distance >= the run's distance
    index = np.searchsorted(-SWITCH_GRID, -np.maximum(distances, SWITCH_GRID[-1]), side="right") - 1
    return table[np.clip(index, 0, SWITCH_GRID.size - 1)]


def switch_bound(distances: np.ndarray, table: np.ndarray) -> float:
    """Sum over runs of ``switch_probabilities``."""
    return float(np.sum(switch_probabilities(distances, table))) if distances.size else 0.0


def pending_runs(rho: np.ndarray, dim: int, beta: float, threshold: float) -> np.ndarray:
    """Runs not yet decided at an end, or decided with a switching probability above ``threshold``: those worth
    following further (the mask over ``rho``). A run at or within the table's smallest distance (``SWITCH_GRID``)
    of an attracting end is not: following moves it closer still, and its bound, taken at that distance, cannot
    improve (the allowance keeps it)."""
    switch_from_antipodal, switch_from_collapse = switch_tables(dim, beta)
    pending = np.abs(rho) <= 1 - DELTA
    antipodal, collapsed = rho < -1 + DELTA, rho > 1 - DELTA
    pending[antipodal] = switch_probabilities(1 + rho[antipodal], switch_from_antipodal) > threshold
    pending[collapsed] = switch_probabilities(1 - rho[collapsed], switch_from_collapse) > threshold
    collapse_attracts, antipodal_attracts = attracting_ends(dim, beta)
    floor = SWITCH_GRID[-1]
    if antipodal_attracts:
        pending[antipodal & (1 + rho <= floor)] = False
    if collapse_attracts:
        pending[collapsed & (1 - rho <= floor)] = False
    return pending


@cache
def attracting_ends(dim: int, beta: float) -> tuple[bool, bool]:
    """(the collapse end attracts, the antipodal end attracts): their growth exponents (of 1 - rho near +1 and of
    1 + rho near -1, ``verify.boundary_exponents``, sigma = 1) are negative."""
    plus, minus = (float(v) for v in verify.boundary_exponents(dim, float(beta), 1))  # numbers, not exact forms
    return plus < 0, minus < 0


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
    switching = switch_bound(1 + rho[antipodal], switch_from_antipodal) + switch_bound(
        1 - rho[collapsed], switch_from_collapse
    )
    return int(antipodal.sum()), undecided, (undecided + switching) / rho.size


def run_until_decided(
    model: TwoTokenOverlapChain, rho0: float, T: float, step: float, paths: int, seed: int, key: tuple, block: int
) -> tuple[np.ndarray, int, str]:
    """Two-token runs from overlap ``rho0``, simulated in ``CHUNKS`` parts of the horizon T. After each part the runs
    decided at an end with a probability of at most ``SWITCH_THRESHOLD`` of still switching ends stop
    (``pending_runs``, from the scale function); the others go on from their states under fresh noise (the chain is
    Markov; part k draws from the stream key + (k,)), up to T and past it for up to ``FOLLOW_CHUNKS`` more
    horizons: below the certified beta_c until none is pending (the antipodal end repels, so every run near -1 is
    pending), above it while the allowance (``decided_ends``) exceeds ``FOLLOW_ALLOWANCE``. Stopping a decided run
    changes its indicator "ends antipodal" (a limit) with at most its switching probability, which the allowance
    counts. Each part has round(T / (CHUNKS step)) layers (the step is ``step`` to within that rounding). Returns
    the final overlaps, the layers per horizon, and a note (mean layers run per path, runs pending at T and after,
    the smallest 1 + rho a pending run reached, carried to full precision)."""
    dim, beta = model.model.dim, model.model.beta
    below = beta < float(verify.critical_beta(dim)[0])  # certified: no run may stay near -1
    part_depth = max(1, round(T / CHUNKS / step))
    states, rho = np.empty((paths, 2, 2)), np.full(paths, float(rho0))
    active, layers, closest, pending_at_T = np.arange(paths), 0, np.inf, 0
    for part in range(CHUNKS * (1 + FOLLOW_CHUNKS)):
        initial = fixed_overlap(rho0) if part == 0 else path_states(states[active])
        states[active] = simulate(model, part_depth, T / CHUNKS, active.size, seed, (*key, part), initial, block)
        layers += part_depth * active.size
        rho[active] = overlap(states[active])
        active = active[pending_runs(rho[active], dim, beta, SWITCH_THRESHOLD)]
        near = active[rho[active] < 0]
        if near.size:  # 1 + rho = |x_1 + x_2|^2 / 2, to full relative precision
            closest = min(closest, float(np.min(0.5 * np.sum((states[near, 0] + states[near, 1]) ** 2, axis=-1))))
        if part + 1 == CHUNKS:
            pending_at_T = active.size
        done = part + 1 >= CHUNKS and not (below or decided_ends(rho, dim, beta)[2] > FOLLOW_ALLOWANCE)
        if active.size == 0 or done:
            break
    horizons = (part + 1) / CHUNKS
    note = (
        f"; runs stopped once decided: on average {layers / paths:.0f} layers per run (T is {CHUNKS * part_depth}); "
        f"{pending_at_T} pending at T"
    )
    if horizons > 1:
        note += f", followed for {horizons - 1:g} more horizons: {active.size} still pending"
    if np.isfinite(closest):
        note += f" (smallest 1 + rho of a pending run {closest:.2g})"
    return rho, CHUNKS * part_depth, note


def probability_check(
    antipodal: int,
    paths: int,
    predicted: float,
    allowance: float,
    confidence: float,
    config: dict,
    note: str = "",
    target: float = PROBABILITY_TARGET,
) -> Check:
    """``p_antipodal``: the Wilson interval (at ``confidence``) of ``antipodal / paths`` against the predicted
    probability +- ``allowance``; ``inconclusive`` when the resolution exceeds ``target`` (in probability)."""
    return effect_check(
        "p_antipodal",
        predicted,
        antipodal / paths,
        wilson(antipodal, paths, confidence_z(confidence)),
        allowance,
        target,
        config,
        confidence=confidence,
        note=note,
    )


def merge_probability_check(
    name: str,
    final_overlaps: np.ndarray,
    predicted: float,
    delta: float,
    alpha: float,
    config: dict,
    note: str = "",
    target: float = MERGE_TARGET,
) -> Check:
    """The fraction of runs that end merged against ``predicted``. Of n runs, k end merged (rho_T > 1 - ``delta``)
    and u undecided (|rho_T| <= 1 - ``delta``): an undecided run may yet end either way, so the limit fraction lies
    between k / n and (k + u) / n. The estimate is the midpoint (k + u / 2) / n, the allowance half the undecided
    fraction, u / (2 n), and the interval runs from the Wilson lower bound of k to the Wilson upper bound of k + u
    (level 1 - ``alpha``) less the allowance on each side, so that interval +- allowance is exactly the range the
    two bounds leave; inconclusive when the resolution (``detectable_effect``, in probability) exceeds ``target``."""
    z = z_value(1, alpha)
    runs = final_overlaps.size
    merged = int(np.sum(final_overlaps > 1 - delta))
    undecided = int(np.sum(np.abs(final_overlaps) <= 1 - delta))
    half = 0.5 * undecided / runs
    low, high = wilson(merged, runs, z)[0], wilson(merged + undecided, runs, z)[1]
    return effect_check(
        name,
        predicted,
        merged / runs + half,
        (low + half, high - half),
        half,
        target,
        config,
        confidence=1 - alpha,
        false_failure_rate=alpha,
        scale=predicted,
        note=f"fraction with rho_T > 1 - {delta} {note}, undecided runs (|rho_T| <= 1 - {delta}) counted half; "
        f"allowance = half the undecided fraction {2 * half:.3g} (they may end either way); target {target:g} in "
        "probability",
    )


def expectation_check(
    name: str,
    values: np.ndarray,
    coarse_values: np.ndarray,
    expected: float,
    alpha: float,
    config: dict,
    note: str,
    target: float,
) -> Check:
    """The mean of per-path ``values`` against ``expected``: z standard errors (two-sided level 1 - ``alpha``) plus
    the O(h) bias allowance |mean - mean of ``coarse_values``| (the same quantity at a coarser depth); inconclusive
    when the resolution exceeds ``target`` (in the values' units)."""
    z = z_value(1, alpha)
    mean, se = float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))
    allowance = abs(float(values.mean() - coarse_values.mean()))
    return effect_check(
        name,
        expected,
        mean,
        (mean - z * se, mean + z * se),
        allowance,
        target,
        config,
        confidence=1 - alpha,
        false_failure_rate=alpha,
        scale=expected,
        note=note,
    )


def antipodal_share_check(
    name: str,
    shares: np.ndarray,
    threshold: float,
    aligned: float,
    above: bool,
    config: dict,
    alpha: float,
    target: float = SHARE_TARGET,
) -> Check:
    """A claim about the typical final state of many tokens: the mean over paths of the share of antipodal pairs
    (cos < -``aligned``, ``shares`` one per path) lies above ``threshold`` (``above``: an antipodal formation) or below
    it (pairs synchronise; a transient antipodal group on one path is not a failure). Student t interval at level
    1 - ``alpha``; inconclusive when the interval holds the threshold or the resolution (the distance from the
    threshold at which the other side is rejected with 90%) exceeds ``target``."""
    paths = shares.size
    share, spread = float(shares.mean()), float(shares.std(ddof=1)) / np.sqrt(paths)
    t = float(stats.t.isf(alpha / 2, paths - 1))
    lo, hi = share - t * spread, share + t * spread
    if above:
        verdict = PASS if lo > threshold else (FAIL if hi < threshold else INCONCLUSIVE)
    else:
        verdict = PASS if hi < threshold else (FAIL if lo > threshold else INCONCLUSIVE)
    claim = f"{'above' if above else 'below'} {threshold:g}"
    return Check(
        name,
        threshold,
        share,
        (lo, hi),
        verdict,
        config,
        0.0,
        1 - alpha,
        alpha,
        note=f"mean over {paths} paths of the share of pairs at cos < -{aligned}, claimed {claim}; Student t "
        f"interval ({paths - 1} df); per-path shares {', '.join(f'{v:.3f}' for v in shares)}",
        resolution=float((t + stats.norm.ppf(DETECTION_POWER)) * spread),
        target=target,
    )
