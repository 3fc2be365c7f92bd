"""``check_same_weak_limit``: two layer maps with the same noise law, driven by the same noise, have the same weak
limit of an observable f (the Richardson-extrapolated difference of their means is 0)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from verify._common import check_int, check_real

from .._experiments import (
    WeakDesign,
    coupled_observables,
)
from .._models import (
    LayerMap,
)
from .._paths import InitialState, uniform_sphere
from .._statistics import (
    INCONCLUSIVE,
    Check,
    effect_check,
    first_nonfinite,
    samples_to_decide,
    z_confidence,
    z_value,
)
from .arguments import check_pair, check_protocol, check_title, name_of
from .claims import Observable, UserLayerMap, checked_observable
from .outcome import Outcome, nonfinite_checks, timed
from .staged import USER_KEY, Staging
from .weak import WEAK_BLOCK


@timed
def check_same_weak_limit(
    first: UserLayerMap,
    second: UserLayerMap,
    observable: Observable,
    *,
    depth: int = 32,
    horizon: float = 1.0,
    resolution: float = 0.02,
    budget: int = 65_536,
    first_look: int = WEAK_BLOCK,
    paths: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "same weak limit",
) -> Outcome:
    """Richardson-extrapolated E f(first) - E f(second) at depths L/2 and L, driven by the same noise, is 0.

    The target is ``resolution`` times the observable's standard deviation: ``fail`` when the interval excludes 0
    or any value is not finite; ``inconclusive`` while the resolution (the difference rejected with probability 90%, or
    1 - 0.1/K at one of K staged looks)
    exceeds the target. Looks at ``first_look``, 2 ``first_look``, ... paths up to ``budget``; ``paths``: one look at
    this fixed size instead.
    """
    check_protocol("first", first, LayerMap)
    check_protocol("second", second, LayerMap)
    check_pair(first, second, "check_same_weak_limit")
    depth = check_int("depth", depth, minimum=4)
    if depth % 4:
        raise ValueError(f"depth must be a multiple of 4 (the ladder is depth/4, depth/2, depth), got {depth}")
    resolution = check_real("resolution", resolution, minimum=0.0, strict_minimum=True)
    title = check_title(title)
    checked = checked_observable(observable, first)
    staging = Staging.plan(paths, first_look, budget, WEAK_BLOCK, names=("paths", "first_look", "budget"))
    drawn, key = staging.drawn, (USER_KEY, 3)
    config = {"first": name_of(first), "second": name_of(second), "depth": depth}

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=(depth // 4, depth // 2, depth),
            horizon=horizon,
            paths=n,
            block_paths=staging.compute_block,
        )
        used = design.depths[1:]  # the ladder's finest two levels (same Brownian path as the whole ladder)
        a, b = drawn.extend(
            tuple(
                coupled_observables(m, design, {"f": checked}, seed, key, initial, used, start=drawn.size)["f"]
                for m in (first, second)
            ),
            n,
        )
        bad = first_nonfinite({f"f of {name_of(first)}": a, f"f of {name_of(second)}": b}, [f"L={L}" for L in used])
        if bad:
            return nonfinite_checks(["same_weak_limit"], bad, config)
        return [_same_limit_check(a, b, z_value(1, alpha), resolution, power, config)]

    checks, stopped = staging.decide(look)
    return Outcome(title, checks, [], staging.params(depth=depth, horizon=horizon, paths=stopped), seed)


def _same_limit_check(a: np.ndarray, b: np.ndarray, z: float, resolution: float, power: float, config: dict) -> Check:
    """same_weak_limit from f of the two maps at depths L/2 and L on the same noise (each (paths, 2)): the
    Richardson-extrapolated difference 2 D(L) - D(L/2) of their means is 0, its target ``resolution`` sd(f)."""
    n = a.shape[0]
    extrapolated = 2 * (a[:, -1] - b[:, -1]) - (a[:, -2] - b[:, -2])
    mean, se = float(extrapolated.mean()), float(extrapolated.std(ddof=1) / np.sqrt(n))
    ci = (mean - z * se, mean + z * se)
    target = resolution * float(np.std(a[:, -1], ddof=1))
    check = effect_check(
        "same_weak_limit",
        0.0,
        mean,
        ci,
        0.0,
        target,
        config,
        confidence=z_confidence(z),
        power=power,
        note=(
            f"2 D(L) - D(L/2), D = E f(first) - E f(second) on the same noise; "
            f"target {resolution:g} x sd(f) = {target:.3g}"
        ),
    )
    if check.verdict == INCONCLUSIVE and target > 0:
        check = replace(
            check,
            note=f"{check.note}; resolution {check.resolution:.3g} > target: about "
            f"{samples_to_decide(ci, 0.0, z_confidence(z), n, target, power)} paths "
            "would decide",
        )
    return check
