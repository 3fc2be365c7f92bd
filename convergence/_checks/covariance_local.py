"""The local check of a covariance SDE on a width-indexed block (``convergence._experiments.covariance_local``),
sampled in stages until it decides; ``check_local_consistency`` calls it for a ``WidthBlock``. The named covariance
states it is judged at (``COVARIANCE_STATES``) or a user's."""

from __future__ import annotations

import numpy as np

from verify._common import check_int, check_real

from .._experiments import WIDTH_BLOCK, WidthLadder, covariance_local_checks
from .._models import CovarianceSDE, WidthBlock
from .._statistics import FAMILY_ALPHA
from .arguments import check_title, name_of
from .outcome import Outcome
from .staged import USER_KEY, Staging


def named_state(name: str, inputs: int) -> np.ndarray:
    """``COVARIANCE_STATES``: "correlated" (unit variances, correlations 0.5), "mixed" (variances 1, 1.5, 0.8, ...
    cycling, correlations +-0.3 alternating), "near collinear" (unit variances, correlations 0.95)."""
    if name == "correlated":
        return 0.5 * np.eye(inputs) + 0.5
    if name == "near collinear":
        return 0.05 * np.eye(inputs) + 0.95
    if name == "mixed":
        scales = np.sqrt(np.resize([1.0, 1.5, 0.8], inputs))
        signs = np.array([[0.3 * (-1) ** (a + b) for b in range(inputs)] for a in range(inputs)])
        correlation = np.where(np.eye(inputs, dtype=bool), 1.0, signs)
        return scales[:, None] * correlation * scales[None, :]
    raise ValueError(f"states: expected names of {COVARIANCE_STATES} or arrays (m, m), got {name!r}")


COVARIANCE_STATES = ("correlated", "mixed", "near collinear")


def resolve_covariance_states(states, inputs: int) -> dict[str, np.ndarray]:
    """Named states (``named_state``) or a mapping name -> symmetric positive-definite (m, m) array."""
    if not isinstance(states, dict):
        return {str(name): named_state(str(name), inputs) for name in states}
    chosen = {}
    for name, v in states.items():
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (inputs, inputs) or not np.allclose(v, v.T) or np.min(np.linalg.eigvalsh(v)) <= 0:
            raise ValueError(
                f"states[{name!r}]: expected a symmetric positive-definite ({inputs}, {inputs}) array, got shape "
                f"{v.shape}"
            )
        chosen[str(name)] = v
    return chosen


def check_covariance_local(
    block: WidthBlock,
    claim: CovarianceSDE,
    *,
    widths: tuple[int, ...] = (32, 64, 128),
    states=("correlated", "mixed"),
    target: float = 0.1,
    budget: int = 32_768,
    first: int = 1024,
    samples: int | None = None,
    seed: int = 0,
    title: str = "local consistency",
    family_alpha: float = FAMILY_ALPHA,
) -> Outcome:
    """``check_local_consistency`` for a width-indexed block: the one-step moments at h = 1/n along ``widths`` (each
    twice the last, three of them) against ``claim`` at each state (module docstring of
    ``convergence._experiments.covariance_local``); looks at ``first``, 2 ``first``, ... samples per width and state
    up to ``budget`` (or one look of ``samples``), the family-wise false-failure rate ``family_alpha`` (1%) over checks
    and looks."""
    if not isinstance(claim, CovarianceSDE):
        raise TypeError(f"sde: a width block is checked against a covariance_sde claim, got {type(claim).__name__}")
    if claim.inputs != block.inputs:
        raise ValueError(f"sde: the claim has inputs = {claim.inputs}, the block {block.inputs}")
    widths = tuple(check_int("widths entry", w, minimum=1) for w in widths)
    if len(widths) != 3 or any(b != 2 * a for a, b in zip(widths, widths[1:])):
        raise ValueError(
            f"widths: expected three widths, each twice the last (the extrapolation uses the two widest, its remainder "
            f"bound all three; two cannot bound it), got {widths}"
        )
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    chosen = resolve_covariance_states(states, block.inputs)
    staging = Staging.plan(samples, first, budget, WIDTH_BLOCK, names=("samples", "first", "budget"), minimum=64)
    ladders = {name: WidthLadder(widths) for name in chosen}
    config = {"map": name_of(block), "sde": claim.name}

    def look(n: int, alpha: float, power: float):
        return covariance_local_checks(
            block, claim, chosen, ladders, n, target, seed, (USER_KEY, 5), alpha, power, config
        )

    checks, stopped = staging.decide(look, check_real("family_alpha", family_alpha, minimum=0.0, maximum=1.0))
    params = staging.params(states=list(chosen), widths=list(widths), samples=stopped, target=target)
    return Outcome(check_title(title), checks, [], params, seed)
