"""``check_strong_order``: does a layer map converge pathwise to a claimed SDE, at which RMS order in h = T/L, and to
that limit? The layer and the claim (Euler-Maruyama at a finer step, another scheme, or the claim's exact flow) run on
one Brownian path per sample (``convergence._experiments.strong``)."""

from __future__ import annotations

from verify._common import check_real

from .._experiments import (
    DRIFT_TARGET,
    StrongData,
    StrongDesign,
    analyse_strong,
    bootstrap_generator,
    coupled_strong_errors,
)
from .._models import (
    LayerMap,
)
from .._output import Panel
from .._paths import InitialState, uniform_sphere
from .._statistics import (
    Check,
    family_confidence,
)
from .arguments import check_pair, check_protocol, check_title, claim_config, name_of
from .claims import ClaimedSDE, UserLayerMap
from .outcome import Outcome, timed
from .staged import USER_KEY, Staging


@timed
def check_strong_order(
    layer: UserLayerMap,
    sde: ClaimedSDE,
    *,
    order: float = 0.5,
    exact: bool = False,
    depths: tuple[int, ...] = (8, 16, 32, 64),
    horizon: float = 1.0,
    target: float = DRIFT_TARGET,
    budget: int = 16_384,
    first: int = 1024,
    paths: int | None = None,
    reference_factor: int = 16,
    reference: UserLayerMap | None = None,
    max_depth: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "strong order",
) -> Outcome:
    """Does ``layer`` converge pathwise to ``sde`` at RMS order at least ``order`` in h = T/L (module docstring)?

    ``exact``: the order is exactly ``order`` (two-sided) instead of at least it; by default a map faster than claimed
    passes (an exact-in-law Ornstein-Uhlenbeck step has order 1), and same_limit is then judged at the rate it shows.
    The Euler-Maruyama reference's order is "at least 1/2" (1 on additive noise), a calibration finding. A fail needs
    evidence from the asymptotic regime (``convergence._statistics.settled_away``: the finest local order outside the
    band by its interval and not turning back towards it); where the ladder shows none, the order and limit checks
    are inconclusive and name deeper depths that would decide. Then the check **deepens itself**: it doubles the deepest
    depth, up to ``max_depth`` (default 4 x the deepest given; ``max_depth`` = the deepest given turns it off), and
    judges the longer ladder on as many paths as do the work of the last look (the paths it ended at, times the
    deepest depth asked over the new one: within the budget; same seed, a finer grid draws its Brownian path
    anew), until its checks decide. Every deeper ladder is one more look: the family-wise rate 1% is split over the
    staged looks and the deeper ladders alike (Bonferroni), so a true claim still fails at most 1% whichever stops.

    ``target``: the largest relative drift error ``same_limit`` may miss (its plateau is compared with the plateau
    that the claim with its drift x (1 + target) leaves, measured on the same paths). Looks at ``first``,
    2 ``first``, ... paths up to ``budget`` (``convergence._statistics.sequential``); ``paths``: one look at this
    fixed size instead. The reference runs at h_ref = T / (``reference_factor`` x max depth): its own mean-square
    error is same_limit's allowance, so a target it cannot see needs a larger factor (the note says which).
    ``reference``: the claim's exact solution, as its one-step flow X(t + h) = reference.layer(X(t), dW, h) (a
    layer map, e.g. ``layer_map(lambda x, dw, h: x * np.exp((a - b**2 / 2) * h + b * dw[:, :, None]), ...)`` for
    geometric Brownian motion with a field_noise((1,))), run at the same steps instead of Euler-Maruyama: the errors
    are then against the exact solution, ``reference_exact`` checks that its steps agree to rounding, and
    same_limit's allowance is that rounding. An SDE with time-independent coefficients whose solution from every x_0
    is X_t = phi(x_0, W_t, t) (it sees the Brownian path only through W_t, as geometric Brownian motion's) has phi as
    its one-step flow, by the Markov property: X(t + h) = phi(X(t), W(t + h) - W(t), h), so ``layer_map(phi, ...)``
    is the reference.
    """
    config = claim_config("check_strong_order", layer, sde)
    if reference is not None:
        check_protocol("reference", reference, LayerMap)
        check_pair(layer, reference, "check_strong_order", same_entry_law=True)
    order = check_real("order", order, minimum=0.0, strict_minimum=True)
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    title = check_title(title)
    depths = tuple(depths)
    staging = Staging.plan(paths, first, budget, 128, depths=depths, max_depth=max_depth, extended=StrongData.extended)
    drawn, key = staging.drawn, (USER_KEY, 1)
    panels: list[Panel] = []

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = StrongDesign(
            depths=drawn.depths,
            horizon=horizon,
            paths=n,
            order=order,
            block_paths=staging.compute_block,
            reference_factor=reference_factor,
            target=target,
            power=power,
            exact_order=exact,
            for_users=True,
        )
        data = drawn.extend(
            coupled_strong_errors(layer, sde, design, seed, key, initial, start=drawn.size, exact=reference), n
        )
        checks, panel = analyse_strong(
            data,
            design,
            config,
            bootstrap_generator(seed, key),
            family_confidence(4, alpha),  # the four checks share the family-wise rate
            exact_reference=reference is not None,
        )
        panels[:] = [panel]
        return checks

    checks, stopped = staging.decide(look)
    params = staging.params(
        depths=list(drawn.depths),
        depths_asked=list(depths),
        horizon=horizon,
        paths=stopped,
        order=f"{'exactly' if exact else 'at least'} {order:g}",
        target=target,
        reference_factor=reference_factor,
        reference="Euler-Maruyama" if reference is None else name_of(reference),
    )
    return Outcome(title, checks, panels, params, seed)
