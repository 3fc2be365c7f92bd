"""The weak order from coupled depth differences (the ``weak_order`` check of ``convergence._experiments.weak``).

Delta_l = E[f(X^{L_l}) - f(X^{2 L_l})] on one Brownian path per sample; its standard error from batch means over
paths; the order p is the least-squares slope of log|Delta_l| against log h_l over the levels whose Delta_l is
significantly non-zero, pooled over observables (one slope, one intercept each); a bootstrap over batches gives its
standard error. Differences within rounding of the observable's size carry no order (an exact step)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._output import Series
from .._statistics import (
    DETECTION_POWER,
    FAIL,
    INCONCLUSIVE,
    NO_TARGET,
    PASS,
    Check,
    all_finite,
    bootstrap_counts,
    detectable_effect,
    first_nonfinite,
    paths_to_resolve,
    samples_to_decide,
    z_confidence,
)
from .weak import ROUNDOFF, WeakDesign

BATCHES = 400


def batch_means(values: np.ndarray, batches: int) -> np.ndarray:
    """Means of ``batches`` contiguous, equal groups of rows (the remainder rows are dropped)."""
    size = values.shape[0] // batches
    if size < 1:
        return values
    return values[: size * batches].reshape(batches, size, *values.shape[1:]).mean(axis=1)


@dataclass(frozen=True)
class WeakOrderFit:
    steps: np.ndarray
    differences: np.ndarray
    standard_errors: np.ndarray
    significant: np.ndarray
    order: float
    order_se: float
    at_roundoff: np.ndarray  # differences within rounding of the observable's size: no depth dependence to fit

    def series(self, label: str, z: float) -> Series:
        """The curve |E f_l - E f_{l+1}| with z-SE intervals (clipped at 0) and the pooled fitted line; levels
        at the noise floor are flagged. No line (order 0) when no order was fitted."""
        values = np.abs(self.differences)
        order = self.order if np.isfinite(self.order) else 0.0
        return Series(
            label=label,
            steps=self.steps.tolist(),
            values=values.tolist(),
            ci_lo=np.maximum(values - z * self.standard_errors, 0).tolist(),
            ci_hi=(values + z * self.standard_errors).tolist(),
            order=order,
            intercept=float(np.mean(np.log(values + 1e-300)) - order * np.mean(np.log(self.steps))),
            flags=[[] if s else ["noise floor"] for s in self.significant],
        )


def _pooled_slope(log_h: np.ndarray, log_d: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Least-squares slope common to several observables (each with its own intercept) over the masked
    levels; ``log_d`` is (..., observables, levels), ``masks`` (observables, levels)."""
    num = np.zeros(log_d.shape[:-2])
    den = 0.0
    for k, mask in enumerate(masks):
        if mask.sum() < 2:
            continue
        x = log_h[mask] - log_h[mask].mean()
        y = log_d[..., k, :][..., mask]
        num = num + (y - y.mean(axis=-1, keepdims=True)) @ x
        den += x @ x
    return num / den if den > 0 else np.full(log_d.shape[:-2], np.nan)


def weak_order(
    values: dict[str, np.ndarray], steps: np.ndarray, rng: np.random.Generator, replicates: int, z: float
) -> dict[str, WeakOrderFit]:
    """Fit |E f_l - E f_{l+1}| ~ C_f h_l^p with one order p common to all observables f (each with its
    own constant), over the differences significantly non-zero at level z; bootstrap SE of p over batch
    means of paths. Returns one fit per observable (sharing ``order`` and ``order_se``)."""
    names = list(values)
    diffs = np.stack([values[n][:, :-1] - values[n][:, 1:] for n in names], axis=1)  # (paths, obs, levels)
    mean = diffs.mean(axis=0)
    se = diffs.std(axis=0, ddof=1) / np.sqrt(diffs.shape[0])
    scale = np.array([np.abs(values[n]).mean() for n in names])[:, None]
    at_roundoff = np.abs(mean) <= ROUNDOFF * scale
    significant = (np.abs(mean) > z * se) & ~at_roundoff
    h = steps[:-1]
    log_h = np.log(h)
    order = float(_pooled_slope(log_h, np.log(np.abs(mean) + 1e-300)[None], significant)[0])
    # Bootstrap over batch means of contiguous groups of paths (paths are i.i.d., so batches are too):
    # the same law for the means at a fraction of the memory of resampling every path.
    batches = batch_means(diffs, BATCHES)
    counts = bootstrap_counts(rng, batches.shape[0], replicates)
    boot = np.einsum("bp,pol->bol", counts, batches, optimize=True) / batches.shape[0]
    boot_order = _pooled_slope(log_h, np.log(np.abs(boot) + 1e-300), significant)
    order_se = float(np.std(boot_order, ddof=1)) if np.isfinite(order) else float("nan")
    return {
        n: WeakOrderFit(h, mean[k], se[k], significant[k], order, order_se, at_roundoff[k]) for k, n in enumerate(names)
    }


def order_check(
    fits: dict[str, WeakOrderFit], design: WeakDesign, z: float, config: dict, power: float = DETECTION_POWER
) -> Check:
    """``weak_order``: the claim is an error O(h) (one-sided), so the check fails when the interval lies below
    ``order - allowance`` and passes when it lies above it (an interval above ``order + allowance`` gets a note:
    this observable's leading error coefficient is small: decided by the interval, target ``NO_TARGET``); an
    interval across the floor passes only when its resolution (at ``power``, a staged look's) is at most
    ``design.order_target``, else inconclusive (as when fewer than three differences are significant)."""
    fit = next(iter(fits.values()))  # the order is common to all observables
    lo, hi = fit.order - z * fit.order_se, fit.order + z * fit.order_se
    usable = sum(int(f.significant.sum()) for f in fits.values())
    total = sum(f.significant.size for f in fits.values())
    note = f"{usable} of {total} coupled differences significant (order pooled over {len(fits)} observables)"
    floor = design.order - design.order_allowance
    confidence = z_confidence(z)
    resolution = detectable_effect((lo, hi), design.order_allowance, confidence, power)
    target = design.order_target
    bad = _nonfinite_fits(fits)
    if bad:  # a NaN difference is not merely "not significant"
        verdict = FAIL
        note += f"; {bad}"
    elif all(f.at_roundoff.all() for f in fits.values()):
        verdict = INCONCLUSIVE
        note += (
            f"; order not identifiable: every coupled difference is within rounding ({ROUNDOFF:g} of the "
            "observable's size), so the law does not change with depth on this ladder (an exact step?): a limit "
            "against a claim decides (check_weak_limit)"
        )
    elif usable < 3:
        verdict = INCONCLUSIVE
    elif not all_finite(fit.order, fit.order_se):
        verdict = FAIL
        note += f"; the fitted order ({fit.order}) or its bootstrap SE ({fit.order_se}) is not finite"
    elif hi < floor:
        verdict = FAIL
    elif lo > floor:  # the one-sided claim holds at this level, however wide the interval
        verdict, target = PASS, NO_TARGET
        note += f"; the interval lies above the floor {floor:g}: decided by its interval, no target needed"
        if lo > design.order + design.order_allowance:
            note += "; decays faster than order 1 (small leading coefficient: the O(h) bound holds)"
    elif resolution > design.order_target:
        verdict = INCONCLUSIVE
        advice = samples_to_decide(
            (lo, hi), design.order_allowance, confidence, design.paths, design.order_target, power
        )
        note += f"; resolution {resolution:.3g} > target {design.order_target:g}: about {advice} paths would decide"
    else:
        verdict = PASS
    if verdict == INCONCLUSIVE and usable < 3 and "not identifiable" not in note:
        note += _significance_plan(fits, z, design.paths)
    return Check(
        "weak_order",
        design.order,
        fit.order,
        (lo, hi),
        verdict,
        config,
        design.order_allowance,
        confidence,
        note=note,
        resolution=resolution,
        target=target,
    )


def _nonfinite_fits(fits: dict[str, WeakOrderFit]) -> str | None:
    """Where a coupled difference or its standard error is not finite, or None."""
    return first_nonfinite(
        {
            f"{kind} of {name}": getattr(f, field)
            for name, f in fits.items()
            for kind, field in (("coupled differences", "differences"), ("standard errors", "standard_errors"))
        }
    )


def _significance_plan(fits: dict[str, WeakOrderFit], z: float, paths: int) -> str:
    """How many paths would make the three coarsest coupled differences of the best observable significant, if
    their measured sizes hold (se ~ paths^-1/2)."""
    needed = []
    for fit in fits.values():
        sizes, errors = np.abs(fit.differences[:3]), fit.standard_errors[:3]
        if sizes.size == 3 and np.all(sizes > 0):
            needed.append(max(paths_to_resolve(2 * z * e, 2 * d, paths) for d, e in zip(sizes, errors)))
    if not needed:
        return ""
    return (
        f"; about {min(needed)} paths would make three differences significant at their measured sizes (or use "
        "coarser depths, where the O(h) differences are larger)"
    )
