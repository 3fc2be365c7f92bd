"""The per-sample statistics of a layer's one-step draws against a claim: the drift (Delta - G) / h and the
covariance terms, with their floating-point floors (docstring of ``convergence._experiments.local``); and the two
kinds of check the local checks make of them: an interval on a per-sample mean (``interval_check``) and the largest
excess over its components (``max_z_check``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy import stats

from .._models import LayerMap, LimitSDE
from .._statistics import FAIL, INCONCLUSIVE, PASS, Check, effect_check, samples_to_decide, z_value
from .local_draws import DIFFERENCE_STEP, LayerSamples, LocalDesign

PROBES = 4  # random probe directions of the covariance, besides each token's radial direction


@dataclass(frozen=True)
class LocalSamples:
    """Per-sample drift estimates at each step, flattened to (samples, 3, n d), and the covariance statistics."""

    drift: np.ndarray  # (Delta - G) / h per step
    scale_terms: np.ndarray  # (samples, 3): [Delta^T C Delta - G^T C G] / h
    probe_terms: np.ndarray  # (samples, 3, probes): [(u.Delta)^2 - (u.G)^2] / h
    claimed_cov: np.ndarray  # C = E[G G^T] / h at the finest step, (n d, n d)
    probe_variance: np.ndarray  # u^T C u per probe
    # bounds on the floating-point rounding of each statistic's mean, per step (``rounding_bounds``): (3, n d), (3,),
    # (3, probes); zero when not computed
    drift_rounding: np.ndarray | None = None
    scale_rounding: np.ndarray | None = None
    probe_rounding: np.ndarray | None = None

    # the Richardson extrapolations (R_1, R_2) each check takes, computed once for every claim that shares the samples
    @cached_property
    def drift_richardson(self) -> tuple[np.ndarray, np.ndarray]:
        return richardson(self.drift)

    @cached_property
    def scale_richardson(self) -> tuple[np.ndarray, np.ndarray]:
        return richardson(self.scale_terms[..., None])

    @cached_property
    def probe_richardson(self) -> tuple[np.ndarray, np.ndarray]:
        return richardson(self.probe_terms)


def claimed_covariance(noise, sde: LimitSDE, x: np.ndarray) -> np.ndarray:
    """The claim's covariance per unit time at ``x`` exactly, sum_k G(x) (s e_k) (G(x) (s e_k))^T over the noise's
    entries e_k (for standard draws of identity covariance, ``identity_covariance``): (n d, n d)."""
    size = int(np.prod(noise.shape, dtype=int))
    xs = np.broadcast_to(x, (size, *x.shape)).copy()
    columns = np.asarray(sde.diffusion(xs, noise.scale * np.eye(size).reshape(size, *noise.shape)), dtype=np.float64)
    columns = columns.reshape(size, -1)
    return columns.T @ columns


def claimed_noise(layer: LayerSamples, noise, sde: LimitSDE, x: np.ndarray) -> np.ndarray:
    """The claim's diffusion G(x) scale E on the layer's own standard draws E: (samples, n d), at unit step.

    G is linear in dW (``LimitSDE``), so it is evaluated once per draw and scaled by sqrt(h) for every step."""
    return np.concatenate(
        [
            sde.diffusion(np.broadcast_to(x, (drawn.shape[0], *x.shape)).copy(), noise.scale * drawn).reshape(
                drawn.shape[0], -1
            )
            for drawn in layer.entries
        ]
    )


ROUNDING_OPERATIONS = 16  # roundings of the largest magnitude in play that the rounding allowance counts per component


def machine_epsilons(layer_map: LayerMap) -> tuple[float, float]:
    """float64's machine epsilon, and that of the coarsest lower precision the map's block computes in (0 when none:
    a torch block's ``lowest_precision_eps``, e.g. float32 in a Hugging Face RMSNorm)."""
    return float(np.finfo(np.float64).eps), float(getattr(layer_map, "lowest_precision_eps", 0.0))


def rounding_bounds(
    x: np.ndarray,
    deltas: np.ndarray,
    g: np.ndarray,
    total: np.ndarray,
    claimed_cov: np.ndarray,
    probes: np.ndarray,
    steps: np.ndarray,
    epsilons: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bounds on the rounding in the means of the drift, covariance-scale and probe statistics, per step.

    Each component of Delta - G carries at most ``ROUNDING_OPERATIONS`` roundings of the magnitudes in play,
    delta_k = K (eps (|x_k| + |x_k + Delta_k| + |G_k|) + eps_low |Delta_k|): float64 arithmetic on the state (the map's
    output, the subtraction of x, the control variate), and a lower precision ``eps_low`` that a block computes its
    branches in (their outputs are of the increment's size; a block whose residual stream itself is low precision
    would need eps_low |x_k|, which this bound does not hold). The drift statistic (Delta - G) / h then errs by at most
    delta / h, the scale term (Delta - G)^T C (Delta + G) / h by sum_k delta_k |C (Delta + G)|_k / h and the probe
    term by (|u| . delta) |u . (Delta + G)| / h. Dividing by h makes rounding grow as the step shrinks while the O(h)
    bias falls: an exact map (an Euler-Maruyama step of its own SDE) sits at this floor, so it is part of every
    allowance (``rounding_allowance`` combines the steps as Richardson does)."""
    eps, eps_low = epsilons
    h = steps[None, :, None]
    state = x.reshape(1, 1, -1)
    delta = ROUNDING_OPERATIONS * (
        eps * (np.abs(state) + np.abs(state + deltas) + np.abs(g)) + eps_low * np.abs(deltas)
    )
    drift = (delta / h).mean(axis=0)
    scale = np.sum(delta * np.abs(total @ claimed_cov), axis=-1).mean(axis=0) / steps
    probe = ((delta @ np.abs(probes).T) * np.abs(total @ probes.T) / h).mean(axis=0)
    return drift, scale, probe


def curvature_rounding(x: np.ndarray, steps: np.ndarray, epsilons: tuple[float, float], noise_size: int) -> np.ndarray:
    """A bound on the rounding that ``local_draws.draw_quadratic``'s control adds to the drift statistic, per step:
    its second differences divide by t^2 (t = ``DIFFERENCE_STEP``) the roundings of 4 values per draw and of 4 m + 2 in
    the diagonal's trace (m noise entries), each of a component of a token of norm |x_i| (a component's rounding
    scales with its token, not with itself), and the control is divided by 2 h: ``ROUNDING_OPERATIONS`` eps (4 m + 6)
    |x_i| / (2 h t^2), (steps, n d)."""
    eps = epsilons[0] + epsilons[1]
    norms = np.repeat(np.linalg.norm(x, axis=-1), x.shape[-1])[None, :]
    per_value = ROUNDING_OPERATIONS * eps * (4 * noise_size + 6) * norms / DIFFERENCE_STEP**2
    return per_value / (2 * steps[:, None])


def rounding_allowance(per_step: np.ndarray | None) -> np.ndarray | float:
    """The rounding bound of the Richardson estimate R_2 = 2 m(h/4) - m(h/2) from per-step bounds (axis 0): 2 r(h/4)
    + r(h/2) (0 when none were computed)."""
    return 0.0 if per_step is None else 2 * per_step[2] + per_step[1]


def local_samples(
    layer: LayerSamples,
    unit: np.ndarray,
    design: LocalDesign,
    probes: np.ndarray,
    x: np.ndarray | None = None,
    epsilons: tuple[float, float] = (float(np.finfo(np.float64).eps), 0.0),
    exact_cov: np.ndarray | None = None,
) -> LocalSamples:
    """The per-sample statistics of the layer's increments against the claimed noise ``unit`` (``claimed_noise``,
    the control variate): they depend on the claim through its diffusion alone.

    Differences of quadratic forms are products of a difference and a sum, ``D^T C D - G^T C G = (D - G)^T C (D + G)``
    for the symmetric C (and ``(u.D)^2 - (u.G)^2 = u.(D - G) u.(D + G)``): one product instead of two, and no
    cancellation between two large terms.

    With the layer's own linear response L = J_h E (``LayerSamples.linear``) and the claim's exact covariance
    ``exact_cov`` (``claimed_covariance``), the control is the layer's, not the claim's: D^T C D = (D - L)^T C (D + L)
    + L^T C L, whose mean adds tr(C J_h J_h^T) exactly, and the claim enters through tr(C C_claim) h alone. A claim
    equal in law to the layer's limit but driven differently then costs what a pathwise one does."""
    steps = np.asarray(design.steps)
    h = steps[None, :, None]
    g = np.sqrt(steps)[None, :, None] * unit[:, None, :]
    # the covariance from the increment's odd part where the antithetic step gives it: E[Delta Delta^T] and
    # E[odd odd^T] differ by E[even even^T] = O(h^2) (odd times even has mean 0 under a symmetric law), and the odd
    # part holds no drift, whose cross term with the noise would dominate the spread where the drift is large
    moved = layer.deltas if layer.antithetic is None else (layer.deltas - layer.antithetic) / 2
    own = layer.linear is not None and exact_cov is not None
    control = layer.linear if own else g
    difference, total = moved - control, moved + control
    if own:
        claimed_cov = exact_cov
    else:
        finest = np.ascontiguousarray(g[:, -1])
        claimed_cov = finest.T @ finest  # A^T A: BLAS syrk, about 3 times faster than einsum
        claimed_cov = (claimed_cov + claimed_cov.T) / (2 * g.shape[0] * steps[-1])  # exactly symmetric: the identity
    rounding = (
        (None, None, None)
        if x is None
        else rounding_bounds(x, moved, control, total, claimed_cov, probes, steps, epsilons)
    )
    if x is not None and layer.curvatures:  # the draw-wise second differences' own rounding
        noise_size = int(np.prod(layer.entries[0].shape[1:], dtype=int))
        rounding = (rounding[0] + curvature_rounding(x, steps, epsilons, noise_size), *rounding[1:])
    # the drift: the increment less the claimed noise, or the even part of the layer's own increment (antithetic)
    drift = moved - g if layer.antithetic is None else (layer.deltas + layer.antithetic) / 2
    drift = drift / h
    if layer.quadratic is not None:  # the layer's second-order noise response, of mean exactly 0
        drift = drift - layer.quadratic
    scale_terms = np.sum((difference @ claimed_cov) * total, axis=-1) / steps[None, :]
    probe_terms = (difference @ probes.T) * (total @ probes.T) / h
    if own:  # the control's exact second moments, less the claim's: per step, the same for every sample
        offset = layer.linear_cov - claimed_cov[None]
        scale_terms = scale_terms + np.einsum("ij,sij->s", claimed_cov, offset)[None, :]
        probe_terms = probe_terms + np.einsum("pi,sij,pj->sp", probes, offset, probes)[None]
    return LocalSamples(
        drift=drift,
        scale_terms=scale_terms,
        probe_terms=probe_terms,
        claimed_cov=claimed_cov,
        probe_variance=np.einsum("pi,ij,pj->p", probes, claimed_cov, probes),
        drift_rounding=rounding[0],
        scale_rounding=rounding[1],
        probe_rounding=rounding[2],
    )


def richardson(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample extrapolations (R_1, R_2) from values at h, h/2, h/4 on axis 1."""
    return 2 * values[:, 1] - values[:, 0], 2 * values[:, 2] - values[:, 1]


def probe_directions(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each token's radial direction (embedded in R^{n d}) and ``PROBES`` fixed random unit directions."""
    n, d = x.shape
    radial = np.zeros((n, n * d))
    for i in range(n):
        radial[i, i * d : (i + 1) * d] = x[i]
    random = rng.standard_normal((PROBES, n * d))
    return np.vstack([radial, random / np.linalg.norm(random, axis=1, keepdims=True)])


def interval_check(
    name: str,
    per_sample: np.ndarray,
    bias: float,
    z: float,
    target: float,
    config: dict,
    note: str,
    confidence: float,
    power: float,
    bias_span: float = 1.0,
    too_biased: str = "the O(h^2) bias exceeds the target: use a smaller step",
) -> Check:
    """Mean of ``per_sample`` (expected 0) with a z interval, the bias allowance and the resolution rule
    (resolution at ``power``; ``bias_span`` 2: whatever the bias within the allowance, ``detectable_effect``);
    ``too_biased``: the advice when the allowance alone exceeds the target."""
    mean = float(per_sample.mean())
    se = float(per_sample.std(ddof=1) / np.sqrt(per_sample.size))
    ci = (mean - z * se, mean + z * se)
    check = effect_check(
        name,
        0.0,
        mean,
        ci,
        bias,
        target,
        config,
        confidence=confidence,
        power=power,
        scale=1.0,
        note=note,
        bias_span=bias_span,
    )
    if check.verdict == INCONCLUSIVE:
        return replace(
            check,
            note=note
            + (
                f"; resolution {check.resolution:.3g} > target {target:g}: about "
                f"{samples_to_decide(ci, bias, confidence, per_sample.size, target, power, bias_span)} samples "
                "would decide"
                if target > bias_span * bias
                else f"; {too_biased}"
            ),
        )
    return check


def max_z_check(
    name: str,
    per_sample: np.ndarray,
    bias: np.ndarray,
    z: float,
    config: dict,
    note: str,
    confidence: float,
    scale: float,
    target: float,
    power: float,
    bias_span: float = 1.0,
) -> Check:
    """``fail`` when any column's mean is more than z_k standard errors beyond its bias allowance, z_k the
    Bonferroni quantile over the k columns within this check's level (the maximum over k components).

    Resolution: the largest over the columns of bias_k + (z_k + z_power) se_k, the error in any one column that is
    rejected with probability ``power``, relative to ``scale``; inconclusive when it exceeds ``target``."""
    z = z_value(per_sample.shape[1], 1.0 - confidence)
    mean = per_sample.mean(axis=0)
    se = per_sample.std(axis=0, ddof=1) / np.sqrt(per_sample.shape[0])
    excess = np.where(
        se > 0, (np.abs(mean) - bias) / np.where(se > 0, se, 1.0), np.where(np.abs(mean) > bias, np.inf, 0)
    )
    worst = int(np.argmax(excess))
    score = float(np.max(excess))
    resolution = (
        float(np.max(bias_span * bias + (z + float(stats.norm.ppf(power))) * se)) / scale if scale > 0 else math.inf
    )
    verdict = FAIL if not np.all(np.isfinite(mean)) or score > z else (INCONCLUSIVE if resolution > target else PASS)
    return Check(
        name,
        0.0,
        score,
        (score, score),
        verdict,
        config,
        z,
        confidence,
        1 - confidence,
        f"{note}; largest excess over the bias allowance, in standard errors: {score:.3g} "
        f"(component {worst}), fails above z = {z:.3g}; resolution: an error of {resolution:.3g} x "
        f"{scale:.3g} in any one component",
        resolution=resolution,
        relative_resolution=resolution,
        target=target,
    )
