"""Local consistency: one layer step's conditional moments against the claimed drift and diffusion.

At a fixed state x (n tokens in R^d) and step h, one layer increment dW of the noise law gives

    Delta_h = layer(x, dW, h) - x,      G_h = sde.diffusion(x, dW)   (the claimed martingale part, same dW)
    m(h)    = E[Delta_h - G_h] / h       = b(x) + O(h)               (drift; E G_h = 0 since G is linear in dW)
    D(h)    = E[Delta_h Delta_h^T - G_h G_h^T] / h = (layer covariance - claimed covariance) + O(h).

Subtracting G_h on the *same* dW (a control variate) removes the O(h^-1/2) noise of the martingale part from
m(h): what remains is the O(1) spread of the second-order terms, so a few ten thousand samples resolve the
drift to a fraction of a percent. D(h) compares laws, not paths: a claim equal in law but driven differently
(e.g. the noise entering transposed) passes it, with more noise.

The O(h) bias is removed by Richardson extrapolation over the steps h, h/2, h/4, all driven by the same
standard entries E (dW_h = scale sqrt(h) E): R_1 = 2 m(h/2) - m(h) and R_2 = 2 m(h/4) - m(h/2) estimate b(x)
to O(h^2); R_2 is the estimate and |R_1 - R_2| / 3 (its O(h^2) remainder's size) the bias allowance (the public
checks: 1.5 times that, plus the floating-point floor of the statistic, ``local_statistics.rounding_bounds``).

Checks at each state (``config["state"]``):
  drift_scale      gamma = <b - R_2, m> / |m|^2 with m = mean R_2 (the layer's measured drift): the claim's
                   relative drift error along the true drift (a claim (1 + eps) b_true gives gamma = eps).
                   Expected 0. Where the layer's drift is not resolved (|m| < 10 z its se), measured along the
                   claimed drift b instead (with its resolution: few samples are inconclusive, never a pass).
  drift            the largest |z| over the components of R_2 - b (any direction, e.g. a missing term); its
                   resolution is the error in one component it rejects with 90%, relative to the larger of the
                   drift's RMS component and the noise's, sqrt(tr C / (n d)) (both per unit of the model's time,
                   depth T = 1), target ``max_z_target``.
  diffusion_scale  <D, C> / |C|^2 with C = E[G G^T] / h the claimed covariance: the relative error of the
                   noise variance (a claim with sigma^2 x (1 + eps) gives -eps / (1 + eps)). Expected 0.
  diffusion        the largest |z| of u^T D u over probe directions u (each token's radial direction, which
                   a missing tangent projection changes, and fixed random directions), relative to the mean
                   claimed variance per direction tr(C) / (n d) (resolution likewise, in those units).
and, pooled over the states (inverse-variance weights), drift_scale and diffusion_scale again (``config["state"] ==
"pooled"``): the sharpest test of a coefficient error that is the same everywhere.
Every interval is a normal interval at the Bonferroni level of all the checks of the run (family-wise
false-failure rate ``FAMILY_ALPHA``); a check is ``inconclusive`` when its resolution (the smallest relative
error it rejects with probability 90%) exceeds ``state_target`` (one state) or ``target`` (pooled). Random numbers: a
sample is a path of one step of the runner (``paths.run_seeded``, stream key per state), so results depend neither on
how samples are split into blocks nor on where the blocks run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .._models import LayerMap, LimitSDE
from .._runtime import random_stream
from .._statistics import FAIL, FAMILY_ALPHA, Check, first_nonfinite, z_value
from .local_draws import LayerSamples, LocalDesign, layer_samples
from .local_states import name_key
from .local_statistics import (
    PROBES,
    LocalSamples,
    claimed_covariance,
    claimed_noise,
    interval_check,
    local_samples,
    machine_epsilons,
    max_z_check,
    probe_directions,
    rounding_allowance,
)

# |R_1 - R_2| / 3 estimates R_2's O(h^2) remainder exactly at leading order; the O(h^3) terms can make it short by up
# to |c_3| h^3 / 8 (m(h) = b + c_1 h + c_2 h^2 + c_3 h^3), |c_3 h / c_2| of it: a factor 1.5 bounds it while
# |c_3| h <= |c_2| / 2, the asymptotic regime of the step (an exact Ornstein-Uhlenbeck step: |c_3 h / c_2| = h / 4)
REMAINDER_SAFETY = 1.5
CHECKS_PER_STATE = 4


def _remainder(differences: np.ndarray, rounding: np.ndarray | None, design: LocalDesign, z: float):
    """The bias allowance of a Richardson estimate from the per-sample R_1 - R_2 (samples, ...; module docstring):
    |mean| / 3; for the public checks (``LocalDesign.for_users``) an upper bound instead, ``REMAINDER_SAFETY`` times
    (|mean| + z se) / 3 (the remainder's estimate has a standard error of its own), plus the rounding floor."""
    mean = differences.mean(axis=0)
    if not design.for_users:
        return np.abs(mean) / 3
    se = differences.std(axis=0, ddof=1) / np.sqrt(differences.shape[0])
    return REMAINDER_SAFETY * (np.abs(mean) + z * se) / 3 + rounding_allowance(rounding)


def local_checks(
    layer_map: LayerMap,
    sde: LimitSDE,
    states: dict[str, np.ndarray],
    design: LocalDesign,
    seed: int,
    key: Sequence[int],
    config: dict | None = None,
    family_alpha: float = FAMILY_ALPHA,
    drawn: dict[str, LayerSamples] | None = None,
) -> list[Check]:
    """The four checks of the module docstring at every state and the pooled ones, Bonferroni over all of them
    (their family-wise false-failure rate is ``family_alpha``); ``drawn`` as in ``local_checks_for_claims``."""
    return local_checks_for_claims(layer_map, [sde], states, design, seed, key, config, family_alpha, drawn)[0]


def local_checks_for_claims(
    layer_map: LayerMap,
    sdes: Sequence[LimitSDE],
    states: dict[str, np.ndarray],
    design: LocalDesign,
    seed: int,
    key: Sequence[int],
    config: dict | None = None,
    family_alpha: float = FAMILY_ALPHA,
    drawn: dict[str, LayerSamples] | None = None,
) -> list[list[Check]]:
    """``local_checks`` for several claims on the same layer samples (drawn once per state; each claim's checks
    are those ``local_checks`` gives it alone, number for number; a claim with the first claim's diffusion shares its
    statistics, which depend on the claim through its diffusion alone). ``drawn``: each state's samples so far
    (``draw_states``), extended here to ``design.samples`` and kept in place for the next look."""
    tests = CHECKS_PER_STATE * len(states) + 2
    z = z_value(tests, family_alpha)
    confidence = 1 - family_alpha / tests
    results = [_ClaimChecks() for _ in sdes]
    drawn = {} if drawn is None else drawn
    for state_name, x in states.items():
        index = name_key(state_name)
        cfg = {**(config or {}), "state": state_name}
        probe_rng = random_stream(seed, (*key, index, 1))
        probes = probe_directions(x, probe_rng)
        layer = drawn[state_name] = layer_samples(layer_map, x, design, seed, (*key, index, 0), drawn.get(state_name))
        first = None  # the first claim's noise and statistics, shared by every claim with its diffusion
        for sde, result in zip(sdes, results):
            # the first claim's diffusion function gives the same numbers without being evaluated again
            same_function = first is not None and _diffusion_source(sde) is _diffusion_source(sdes[0])
            unit = None if same_function else claimed_noise(layer, layer_map.noise, sde, x)
            if same_function or (first is not None and np.array_equal(first[0], unit)):
                data = first[1]
            else:
                exact_cov = None if layer.linear is None else claimed_covariance(layer_map.noise, sde, x)
                data = local_samples(
                    layer,
                    unit,
                    design,
                    probes,
                    x if design.for_users else None,
                    machine_epsilons(layer_map),
                    exact_cov,
                )
                first = first or (unit, data)
            result.add_state(data, sde, x, design, z, cfg, confidence)
    return [result.finish(design, z, config, confidence) for result in results]


def _diffusion_source(sde: LimitSDE) -> LimitSDE:
    """The claim whose diffusion ``sde`` evaluates unchanged: a claim that wraps another and keeps its diffusion names
    it in ``keeps_diffusion_of`` (``experiments.mutants``)."""
    source = getattr(sde, "keeps_diffusion_of", None)
    return sde if source is None else _diffusion_source(source)


@dataclass
class _ClaimChecks:
    """One claim's checks, state by state, and what its pooled checks need."""

    checks: list[Check] = field(default_factory=list)
    relaxed: bool = False  # a state's drift_scale target was set in units of a typical component
    pooled: dict[str, list] = field(default_factory=lambda: {"drift_scale": [], "diffusion_scale": []})
    pooled_bias: dict[str, list] = field(default_factory=lambda: {"drift_scale": [], "diffusion_scale": []})

    def add_state(
        self,
        data: LocalSamples,
        sde: LimitSDE,
        x: np.ndarray,
        design: LocalDesign,
        z: float,
        cfg: dict,
        confidence: float,
    ) -> None:
        bad = first_nonfinite(
            {"layer map - claimed diffusion": np.moveaxis(data.drift, 1, -1), "covariance terms": data.scale_terms},
            [f"h={h:g}" for h in design.steps],
        )
        if bad:
            nan = float("nan")
            self.checks += [
                Check(name, 0.0, nan, (nan, nan), FAIL, cfg, note=bad)
                for name in ("drift_scale", "drift", "diffusion_scale", "diffusion")
            ]
            return
        claimed = sde.drift(x[None])[0].reshape(-1)
        r1, r2 = data.drift_richardson
        # the O(h^2) remainder's size, plus the floating-point floor of the estimate
        bias = _remainder(r1 - r2, data.drift_rounding, design, z)
        gamma, drift_scale, typical = self._drift_scale(data, claimed, r2, bias, design, z, cfg, confidence)
        if drift_scale is not None:
            self.checks.append(drift_scale)
        self.checks.append(
            max_z_check(
                "drift",
                r2 - claimed,
                bias,
                z,
                cfg,
                f"{claimed.size} drift components, relative to a typical component "
                f"{typical:.3g} (the drift's or the noise's RMS one, the larger)",
                confidence,
                typical,
                design.max_z_target,
                design.power,
                design.bias_span,
            )
        )
        scale_per_sample, diffusion_scale = _diffusion_scale_check(data, design, z, cfg, confidence)
        self.checks += [diffusion_scale, _diffusion_probe_check(data, design, z, cfg, confidence)]
        self.pooled["drift_scale"].append(gamma)
        self.pooled["diffusion_scale"].append(scale_per_sample)
        self.pooled_bias["drift_scale"].append(None if drift_scale is None else drift_scale.allowance)
        self.pooled_bias["diffusion_scale"].append(diffusion_scale.allowance)

    def _drift_scale(
        self,
        data: LocalSamples,
        claimed: np.ndarray,
        r2: np.ndarray,
        bias: np.ndarray,
        design: LocalDesign,
        z: float,
        cfg: dict,
        confidence: float,
    ) -> tuple[np.ndarray | None, Check | None, float]:
        """drift_scale at one state: the per-sample relative error gamma and its check (None for a drift-free claim
        of a drift-free map), and a typical component (for the max-z drift check).
        Sets ``relaxed`` when a user's state gets a target in units of a typical component."""
        measured = r2.mean(axis=0)
        # the relative error is measured along the layer's drift where it is resolved, else along the claimed one
        # (few samples: an interval with its resolution, never a silent pass); a drift-free claim of a drift-free
        # map has no relative error, and the max-z drift check decides
        resolved = float(measured @ measured) > (10 * z) ** 2 * float(np.sum(r2.var(axis=0, ddof=1))) / r2.shape[0]
        direction, along = (measured, "measured") if resolved else (claimed, "claimed")
        norm2 = float(direction @ direction)
        # a typical component: the larger of the drift's and the noise's per unit of the model's time (the noise's
        # alone for a drift-free claim and map)
        typical = float(np.sqrt(max(norm2, float(np.trace(data.claimed_cov))) / claimed.size))
        if not (resolved or norm2 > 0):
            return None, None, typical
        gamma = (claimed - r2) @ direction / norm2
        target, rule = design.state_target, ""
        small = typical / np.sqrt(norm2 / claimed.size)  # >= 1: how far the noise's component exceeds the drift's
        if design.for_users and small > 1:
            target *= small
            self.relaxed = True
            rule = (
                f"; the drift is small beside the noise here (typical component {small:.3g} x the drift's): "
                f"target {design.state_target:g} of a typical component, {target:.3g} of the drift (the "
                "pooled drift_scale carries the relative target)"
            )
        check = interval_check(
            "drift_scale",
            gamma,
            float(bias @ np.abs(direction) / norm2),
            z,
            target,
            cfg,
            f"relative drift error of the claim along the {along} drift (|b| = {np.sqrt(norm2):.3g}"
            + ("" if resolved else "; the layer's drift is not resolved at this sample size")
            + f"), Richardson over h = {design.step:g}, /2, /4, {design.samples} samples"
            + ("; drift by the layer's own antithetic increments" if design.control == "layer" else "")
            + rule,
            confidence,
            design.power,
            design.bias_span,
        )
        return gamma, check, typical

    def finish(self, design: LocalDesign, z: float, config: dict | None, confidence: float) -> list[Check]:
        checks = self.checks
        for name in ("drift_scale", "diffusion_scale"):
            parts = [v for v in self.pooled[name] if v is not None]
            # a relaxed state's relative target is carried by the pooled check, over that state alone if need be
            if len(parts) < (1 if name == "drift_scale" and self.relaxed else 2) or any(
                c.verdict == FAIL and not np.isfinite(c.estimate) for c in checks
            ):
                continue
            # inverse-variance weights (samples are independent across states): the pooled standard error is at most
            # the best state's, so adding a noisy state never costs resolution
            stacked = np.stack(parts)
            variance = stacked.var(axis=1, ddof=1)
            weights = 1.0 / variance if np.all(variance > 0) else np.ones(len(parts))
            weights /= weights.sum()
            bias = float(weights @ [b for b in self.pooled_bias[name] if b is not None])
            pooled = interval_check(
                name,
                weights @ stacked,
                bias,
                z,
                design.target,
                {**(config or {}), "state": "pooled"},
                (
                    f"inverse-variance weighted mean over the {len(parts)} states (weights "
                    + ", ".join(f"{w:.2f}" for w in weights)
                    + ")"
                    if len(parts) > 1
                    else "the one state with a drift, at the relative target its own check was relaxed from"
                ),
                confidence,
                design.power,
                design.bias_span,
            )
            best = min(c.resolution for c in checks if c.name == name and c.resolution is not None)
            if pooled.resolution > best:
                pooled = replace(
                    pooled,
                    note=pooled.note + f"; resolution above the best single state's ({best:.3g}): "
                    "the pooled bias allowance (weighted Richardson remainders) exceeds that state's",
                )
            checks.append(pooled)
        return checks


def _diffusion_scale_check(
    data: LocalSamples, design: LocalDesign, z: float, cfg: dict, confidence: float
) -> tuple[np.ndarray, Check]:
    """diffusion_scale at one state: the per-sample relative covariance error along the claimed covariance C, and its
    check."""
    c_norm2 = float(np.sum(data.claimed_cov**2))
    s1, s2 = data.scale_richardson
    per_sample = s2[:, 0] / c_norm2
    check = interval_check(
        "diffusion_scale",
        per_sample,
        float(np.squeeze(_remainder(s1 - s2, data.scale_rounding, design, z))) / c_norm2,
        z,
        design.state_target,
        cfg,
        "relative covariance error along the claimed covariance C",
        confidence,
        design.power,
        design.bias_span,
    )
    return per_sample, check


def _diffusion_probe_check(data: LocalSamples, design: LocalDesign, z: float, cfg: dict, confidence: float) -> Check:
    """diffusion at one state: the max-z check over the probe directions, relative to the mean claimed variance per
    direction (a radial probe has claimed variance 0 on the sphere)."""
    scale = float(np.trace(data.claimed_cov)) / data.claimed_cov.shape[0]
    p1, p2 = data.probe_richardson
    return max_z_check(
        "diffusion",
        p2 / scale,
        _remainder(p1 - p2, data.probe_rounding, design, z) / scale,
        z,
        cfg,
        f"{p2.shape[1]} probe directions (radial per token, {PROBES} random), "
        "relative to the mean claimed variance per direction",
        confidence,
        1.0,
        design.max_z_target,
        design.power,
        design.bias_span,
    )
