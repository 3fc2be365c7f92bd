"""``check_local_consistency``: one layer step's conditional mean and covariance at fixed states against the claimed
drift and diffusion (``convergence._experiments.local``), sampled in stages until they decide; the states it is judged
at (named and drawn, or given) and where a map lives; the figure of its per-state estimates."""

from __future__ import annotations

import numpy as np

from verify._common import check_choice, check_real, check_tokens

from .._experiments import CONTROLS, SAMPLE_BLOCK, STATES, LocalDesign, local_checks, states_for
from .._models import LayerMap, WidthBlock
from .._models.autodiff_limit import RESTING_TOLERANCE, zero_noise_step
from .._output import Curve, Plot
from .._runtime import random_stream
from .._statistics import Check, all_finite
from .arguments import check_title, claim_config, name_of
from .claims import PROBE_STEP, ClaimedSDE, UserLayerMap
from .covariance_local import check_covariance_local
from .outcome import Outcome, timed
from .staged import USER_KEY, Staging


def local_plots(checks: list[Check]) -> list[Plot]:
    """The local check's figure: for each scale check (relative drift and covariance errors), every state's estimate
    (state 0, 1, ...; the pooled one last) with its interval, against its allowance band and its target (the largest
    resolution that still decides)."""
    plots = []
    for name, what in (("drift_scale", "relative drift error"), ("diffusion_scale", "relative covariance error")):
        rows = [c for c in checks if c.name == name and all_finite(c.estimate, *c.ci)]
        if not rows:
            continue
        x = [float(i) for i in range(len(rows))]
        states = ", ".join(f"{i} {c.config.get('state', '?')}" for i, c in enumerate(rows))
        finite_targets = [c.target if c.target is not None and np.isfinite(c.target) else 0.0 for c in rows]
        plots.append(
            Plot(
                title=f"{name} by state: {states}",
                xlabel="state",
                ylabel=what,
                curves=[
                    Curve(
                        "estimate and interval",
                        x,
                        [c.estimate for c in rows],
                        [c.ci[0] for c in rows],
                        [c.ci[1] for c in rows],
                        style="points",
                        color="C0",
                    ),
                    Curve("+- allowance", x, [c.allowance for c in rows], color="C2", linestyle=":"),
                    Curve("_allowance below", x, [-c.allowance for c in rows], color="C2", linestyle=":"),
                    Curve("+- target", x, finite_targets, color="C3", linestyle="--"),
                    Curve("_target below", x, [-t for t in finite_targets], color="C3", linestyle="--"),
                ],
            )
        )
    return plots


def where_it_lives(layer: LayerMap, x: np.ndarray, name: str) -> np.ndarray:
    """A named state (drawn on the unit sphere) moved to where ``layer`` lives: x itself when the map's step at
    dW = 0, h = 0 leaves it in place (to ``RESTING_TOLERANCE``) or cannot be taken there (a non-finite result, e.g. a
    step that divides by h), else that step's image y = F(x, 0, 0), e.g. a LayerNorm block's sphere of radius
    sqrt(d); an error when y is moved again (the map has no resting states there: give ``states`` as arrays)."""
    with np.errstate(all="ignore"):
        image, change = zero_noise_step(layer, x[None])
    if not np.isfinite(change) or change <= RESTING_TOLERANCE:
        return x  # resting, or a step that cannot be taken at h = 0 (e.g. it divides by h): nothing to tell
    if not zero_noise_step(layer, image)[1] <= RESTING_TOLERANCE:
        diagnose = getattr(layer, "biases_moving_the_state", None)
        biases = diagnose(x[None]) if diagnose is not None else ""
        raise ValueError(
            f"{name_of(layer)}: the step at dW = 0, h = 0 moves the state {name!r} and then moves its "
            "image again, so the map has no resting state near it; "
            + (biases or "give states as arrays (name -> (tokens, dim)) where the map lives")
        )
    return image[0]


def resolve_states(
    tokens: int, dim: int, states: tuple[str, ...] | dict[str, np.ndarray], seed: int, key: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """The states a check is judged at: ``states`` names ``convergence._experiments.local_states.STATES`` (each
    drawn from ``seed`` and its own name) or maps names to arrays (tokens, dim), checked against that shape."""
    if isinstance(states, dict):
        chosen = {
            str(name): check_tokens(f"states[{name!r}]", x[None], tokens=tokens, dim=dim)[0]
            for name, x in states.items()
        }
    else:
        chosen = states_for(tokens, dim, tuple(states), seed, key)
    if not chosen:
        raise ValueError(f"states must name at least one state of {sorted(STATES)} or give arrays")
    return chosen


def _check_has_noise(sde: ClaimedSDE, states: dict[str, np.ndarray]) -> None:
    """The local check measures the one-step covariance relative to the claim's: refuse, before any sample, a claim
    whose diffusion vanishes at a state (on two random increments), naming the state and what decides instead."""
    rng = random_stream(0)
    for name, x in states.items():
        dw = PROBE_STEP**0.5 * sde.noise.scale * sde.noise.standard(rng, (2, *sde.noise.shape))
        moved = np.asarray(sde.diffusion(np.broadcast_to(x, (2, *x.shape)).copy(), dw))
        if not np.any(moved):
            raise ValueError(
                f"sde: the claimed diffusion of {name_of(sde)} is identically zero at state {name!r} (noise scale "
                f"{sde.noise.scale:g}): the local check compares the one-step covariance with the claim's, relative "
                "to it, so it decides SDE claims with noise only; give the claim its noise, or compare a deterministic "
                "limit pathwise (check_strong_order)"
            )


@timed
def check_local_consistency(
    layer: UserLayerMap,
    sde: ClaimedSDE,
    *,
    states: tuple[str, ...] | dict[str, np.ndarray] | None = None,
    step: float = 1.0 / 64,
    target: float | None = None,
    budget: int | None = None,
    first: int | None = None,
    samples: int | None = None,
    control: str = "layer",
    seed: int = 0,
    title: str = "local consistency",
    widths: tuple[int, ...] | None = None,
) -> Outcome:
    """One layer step's conditional moments against the claim (``convergence._experiments.local``) at each state,
    sampled in stages until the checks decide (``convergence._statistics.sequential``).

    ``control``: the drift's variance reduction. "layer" (default): the layer's own first-order noise response is
    removed by evaluating each step at dW and at -dW (antithetic: the half-sum is the increment's even part, the
    drift's estimate, with no claim in it), so a claim equal in law to the layer's limit but driven differently
    decides at the cost of one that is pathwise equal; the claim's noise enters only the covariance comparison. Its
    second-order response is removed too (``local_draws``: by autodiff for a torch block; for another map by central
    differences, from its Hessian where that is affordable, else along each draw at two more calls per sample and
    step), so the drift statistic keeps only O(h) fluctuations.
    "claim": the claimed diffusion on the same noise subtracted (one step per sample; noisy unless the claim is
    pathwise the layer's). Every noise law here is symmetric, so -dW has the law of dW. Where a state's drift is
    small beside its noise, its drift_scale target is in units of a typical component (docs/checks.md).

    ``states``: names of ``convergence._experiments.local_states.STATES`` (by default "uniform", "merged",
    "antipodal" and "near merged"; drawn on the unit sphere; for a map that
    lives elsewhere, moved there by one step without noise, ``where_it_lives``) or a mapping name -> array (tokens, d),
    taken as given; ``target``:
    the pooled checks' largest resolution (relative coefficient error) that still decides (a single state's is
    twice that, a max-z check's five times that). Looks at ``first``, 2 ``first``, ... samples per state and step,
    up to ``budget``: fail as soon as an interval excludes its allowance, pass as soon as every check passes at its
    target, inconclusive at the budget
    (saying how many samples would decide). ``samples``: one look at this fixed size instead. Each check's
    resolution is reported; the family-wise false-failure rate over all checks and looks is 1%.

    A width-indexed block (``WidthBlock``, e.g. from ``width_block``) is checked against a ``covariance_sde`` claim at
    h = 1/n along ``widths`` instead (``check_covariance_local``: widths 32, 64, 128, ``states`` names covariance
    states or maps names to (m, m) arrays; ``step`` and ``control`` do not apply and are refused; target 0.1, first
    1024, budget 32768 by default).
    """
    if isinstance(layer, WidthBlock):
        if step != 1.0 / 64 or control != "layer":
            raise ValueError(
                f"step, control: a width-indexed block's step is h = 1/n along its widths, with its own controls; "
                f"expected the defaults, got step = {step}, control = {control!r}"
            )
        given = {"target": target, "first": first, "budget": budget, "states": states, "widths": widths}
        options = {k: v for k, v in given.items() if v is not None}
        return check_covariance_local(layer, sde, samples=samples, seed=seed, title=title, **options)
    if widths is not None:
        raise ValueError(f"widths: only a width-indexed block (WidthBlock) takes widths, got {widths} for a layer map")
    states = ("uniform", "merged", "antipodal", "near merged") if states is None else states
    target = 0.01 if target is None else target
    first = 4096 if first is None else first
    budget = 262_144 if budget is None else budget
    config = claim_config("check_local_consistency", layer, sde)
    title = check_title(title)
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    control = check_choice("control", control, CONTROLS)
    staging = Staging.plan(samples, first, budget, SAMPLE_BLOCK, names=("samples", "first", "budget"), minimum=64)
    key = (USER_KEY, 4)
    chosen = resolve_states(layer.tokens, layer.dim, states, seed, key)
    if not isinstance(states, dict):
        chosen = {name: where_it_lives(layer, x, name) for name, x in chosen.items()}
    _check_has_noise(sde, chosen)
    drawn: dict = {}  # per state, the layer's samples so far

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = LocalDesign(
            step=step,
            samples=n,
            target=target,
            state_target=2 * target,
            power=power,
            block_paths=staging.compute_block,
            control=control,
            for_users=True,
        )
        return local_checks(layer, sde, chosen, design, seed, key, config, alpha, drawn)

    checks, stopped = staging.decide(look)
    params = staging.params(states=list(chosen), step=step, samples=stopped, target=target, control=control)
    return Outcome(title, checks, [], params, seed, plots=local_plots(checks))
