"""Plausible wrong claims ("mutants") of a limit SDE, each with its effect size, for the power study and tests.

A check is only as good as the smallest error it can see. Every mutant here is a claim a careful author could
make by mistake, built from the true claim of a model:

  drift x (1 + eps)        every drift coefficient off by eps (generic: any ``LimitSDE``)
  sigma^2 x (1 + eps)      the claim's noise variance off by eps, consistently: the diffusion scaled by
                           sqrt(1 + eps) and the Ito drift computed with the wrong variance
  beta x (1 + eps)         the claim's attention temperature off by eps
  Ito factor (d-2)/2       the radial Ito correction with d - 2 for d - 1
  Stratonovich drift       the drift of the Stratonovich form used as an Ito drift:
                           b_S = b - (1/2) sum_r (D sigma_r) sigma_r over a basis of the noise (generic)
  no tangent projection    the diffusion without P_x
  Ito term x (1 + eps)     model A: the kernel constant k(x, x) = k(1) of the Ito term off by eps (the
                           diffusion unchanged)

``catalogue(sde)`` lists the mutants that apply to a model's true claim. The discipline that judges a check by them:
``rejection_row`` (a mutant must be rejected: the check's inner verdict ``fail``; a claim when the mutant is structural
or at least the target effect, a finding otherwise or where the check cannot see it) and ``true_claim_row`` (the true
claim must pass the same checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from .._models import AgazziSDE, FedorovSDE, LimitSDE, normalise
from .._paths import drift_and_diffusion
from .._statistics import (
    FAIL,
    INCONCLUSIVE,
    NO_TARGET,
    PASS,
    Check,
    all_finite,
    combine_verdicts,
    confidence_z,
    excludes_band,
)

FD_STEP = 1e-6  # central differences of the diffusion along its own directions (error O(FD_STEP^2))


@dataclass(frozen=True, eq=False)
class Mutant:
    """A wrong claim: a name, its size (relative, or None for a structural error) and the claim itself."""

    name: str
    effect: float | None
    sde: LimitSDE

    @property
    def label(self) -> str:
        return self.name if self.effect is None else f"{self.name}, eps = {self.effect:+g}"


@dataclass(frozen=True, eq=False)
class _Wrapped:
    """Base of generic mutants: a claim built around the true one (same tokens, dimension, noise and diffusion;
    ``keeps_diffusion_of`` names the claim whose diffusion it evaluates, so that a check can evaluate it once)."""

    true: LimitSDE

    @property
    def keeps_diffusion_of(self) -> LimitSDE:
        return self.true

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self.true.diffusion(x, dw)

    @property
    def tokens(self) -> int:
        return self.true.tokens

    @property
    def dim(self) -> int:
        return self.true.dim

    @property
    def noise(self):
        return self.true.noise


@dataclass(frozen=True, eq=False)
class DriftScaled(_Wrapped):
    """``dx = factor b(x) dt + g(x) dW``."""

    factor: float = 1.0

    @property
    def name(self) -> str:
        return f"{getattr(self.true, 'name', type(self.true).__name__)} with drift x {self.factor:g}"

    def drift(self, x: np.ndarray) -> np.ndarray:
        return self.factor * self.true.drift(x)

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        drift, noise = drift_and_diffusion(self.true, x, dw)
        return self.factor * drift, noise


@dataclass(frozen=True, eq=False)
class DiffusionScaled(_Wrapped):
    """``dx = b(x) dt + factor g(x) dW``: the noise variance x factor^2, the drift kept (any noise kind, joint
    included: the scaled diffusion takes the packed increment the claim's own does)."""

    factor: float = 1.0

    @property
    def keeps_diffusion_of(self) -> LimitSDE:
        return self  # its diffusion is its own

    @property
    def name(self) -> str:
        return f"{getattr(self.true, 'name', type(self.true).__name__)} with diffusion x {self.factor:g}"

    def drift(self, x: np.ndarray) -> np.ndarray:
        return self.true.drift(x)

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self.factor * self.true.diffusion(x, dw)

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        drift, noise = drift_and_diffusion(self.true, x, dw)
        return drift, self.factor * noise


def stratonovich_correction(sde: LimitSDE, x: np.ndarray) -> np.ndarray:
    """``(1/2) sum_r (D sigma_r) sigma_r`` at ``x`` (paths, n, d), sigma_r(x) = diffusion(x, scale e_r) over the
    unit basis e_r of the noise array (one unit of time), by central differences along sigma_r."""
    noise = sde.noise
    size = int(np.prod(noise.shape, dtype=int))
    total = np.zeros_like(x)
    for r in range(size):
        e = np.zeros(size)
        e[r] = noise.scale
        dw = np.broadcast_to(e.reshape(noise.shape), (x.shape[0], *noise.shape))
        direction = sde.diffusion(x, dw)
        plus, minus = sde.diffusion(x + FD_STEP * direction, dw), sde.diffusion(x - FD_STEP * direction, dw)
        total += (plus - minus) / (2 * FD_STEP)
    return total / 2


@dataclass(frozen=True, eq=False)
class StratonovichAsIto(_Wrapped):
    """The Stratonovich drift b - (1/2) sum_r (D sigma_r) sigma_r claimed as the Ito drift (costs 2 x noise size
    diffusion evaluations per drift: for local checks and small noises)."""

    def drift(self, x: np.ndarray) -> np.ndarray:
        return self.true.drift(x) - stratonovich_correction(self.true, x)


class _FedorovVariance(FedorovSDE):
    """Model F's claim computed with sigma^2 x factor: Ito drift with the wrong variance, diffusion x sqrt(factor)."""

    def __repr__(self) -> str:
        return f"_FedorovVariance(model={self.model!r}, scale={self._scale!r})"

    def __init__(self, model, factor: float):
        object.__setattr__(self, "model", replace(model, sigma=model.sigma * np.sqrt(factor)))
        object.__setattr__(self, "_scale", np.sqrt(factor))
        object.__setattr__(self, "_noise_law", FedorovSDE(model).noise)

    @property
    def noise(self):
        return self._noise_law

    def _noise(self, a: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self._scale * super()._noise(a, dw)


class _FedorovItoFactor(FedorovSDE):
    """Model F's claim with the radial Ito term -((d-2)/2) sigma^2 |a|^2 x instead of (d-1)/2."""

    def _drift(self, x: np.ndarray, a: np.ndarray) -> np.ndarray:
        return super()._drift(x, a) + 0.5 * self.model.sigma**2 * np.sum(a * a, axis=-1, keepdims=True) * normalise(x)


class _FedorovUnprojected(FedorovSDE):
    """Model F's claim with the diffusion dW a (no tangent projection)."""

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self._noise(self._attention(x), dw)

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        att = self._attention(x)
        return self._drift(x, att), self._noise(att, dw)


class _AgazziIto(AgazziSDE):
    """Model A's claim with the Ito term's kernel constant k(x, x) x ``factor`` (diffusion unchanged)."""

    def __init__(self, model, factor: float):
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "_factor", factor)

    def __repr__(self) -> str:  # the factor is part of the claim's identity (cache keys)
        return f"_AgazziIto(model={self.model!r}, factor={self._factor!r})"

    def _drift(self, x_hat: np.ndarray, k: np.ndarray) -> np.ndarray:
        attention = super()._drift(x_hat, np.zeros_like(k))
        return attention + self._factor * (super()._drift(x_hat, k) - attention)


class _AgazziItoFactor(AgazziSDE):
    """Model A's claim with -((d-2)/2) k x for -((d-1)/2) k x."""

    def _drift(self, x_hat: np.ndarray, k: np.ndarray) -> np.ndarray:
        return super()._drift(x_hat, k) + 0.5 * k * x_hat


class _AgazziUnprojected(AgazziSDE):
    """Model A's claim with the field increment unprojected."""

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return self.model.field.increment(normalise(x), dw, 0.0)

    def drift_and_diffusion(self, x: np.ndarray, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        drift, _ = super().drift_and_diffusion(x, dw)
        return drift, self.diffusion(x, dw)


def catalogue(sde: LimitSDE, eps: float = 0.05, stratonovich: bool = True) -> list[Mutant]:
    """The mutants of ``sde`` (a model F or model A claim, or any claim for the generic ones) at size ``eps``."""
    mutants = [
        Mutant("drift x (1 + eps)", eps, DriftScaled(sde, 1 + eps)),
        Mutant("drift x (1 + eps)", -eps, DriftScaled(sde, 1 - eps)),
    ]
    if isinstance(sde, FedorovSDE):
        model = sde.model
        mutants += [
            Mutant("sigma^2 x (1 + eps)", eps, _FedorovVariance(model, 1 + eps)),
            Mutant("Ito factor (d-2)/2", None, _FedorovItoFactor(model)),
            Mutant("no tangent projection", None, _FedorovUnprojected(model)),
        ]
        if model.tokens > 1 and model.beta != 0:
            mutants.append(Mutant("beta x (1 + eps)", eps, FedorovSDE(replace(model, beta=model.beta * (1 + eps)))))
    elif isinstance(sde, AgazziSDE):
        model = sde.model
        mutants += [
            Mutant("Ito term k(1) x (1 + eps)", eps, _AgazziIto(model, 1 + eps)),
            Mutant("Ito factor (d-2)/2", None, _AgazziItoFactor(model)),
            Mutant("no tangent projection", None, _AgazziUnprojected(model)),
        ]
        if model.tokens > 1 and model.v != 0 and model.beta != 0:
            mutants.append(Mutant("beta x (1 + eps)", eps, AgazziSDE(replace(model, beta=model.beta * (1 + eps)))))
    if stratonovich:
        mutants.append(Mutant("Stratonovich drift", None, StratonovichAsIto(sde)))
    return mutants


MutantFactory = Callable[[LimitSDE, float], list[Mutant]]


def _combined(checks: list[Check]) -> str:
    return combine_verdicts([c.verdict for c in checks])


def pooled_check(checks: list[Check], name: str) -> Check | None:
    """The check ``name`` pooled over the states (``config['state'] == 'pooled'``), if the checks hold one."""
    return next((c for c in checks if c.name == name and c.config.get("state") == "pooled"), None)


MAX_Z_CHECKS = ("drift", "diffusion")  # the local checks whose estimate is the largest excess in standard errors


def demoted_fail(check: Check) -> bool:
    """An inconclusive check whose numbers show a fail (its interval clears the allowance band, or its largest excess
    is above its threshold): a gate on the ladder's regime or rate margin decided it was not yet evidence."""
    if check.verdict != INCONCLUSIVE or not all_finite(*check.ci, check.estimate, check.allowance):
        return False
    if check.name in MAX_Z_CHECKS:
        return check.estimate > check.allowance
    return bool(excludes_band(*check.ci, check.expected, check.allowance))


def miss_probability(check: Check) -> float:
    """The estimated chance that ``check`` misses the mutant it measured, at the measured effect (a plug-in
    estimate). An interval check misses when its interval fails to clear the allowance band:
    Phi(z - (|estimate - expected| - allowance) / se), se from the interval's half-width (about 10% for an effect at
    the resolution, 50% at the allowance plus z se). A max-z check (a zero-width interval holding its largest excess
    in standard errors, its threshold as allowance) misses when that excess stays below it: Phi(allowance - excess).
    An exact check (confidence 1 or a false-failure rate of 0: no sampling) never misses by chance. A fail its own
    numbers show but a gate made inconclusive (not in the claimed rate's regime, or not standing by the rate margin):
    1, the gate and not the interval decides it (``demoted_fail``)."""
    if check.confidence >= 1.0 or check.false_failure_rate == 0.0:
        return 0.0
    if demoted_fail(check):
        return 1.0
    if check.name in MAX_Z_CHECKS:
        if check.estimate == np.inf and check.verdict == FAIL:  # a certain rejection (an excess with zero noise)
            return 0.0
        return float(stats.norm.cdf(check.allowance - check.estimate)) if all_finite(check.estimate) else 1.0
    if not all_finite(*check.ci, check.estimate, check.allowance) or check.ci[0] == check.ci[1]:
        return 1.0
    z = confidence_z(check.confidence)
    se = (check.ci[1] - check.ci[0]) / (2 * z)
    return float(stats.norm.cdf(z - (abs(check.estimate - check.expected) - check.allowance) / se))


def rejection_row(
    kind: str, model: str, label: str, effect: float | None, checks: list[Check], target: float, unresolved: str = ""
) -> Check:
    """A study check: the mutant must be rejected (its inner verdict ``fail``). It is a claim when the mutant is
    structural or its effect is at least the profile's ``target``, unless ``unresolved`` says why the check cannot see
    it (then a finding)."""
    inner = _combined(checks)
    failed = sorted({c.name for c in checks if c.verdict == FAIL})
    claim = (effect is None or abs(effect) >= target - 1e-12) and not unresolved
    verdict = PASS if inner == FAIL else (INCONCLUSIVE if inner == INCONCLUSIVE else FAIL)
    drift = pooled_check(checks, "drift_scale")
    # the row misses only when every inner check does: the smallest single chance bounds it
    miss = min((miss_probability(c) for c in checks), default=1.0)
    note = (
        f"{kind} check on '{label}': inner verdict {inner}"
        + (f" (failed: {', '.join(failed)})" if failed else "")
        + ("" if drift is None else f"; pooled relative drift error {drift.estimate:+.4f}")
        + f"; estimated chance of a miss at the measured effects {miss:.2g}"
        + unresolved
    )
    note += "; a rejection is decided by its interval, so the row needs no target (resolution: " + (
        "the pooled drift_scale's relative one)" if drift else "the sharpest inner resolution / target)"
    )
    return Check(
        "rejects",
        1.0,
        1.0 if inner == FAIL else 0.0,
        (0.0, 1.0),
        verdict,
        {"check": kind, "model": model, "mutant": label},
        note=note,
        claim=claim,
        false_failure_rate=miss,
        resolution=_ratios(checks, min) if drift is None else drift.resolution,
        relative_resolution=None if drift is None else drift.resolution,
        target=NO_TARGET,
    )


def _ratios(checks: list[Check], pick: Callable) -> float | None:
    """``pick`` (min or max) of resolution / target over the statistical claim checks of ``checks`` that have a
    finite target (None when one of them lacks a resolution or target, or none has one): unit-free, at most 1 when
    each sees what it may not miss."""
    ratios = [c.resolution_ratio for c in checks if c.statistical and c.target != NO_TARGET]
    return None if not ratios or None in ratios else pick(ratios)


def true_claim_row(kind: str, model: str, checks: list[Check]) -> Check:
    """A study check: the true claim must pass every inner check; its false-failure rate is the sum of theirs."""
    inner = _combined(checks)
    resolutions = ", ".join(
        f"{c.name} {c.resolution:.3g}"
        for c in checks
        if c.resolution is not None and c.config.get("state", "pooled") == "pooled"
    )
    alpha = float(sum(c.false_failure_rate for c in checks))
    return Check(
        "true_claim",
        1.0,
        1.0 if inner == PASS else 0.0,
        (0.0, 1.0),
        inner,
        {"check": kind, "model": model},
        confidence=1 - alpha,
        false_failure_rate=alpha,
        note=f"{kind} check on the true claim: {inner}; resolutions: "
        f"{resolutions or 'see the inner checks'}; resolution here: the largest resolution / target of the "
        "inner claim checks (target 1: each sees what it may not miss)",
        resolution=_ratios(checks, max),
        target=1.0,
    )
