"""The weak checks of one map: ``check_weak_order`` (coupled differences E f(X^L) - E f(X^{2L}) decay like h^order)
and ``check_weak_limit`` (the layer's law tends to the claimed SDE's, at that rate; Euler-Maruyama of the claim on the
layer's Brownian path, ``convergence._experiments.weak``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from verify._common import check_int, check_real

from .._experiments import (
    DriftScaled,
    WeakDesign,
    blind,
    bootstrap_generator,
    claim_limit_check,
    coupled_layer_and_claims,
    coupled_observables,
    deeper_depths,
    order_check,
    rejection_row,
    weak_order,
)
from .._models import (
    LayerMap,
)
from .._output import Panel
from .._paths import InitialState, uniform_sphere
from .._statistics import (
    DEEPER,
    FAIL,
    INCONCLUSIVE,
    Check,
    all_finite,
    differences_settled_away,
    first_nonfinite,
    z_value,
)
from .arguments import check_protocol, check_title, claim_config, name_of
from .claims import ClaimedSDE, Observable, UserLayerMap, checked_observable
from .outcome import Outcome, nonfinite_checks, timed
from .staged import USER_KEY, Staging, probe_streams

WEAK_BLOCK = 4096  # paths per compute block of the weak checks (a look is a whole number of blocks)


@timed
def check_weak_order(
    layer: UserLayerMap,
    observable: Observable,
    *,
    order: float = 1.0,
    depths: tuple[int, ...] = (4, 8, 16, 32, 64),
    horizon: float = 1.0,
    budget: int = 65_536,
    first: int = WEAK_BLOCK,
    paths: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "weak order",
) -> Outcome:
    """Coupled differences E f(X^L) - E f(X^{2L}) decay like h^order (pooled slope over significant levels). Looks at
    ``first``, 2 ``first``, ... paths up to ``budget``; ``paths``: one look at this fixed size instead."""
    check_protocol("layer", layer, LayerMap)
    order = check_real("order", order, minimum=0.0, strict_minimum=True)
    title = check_title(title)
    checked = checked_observable(observable, layer)
    staging = Staging.plan(paths, first, budget, WEAK_BLOCK)
    drawn, key, config = staging.drawn, (USER_KEY, 2), {"map": name_of(layer)}
    panels: list[Panel] = []

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=tuple(depths), horizon=horizon, paths=n, block_paths=staging.compute_block, order=order
        )
        values = drawn.extend(
            coupled_observables(layer, design, {"f": checked}, seed, key, initial, start=drawn.size), n
        )
        bad = first_nonfinite({f"f of {name_of(layer)}": values["f"]}, [f"L={L}" for L in design.depths])
        if bad:
            panels.clear()
            return nonfinite_checks(["weak_order"], bad, config)
        z = z_value(1, alpha)
        fits = weak_order(values, design.steps(), bootstrap_generator(seed, key), design.replicates, z)
        panels[:] = [Panel(title, "step h", "|coupled difference|", [fits["f"].series("|E f(L) - E f(2L)|", z)], order)]
        rate = _asymptotic_rate(order_check(fits, design, z, config, power), values["f"], design)
        return [_identifiable_rate(rate, fits["f"], z)]

    checks, stopped = staging.decide(look)
    return Outcome(title, checks, panels, staging.params(depths=list(depths), horizon=horizon, paths=stopped), seed)


@timed
def check_weak_limit(
    layer: UserLayerMap,
    sde: ClaimedSDE,
    observable: Observable,
    *,
    order: float = 1.0,
    depths: tuple[int, ...] = (4, 8, 16, 32, 64),
    horizon: float = 1.0,
    resolution: float = 0.05,
    budget: int = 65_536,
    first: int = WEAK_BLOCK,
    paths: int | None = None,
    reference_factor: int = 4,
    near_misses: tuple[float, ...] = (0.05, 0.2),
    max_depth: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "weak limit",
) -> Outcome:
    """Does the law of ``layer`` converge to the law of the claimed ``sde``, and at which rate?

    On one Brownian path: the layer at every depth of the ladder (``weak_order``: coupled differences decay like
    h^order) and the claim integrated by Euler-Maruyama, another scheme, at h_ref = h_finest / ``reference_factor``
    and 2 h_ref (``claim_limit``: E f(layer) - E f(claim) within its interval plus both discretisation biases;
    ``convergence._experiments.weak``). Laws, not paths, are compared: a claim equal in law but driven differently
    passes (the strong check tells them apart). ``resolution``: claim_limit's target, in standard deviations of f.
    Where the order is undecided and every coupled difference lies below that target, the rate is not identifiable on
    this ladder: it is reported as a finding and claim_limit decides. ``near_misses``: for each eps, the claim with
    its drift x (1 + eps) is judged on the same paths; each row says whether the check rejects it (a finding beside
    the verdict: the smallest drift error this run can see). Looks at ``first``, 2 ``first``, ... paths up to
    ``budget`` (``convergence._statistics.sequential``); ``paths``: one look at this fixed size instead. Needs
    Gaussian noise (the claim shares the layer's Brownian path).

    Where the ladder is too coarse to decide (the weak order pre-asymptotic, or claim_limit's bias allowance, the
    finest coupled difference and the Euler reference's, above its target), the check **deepens itself** as
    ``check_strong_order`` does: the deepest depth doubled up to ``max_depth`` (default 4 x the deepest given; the
    deepest given turns it off), on as many paths as do the work of the last look, each deeper ladder one more look
    of the sequential design.
    """
    config = claim_config("check_weak_limit", layer, sde)
    order, reference_factor, resolution, near_misses = _weak_limit_options(
        layer, order, reference_factor, resolution, near_misses
    )
    title = check_title(title)
    checked = checked_observable(observable, layer)
    depths = tuple(depths)
    staging = Staging.plan(paths, first, budget, WEAK_BLOCK, depths=depths, max_depth=max_depth)
    drawn, key = staging.drawn, (USER_KEY, 5)
    claims = [sde, *(DriftScaled(sde, 1.0 + eps) for eps in near_misses)]
    panels: list[Panel] = []
    # a drift-free claim's near misses are the claim itself: claim_limit still compares laws, it is not blind
    drift_free = not np.any(sde.drift(np.asarray(initial(probe_streams(seed, key), layer.tokens, layer.dim))))

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=drawn.depths,
            horizon=horizon,
            paths=n,
            block_paths=staging.compute_block,
            order=order,
        )
        layer_values, claim_values = drawn.extend(
            coupled_layer_and_claims(
                layer, claims, design, {"f": checked}, seed, key, initial, reference_factor, start=drawn.size
            ),
            n,
        )
        bad = first_nonfinite(
            {
                f"f of {name_of(layer)}": layer_values["f"],
                "f of the claims (Euler at 2 h_ref, h_ref)": claim_values["f"].reshape(n, -1),
            },
            [f"L={L}" for L in design.depths],
        )
        if bad:
            panels.clear()
            return nonfinite_checks(["weak_order", "claim_limit"], bad, config)
        z = z_value(2, alpha)  # the two claims (order and limit) share the family-wise rate
        fits = weak_order(layer_values, design.steps(), bootstrap_generator(seed, key), design.replicates, z)
        judged = _Judged(layer_values["f"], claim_values["f"], design, z, resolution, power, config)
        checks = judged.checks(order_check(fits, design, z, config, power), fits["f"], near_misses, drift_free)
        panels[:] = [Panel(title, "step h", "|coupled difference|", [fits["f"].series("|E f(L) - E f(2L)|", z)], order)]
        return checks

    checks, stopped = staging.decide(look)
    params = staging.params(
        depths=list(drawn.depths),
        depths_asked=list(depths),
        horizon=horizon,
        paths=stopped,
        reference_factor=reference_factor,
        near_misses=list(near_misses),
        resolution=resolution,
    )
    return Outcome(title, checks, panels, params, seed)


def _asymptotic_rate(rate: Check, values: np.ndarray, design: WeakDesign) -> Check:
    """A weak order below its band fails only on evidence from the asymptotic regime
    (``statistics.differences_settled_away``: the finest local order of the coupled differences below the band by its
    interval and not rising towards it); a ladder whose local orders still rise towards the rate is inconclusive and
    names a deeper one. ``values``: f per path and depth (paths, levels)."""
    if rate.verdict != FAIL or not all_finite(*rate.ci):
        return rate
    floor = design.order - design.order_allowance
    evidence = differences_settled_away(values, floor, confidence=rate.confidence)
    if evidence is not None:
        return replace(rate, note=rate.note + f"; asymptotic evidence: {evidence}")
    deeper = deeper_depths(design.depths)
    return replace(
        rate,
        verdict=INCONCLUSIVE,
        note=rate.note + "; the coupled differences are not shown to decay below the claimed rate at the finest "
        f"levels without turning back towards it (pre-asymptotic), so the order cannot carry a fail; {DEEPER}: depths "
        f"{deeper}",
    )


@dataclass(frozen=True)
class _Judged:
    """One look of ``check_weak_limit``: f of the layer per path and depth (paths, levels) and f of the claims per
    path, claim and reference step (paths, claims, 2: claim 0 the claim, then its near misses; Euler at 2 h_ref and
    h_ref), judged at the look's z and power."""

    layer: np.ndarray
    claims: np.ndarray
    design: WeakDesign
    z: float
    resolution: float
    power: float
    config: dict

    def limit(self, column: int) -> Check:
        """claim_limit for the claim (``column`` 0) or a near miss: its law against the layer's."""
        floor = self.design.order - self.design.order_allowance
        return claim_limit_check(
            self.layer,
            self.claims[:, column],
            self.z,
            self.resolution,
            self.config,
            power=self.power,
            bias_span=2.0,
            order_floor=floor,
        )

    def checks(self, order: Check, fit, near_misses: tuple[float, ...], drift_free: bool) -> list[Check]:
        """weak_order (``order``, from the fit ``fit``), claim_limit and a row per near miss."""
        limit = self.limit(0)
        # near misses whose Euler values equal the claim's on every path (the observable does not see them)
        unseen = [np.array_equal(self.claims[:, k], self.claims[:, 0]) for k in range(1, 1 + len(near_misses))]
        if unseen and all(unseen) and not drift_free and np.isfinite(limit.resolution):
            limit = blind(
                limit, "every drift near miss gives f the claim's values on every path: f does not see the drift"
            )
        target = self.resolution * float(self.layer[:, -1].std(ddof=1))
        rate = _identifiable_rate(_asymptotic_rate(order, self.layer, self.design), fit, self.z, target)
        checks = [rate, _limit_needs_rate(limit, rate, self.design)]
        for index, (eps, same) in enumerate(zip(near_misses, unseen), start=1):
            # a rejection needs the proven bias bound a fail needs; a near miss equal to the claim is not asked
            inner = None if same else _limit_needs_rate(self.limit(index), rate, self.design)
            checks.append(_near_miss_row(self.config["map"], eps, inner))
        return checks


def _weak_limit_options(
    layer: UserLayerMap, order: float, reference_factor: int, resolution: float, near_misses: tuple[float, ...]
) -> tuple[float, int, float, tuple[float, ...]]:
    """``check_weak_limit``'s numbers, checked: a Brownian noise (the claim runs on the layer's increments), a positive
    order and resolution, an even reference factor of at least 2 (the Euler reference runs at h_ref and 2 h_ref) and
    near misses above -1."""
    if not layer.noise.brownian:
        raise ValueError(
            f"check_weak_limit needs Gaussian (Brownian) noise to drive the claim with the layer's own "
            f"increments, got law {layer.noise.law!r}; compare laws with check_same_weak_limit"
        )
    reference_factor = check_int("reference_factor", reference_factor, minimum=2)
    if reference_factor % 2:
        raise ValueError(
            f"reference_factor must be even (the Euler reference runs at h_ref and 2 h_ref), got {reference_factor}"
        )
    return (
        check_real("order", order, minimum=0.0, strict_minimum=True),
        reference_factor,
        check_real("resolution", resolution, minimum=0.0, strict_minimum=True),
        tuple(check_real("near_misses", eps, minimum=-1.0, strict_minimum=True) for eps in near_misses),
    )


def _near_miss_row(model: str, eps: float, judged: Check | None) -> Check:
    """Whether the check rejects the claim with its drift x (1 + ``eps``), judged as the claim is (``judged``); None
    when its Euler values equal the claim's on every path: it is then the claim itself (e.g. the near misses of a
    drift-free claim), and the row says so."""
    label = f"drift x (1 + {eps:g})"
    if judged is not None:
        return rejection_row("weak", model, label, eps, [judged], float("inf"))
    return Check(
        "rejects",
        1.0,
        0.0,
        (0.0, 1.0),
        INCONCLUSIVE,
        {"check": "weak", "model": model, "mutant": label},
        claim=False,
        false_failure_rate=0.0,
        note="skipped: on every path its Euler values equal the claim's, so this near miss is the claim itself",
    )


def _limit_needs_rate(limit: Check, rate: Check, design: WeakDesign) -> Check:
    """claim_limit's allowance bounds the layer's remaining bias by t(p) |Delta_last| for a weak order p of at least
    the order floor (0.85): its fail stands only where that order is not in doubt, i.e. weak_order passes, fails, or is
    a finding (every coupled difference below the target). Where weak_order is undecided (a pre-asymptotic or
    under-sampled ladder: the registry's hybrid model at depths 4, 8, 16, whose weak order at these depths is about
    0.1), the bound is unproven and the difference cannot carry a fail."""
    if limit.verdict != FAIL or not rate.claim or rate.verdict != INCONCLUSIVE or not all_finite(*limit.ci):
        return limit
    floor = design.order - design.order_allowance
    return replace(
        limit,
        verdict=INCONCLUSIVE,
        note=f"{limit.note}; the allowance bounds the layer's bias for a weak order of at least {floor:g}, which "
        f"weak_order does not show on this ladder, so the difference cannot carry a fail; {DEEPER}: depths "
        f"{deeper_depths(design.depths)}",
    )


def _identifiable_rate(rate: Check, fit, z: float, target: float | None = None) -> Check:
    """A weak order claim is a finding, not a claim, when the rate cannot be identified on the ladder at the check's
    target: every coupled difference within rounding (an exact step), or an undecided order whose every coupled
    difference lies, by its upper bound, below claim_limit's target (the whole depth dependence is smaller than the
    effect the limit is judged at; claim_limit, which allows the last difference as a bias, decides). Without a
    ``target`` (the weak order alone) only the first applies."""
    if fit.at_roundoff.all():
        return replace(rate, claim=False)
    if target is None:
        return rate
    upper = np.abs(fit.differences) + z * fit.standard_errors
    if rate.verdict == INCONCLUSIVE and np.all(upper <= target):
        return replace(
            rate,
            claim=False,
            note=rate.note + f"; order not identifiable at this target: every coupled "
            f"difference is below claim_limit's target {target:.3g} (largest upper bound "
            f"{upper.max():.3g}): a finding, claim_limit decides",
        )
    return rate
