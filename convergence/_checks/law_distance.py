"""``check_law``: the law of a scalar statistic of a finite system at time T against the claimed limit's, along a
ladder of three levels (``convergence._experiments.law_distance``): a width-indexed block at widths n, 2n, 4n run for
T n layers against its covariance SDE, or a layer map at depths L, 2L, 4L against its limit SDE; the claim's law from
its Euler scheme, another scheme than the system's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from verify._common import check_int, check_real

from .._experiments import ROUNDING_OPERATIONS, LawLadder, law_checks
from .._models import CovarianceSDE, LayerMap, LimitSDE, WidthBlock
from .._paths import (
    EulerMaruyama,
    InitialState,
    Statistic,
    correlation,
    covariance_euler,
    simulate,
    uniform_sphere,
    width_run,
)
from .._statistics import DETECTION_POWER, FAMILY_ALPHA
from .arguments import check_pair, check_protocol, check_title, name_of
from .claims import checked_observable
from .covariance_local import resolve_covariance_states
from .outcome import Outcome, timed
from .staged import USER_KEY


def doubling(levels, what: str) -> tuple[int, ...]:
    """Three positive integers, each twice the last."""
    levels = tuple(check_int(f"{what} entry", level, minimum=1) for level in levels)
    if len(levels) != 3 or any(b != 2 * a for a, b in zip(levels, levels[1:])):
        raise ValueError(
            f"{what}: expected three levels, each twice the last (the extrapolation uses the two finest, its "
            f"remainder bound all three), got {levels}"
        )
    return levels


def width_ladder(block, claim, statistic, widths, horizon, initial, samples, reference, factor, seed) -> LawLadder:
    """The block at each width for T n layers, and the claim's Euler scheme at ``factor`` T n_max steps and half."""
    if not isinstance(claim, CovarianceSDE):
        raise TypeError(f"sde: a width block is checked against a covariance_sde claim, got {type(claim).__name__}")
    if claim.inputs != block.inputs:
        raise ValueError(f"sde: the claim has inputs = {claim.inputs}, the block {block.inputs}")
    if not float(horizon * widths[0]).is_integer():
        raise ValueError(
            f"horizon: T n must be a whole number of layers at every width, got T = {horizon} at n = {widths[0]}"
        )
    ((name, state),) = resolve_covariance_states(
        [initial] if isinstance(initial, str) else {"initial": initial}, block.inputs
    ).items()
    key = (USER_KEY, 6)
    values, precision = [], float(np.finfo(np.float64).eps)
    for width in widths:
        v, eps = width_run(block, state, width, round(horizon * width), samples, statistic, seed, key)
        values.append(v)
        precision = max(precision, eps)
    steps = factor * round(horizon * widths[-1])
    fine = covariance_euler(claim, state, horizon, steps, reference, statistic, seed, (*key, 0, steps))
    coarse = covariance_euler(claim, state, horizon, steps // 2, reference, statistic, seed, (*key, 0, steps // 2))
    rounding = ROUNDING_OPERATIONS * precision * round(horizon * widths[-1]) * float(np.max(np.abs(values[-1])))
    return LawLadder("width n", widths, tuple(values), fine, coarse, steps, rounding)


def depth_ladder(layer, claim, statistic, depths, horizon, initial, samples, reference, factor, seed) -> LawLadder:
    """The layer map at each depth to time T, and the claim's Euler scheme at ``factor`` L_max steps and half."""
    check_protocol("layer", layer, LayerMap)
    check_protocol("sde", claim, LimitSDE)
    check_pair(layer, claim, "check_law", same_entry_law=False)
    observable = checked_observable(statistic, layer)
    key = (USER_KEY, 7)
    values = [observable(simulate(layer, d, horizon, samples, seed, (*key, d), initial)) for d in depths]
    euler = EulerMaruyama(claim)
    steps = factor * depths[-1]
    fine = observable(simulate(euler, steps, horizon, reference, seed, (*key, 0, steps), initial))
    coarse = observable(simulate(euler, steps // 2, horizon, reference, seed, (*key, 0, steps // 2), initial))
    eps = float(np.finfo(np.float64).eps) + float(getattr(layer, "lowest_precision_eps", 0.0))
    rounding = ROUNDING_OPERATIONS * eps * depths[-1] * float(np.max(np.abs(values[-1])))
    return LawLadder("depth L", depths, tuple(values), fine, coarse, steps, rounding)


@timed
def check_law(
    system,
    sde,
    statistic: Statistic | None = None,
    *,
    levels: tuple[int, int, int] = (8, 16, 32),
    horizon: float = 1.0,
    initial: InitialState | str | np.ndarray | None = None,
    rate: float | None = None,
    target: float = 0.15,
    support: tuple[float, float] | None = None,
    samples: int = 65_536,
    reference_samples: int | None = None,
    reference_factor: int = 8,
    seed: int = 0,
    title: str = "law at T",
    family_alpha: float = FAMILY_ALPHA,
) -> Outcome:
    """Is the law of ``statistic`` at time T the claimed limit's, to a Kolmogorov distance ``target``?

    ``system``: a width-indexed block (``WidthBlock``: ``levels`` are widths n, each run for T n layers from Z with
    Z Z^T / n = ``initial``, a named covariance state or an SPD array, default "correlated"; ``sde`` a
    ``covariance_sde``; ``statistic`` a function of V (samples, m, m) -> (samples,), default the correlation of the
    first two inputs, with support [-1, 1]) or a layer map (``levels`` are depths L to time T from ``initial``, an
    initial-state function, default uniform on the sphere; ``sde`` its claimed limit; ``statistic`` required, a
    function of the tokens (paths, tokens, d) -> (paths,)). ``rate``: the order in 1/level at which the law is claimed
    to converge (default the block's ``rate``; 1 for a layer map, the weak order). ``support`` [a, b]: the statistic's
    range, which a Wasserstein-1 decision needs (its target ``target`` (b - a)). ``samples`` at each level, and
    ``reference_samples`` (default 4 ``samples``) for each of the claim's Euler runs at ``reference_factor`` times
    the finest level's steps and half as many. ``family_alpha``: the family-wise false-failure rate (1%); the checks'
    rules are in the module docstring of ``convergence._experiments.law_distance``.
    """
    samples = check_int("samples", samples, minimum=16)
    reference = check_int(
        "reference_samples", 4 * samples if reference_samples is None else reference_samples, minimum=16
    )
    factor = check_int("reference_factor", reference_factor, minimum=2)
    horizon = check_real("horizon", horizon, minimum=0.0, strict_minimum=True)
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    if support is not None:
        support = (check_real("support[0]", support[0]), check_real("support[1]", support[1]))
        if support[1] <= support[0]:
            raise ValueError(f"support: expected (a, b) with a < b, got {support}")
    if rate is not None:
        rate = check_real("rate", rate, minimum=0.0, strict_minimum=True)
    if isinstance(system, WidthBlock):
        levels = doubling(levels, "levels (widths)")
        if statistic is None and system.inputs < 2:
            raise ValueError(
                f"statistic: the default, the correlation of two inputs, needs inputs >= 2, got "
                f"{system.inputs}; give a statistic of V"
            )
        if statistic is None:
            statistic, support = correlation, (-1.0, 1.0) if support is None else support
        chosen = "correlated" if initial is None else initial
        args = (statistic, levels, horizon, chosen, samples, reference, factor, seed)
        ladder = width_ladder(system, sde, *args)
        rate = system.rate if rate is None else rate
    else:
        levels = doubling(levels, "levels (depths)")
        if statistic is None:
            raise TypeError("statistic: a layer map's law check needs a statistic f(x) -> (paths,)")
        chosen = uniform_sphere if initial is None else initial
        ladder = depth_ladder(system, sde, statistic, levels, horizon, chosen, samples, reference, factor, seed)
        rate = 1.0 if rate is None else rate
    config = {"map": name_of(system), "sde": name_of(sde)}
    label = getattr(statistic, "__name__", "statistic")
    alpha = check_real("family_alpha", family_alpha, minimum=0.0, maximum=1.0, strict_minimum=True)
    checks, plots = law_checks(ladder, rate, target, support, alpha, DETECTION_POWER, label, config)
    params = {
        "levels": list(levels),
        "horizon": horizon,
        "samples": samples,
        "reference_samples": reference,
        "reference_steps": ladder.reference_steps,
        "rate": rate,
        "target": target,
        "support": None if support is None else list(support),
    }
    title = check_title(title)
    plots = [replace(plot, title=f"{title}: {plot.title}") for plot in plots]
    return Outcome(title, checks, [], params, seed, plots)
