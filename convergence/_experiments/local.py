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
checks: 1.5 times that, plus the floating-point floor of the statistic, ``rounding_bounds``).

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

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from scipy import stats

from verify._common import check_choice, check_int, check_real

from .._models import CommonNoise, JointNoise, LayerMap, LimitSDE, TorchBlockLayer, noise_quadratic
from .._paths import PathStreams, run_seeded
from .._runtime import random_stream
from .._statistics import (
    DETECTION_POWER,
    FAIL,
    FAMILY_ALPHA,
    INCONCLUSIVE,
    PASS,
    Check,
    effect_check,
    first_nonfinite,
    samples_to_decide,
    z_value,
)

SAMPLE_BLOCK = 4096
CONTROLS = ("claim", "layer")  # the drift's control variate (``LocalDesign.control``)
# |R_1 - R_2| / 3 estimates R_2's O(h^2) remainder exactly at leading order; the O(h^3) terms can make it short by up
# to |c_3| h^3 / 8 (m(h) = b + c_1 h + c_2 h^2 + c_3 h^3), |c_3 h / c_2| of it: a factor 1.5 bounds it while
# |c_3| h <= |c_2| / 2, the asymptotic regime of the step (an exact Ornstein-Uhlenbeck step: |c_3 h / c_2| = h / 4)
REMAINDER_SAFETY = 1.5
PROBES = 4  # random probe directions of the covariance, besides each token's radial direction
CHECKS_PER_STATE = 4
State = Callable[[np.random.Generator, int, int], np.ndarray]


def uniform_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """I.i.d. uniform tokens on the sphere: (tokens, d)."""
    x = rng.standard_normal((tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def merged_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Every token at one uniform point (the collapsed state)."""
    return np.repeat(uniform_state(rng, 1, dim), tokens, axis=0)


def antipodal_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Tokens alternately at a uniform point e and at -e (the antipodal state)."""
    e = uniform_state(rng, 1, dim)[0]
    return np.where((np.arange(tokens) % 2 == 0)[:, None], e, -e)


def near_merged_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Tokens within about 1e-3 of one point (the Gram matrix is nearly singular)."""
    x = merged_state(rng, tokens, dim) + 1e-3 * rng.standard_normal((tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


STATES: dict[str, State] = {
    "uniform": uniform_state,
    "merged": merged_state,
    "antipodal": antipodal_state,
    "near merged": near_merged_state,
}


@dataclass(frozen=True)
class LocalDesign:
    """Steps h, h/2, h/4 at each state; ``samples`` draws of the noise per state; ``target`` the largest
    resolution (relative error) that still decides a pooled check, ``state_target`` a single state's,
    ``component_target`` a max-z check's (an error in one component, relative to a typical one; default five times
    ``target``)."""

    step: float = 1.0 / 64
    samples: int = 65536
    target: float = 0.01
    state_target: float = 0.02
    # the max-z checks (drift, diffusion) may miss an error in one component this large, relative to a typical one
    # (None: five times ``target``, as a component's standard error is several times that of a projection)
    component_target: float | None = None
    power: float = DETECTION_POWER  # a resolution is the effect rejected with this probability
    block_paths: int = SAMPLE_BLOCK  # samples per compute block (no number depends on it)
    # the drift's control variate: "claim" (the claimed diffusion on the same noise: one step per sample, exact only
    # for a claim pathwise equal to the layer) or "layer" (the layer's own response, antithetic: the step at dW and
    # at -dW, whose half-sum keeps the even part of the increment, so no claim enters the drift's estimate)
    control: str = "claim"
    # the public checks' rules (docs/checks.md, "A user's block"; False keeps the committed studies' numbers): every
    # allowance holds the floating-point floor (``rounding_bounds``) and the Richardson remainder x
    # ``REMAINDER_SAFETY``; where a state's drift is small beside its noise, its drift_scale target is in units of a
    # typical component (target x typical / |b|: the pooled check carries the relative target)
    for_users: bool = False

    def __post_init__(self) -> None:
        check_real("step", self.step, minimum=0.0, maximum=1.0, strict_minimum=True)
        check_int("block_paths", self.block_paths, minimum=1)
        check_choice("control", self.control, CONTROLS)
        check_int("samples", self.samples, minimum=64)
        check_real("target", self.target, minimum=0.0, strict_minimum=True)
        check_real("state_target", self.state_target, minimum=0.0, strict_minimum=True)
        if self.component_target is not None:
            check_real("component_target", self.component_target, minimum=0.0, strict_minimum=True)
        check_real("power", self.power, minimum=0.5, maximum=1.0)

    @property
    def bias_span(self) -> float:
        """``detectable_effect``'s bias span: 2 for the public checks (a resolution whatever the bias within the
        allowance), 1 for the studies' committed designs."""
        return 2.0 if self.for_users else 1.0

    @property
    def max_z_target(self) -> float:
        """The max-z checks' target: ``component_target``, else five times ``target``."""
        return 5 * self.target if self.component_target is None else self.component_target

    @property
    def steps(self) -> tuple[float, float, float]:
        return self.step, self.step / 2, self.step / 4


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


@dataclass(frozen=True)
class LayerSamples:
    """One state's standard draws (per sample block) and the layer map's increments Delta at each step:
    everything a claim is compared with, drawn once for any number of claims."""

    entries: list[np.ndarray]  # per sample block: (size, *noise.shape)
    deltas: np.ndarray  # (samples, 3, n d)
    antithetic: np.ndarray | None = None  # the increments at -dW (``LocalDesign.control == "layer"``)
    # the layer's centred second-order noise response q(E) - E[q] per draw: a torch block's by autodiff at h = 0
    # (``noise_quadratic``), (samples, 1, n d); another map's by differences at each step (``difference_quadratic``),
    # (samples, 3, n d)
    quadratic: np.ndarray | None = None
    # the layer's own first-order noise response J_h E per draw and step, (samples, 3, n d): the covariance
    # statistics' control
    linear: np.ndarray | None = None
    # each step's (J_h, H_h or None) at this state (``noise_derivatives``), kept for the next look's samples
    derivatives: tuple[tuple[np.ndarray, np.ndarray | None], ...] = ()
    steps: tuple[float, ...] = ()  # the steps the derivatives are at

    @cached_property
    def linear_cov(self) -> np.ndarray | None:
        """The linear response's exact covariance per unit time, J_h J_h^T / h per step: (3, n d, n d)."""
        if self.linear is None:
            return None
        return np.stack([j @ j.T / h for (j, _), h in zip(self.derivatives, self.steps)])

    def extended(self, more: LayerSamples) -> LayerSamples:
        """These samples followed by ``more`` (the next seeded blocks)."""
        return LayerSamples(
            [*self.entries, *more.entries],
            np.concatenate([self.deltas, more.deltas]),
            *(
                None if mine is None else np.concatenate([mine, theirs])
                for mine, theirs in (
                    (self.antithetic, more.antithetic),
                    (self.quadratic, more.quadratic),
                    (self.linear, more.linear),
                )
            ),
            self.derivatives,
            self.steps,
        )


# the per-draw quadratic forms cost n d m^2 per sample (m noise entries), the linear ones n d m: each is done only while
# that stays near a step's cost
QUADRATIC_WORK = 1 << 14
DIFFERENCE_STEP = 1e-2  # the central differences' step, in units of a standard draw


def identity_covariance(noise: CommonNoise) -> bool:
    """True when the noise's standard draws have covariance exactly the identity (independent entries of variance 1:
    a plain ``CommonNoise`` of any entry law, or a joint noise of such parts)."""
    if isinstance(noise, JointNoise):
        return all(identity_covariance(part) for _, part in noise.parts)
    return type(noise).standard is CommonNoise.standard


def noise_derivatives(
    layer_map: LayerMap, x: np.ndarray, h: float, second: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """J (n d, m) and H (n d, m, m): the first and second derivatives of F(x, s sqrt(h) E, h) in the standard draw E
    (m entries) at E = 0, by central differences of step ``DIFFERENCE_STEP`` (one call of the map on 2 m + 1 noise
    values, 2 m^2 + 1 with ``second``; H is None without it)."""
    noise = layer_map.noise
    m = int(np.prod(noise.shape, dtype=int))
    j, k = np.triu_indices(m, 1) if second else (np.zeros(0, int), np.zeros(0, int))
    eye = np.eye(m)
    pairs = [a * eye[j] + b * eye[k] for a in (1, -1) for b in (1, -1)] if second else []
    directions = np.concatenate([np.zeros((1, m)), eye, -eye, *pairs])
    xs = np.broadcast_to(x, (directions.shape[0], *x.shape)).copy()
    dw = (noise.scale * np.sqrt(h) * DIFFERENCE_STEP) * directions.reshape(-1, *noise.shape)
    f = np.asarray(layer_map.layer(xs, dw, h), dtype=np.float64).reshape(directions.shape[0], -1)
    centre, plus, minus = f[0], f[1 : m + 1], f[m + 1 : 2 * m + 1]
    jacobian = ((plus - minus) / (2 * DIFFERENCE_STEP)).T
    if not second:
        return jacobian, None
    pp, pm, mp, mm = np.split(f[2 * m + 1 :], 4)
    hessian = np.empty((f.shape[1], m, m))
    hessian[:, np.arange(m), np.arange(m)] = ((plus + minus - 2 * centre) / DIFFERENCE_STEP**2).T
    hessian[:, j, k] = hessian[:, k, j] = ((pp - pm - mp + mm) / (4 * DIFFERENCE_STEP**2)).T
    return jacobian, hessian


def difference_quadratic(hessians: list[np.ndarray], steps: Sequence[float], draws: np.ndarray) -> np.ndarray:
    """The layer's centred second-order noise response per draw and step, (draws, steps, n d): (E^T H E - tr H) / (2 h)
    for each step's Hessian H (``noise_derivatives``), of mean exactly 0 whatever the differences' error (E[E E^T] = I).

    The even part of one step, (F(x, dW, h) + F(x, -dW, h)) / 2 - x, is h d_h F + E^T H E / 2 + O(h^2) with dW = s
    sqrt(h) E: subtracting this control leaves the O(h) fluctuations only, where E^T H E / (2 h) spreads like the
    noise's curvature (an exact step of a multiplicative-noise SDE, whose Euler step has none)."""
    flat = draws.reshape(draws.shape[0], -1)
    return np.stack(
        [
            (np.einsum("sj,ojk,sk->so", flat, hessian, flat) - np.trace(hessian, axis1=1, axis2=2)) / (2 * h)
            for hessian, h in zip(hessians, steps)
        ],
        axis=1,
    )


def layer_samples(
    layer_map: LayerMap,
    x: np.ndarray,
    design: LocalDesign,
    seed: int,
    key: Sequence[int],
    previous: LayerSamples | None = None,
) -> LayerSamples:
    """Draw ``design.samples`` one-step increments of ``layer_map`` at state ``x`` (tokens, d): the runner's seeded
    blocks of samples (a sample is a path of one step), on the workers when blocks run there. With ``previous``
    (the first samples of the same state and stream), only the samples after them are drawn. With the layer's own
    control (``design.control == "layer"``), also its centred second-order noise response: a torch block's by autodiff
    (``noise_quadratic``), another map's by differences (``difference_quadratic``) where the noise's standard draws
    have identity covariance and the quadratic forms are affordable (``QUADRATIC_WORK``)."""
    noise = layer_map.noise
    start = 0 if previous is None else previous.deltas.shape[0]

    signs = (1.0, -1.0) if design.control == "layer" else (1.0,)
    torch_quadratic = design.control == "layer" and isinstance(layer_map, TorchBlockLayer)
    size = int(np.prod(noise.shape, dtype=int))
    differences = design.control == "layer" and identity_covariance(noise) and x.size * size <= QUADRATIC_WORK
    second = differences and not torch_quadratic and x.size * size**2 <= QUADRATIC_WORK
    if previous is not None:  # the same state and steps: the derivatives of the first look
        derivatives = previous.derivatives
    else:
        derivatives = tuple(noise_derivatives(layer_map, x, h, second) for h in design.steps) if differences else ()
    jacobians = [jacobian for jacobian, _ in derivatives] or None
    hessians = [hessian for _, hessian in derivatives] if second else None

    def compute(streams: PathStreams, advance) -> tuple[np.ndarray, ...]:
        drawn = np.ascontiguousarray(streams.standard_draws(noise, 1)[:, 0])
        xs = np.broadcast_to(x, (streams.paths, *x.shape)).copy()
        quadratic = ()
        if torch_quadratic:
            quadratic = (noise_quadratic(layer_map, x, drawn.reshape(streams.paths, -1))[:, None, :],)
        elif hessians is not None:
            quadratic = (difference_quadratic(hessians, design.steps, drawn),)
        flat = drawn.reshape(streams.paths, -1)
        linear = () if jacobians is None else (np.stack([flat @ jacobian.T for jacobian in jacobians], axis=1),)
        return (
            drawn,
            *(
                np.stack(
                    [
                        (layer_map.layer(xs, (sign * noise.scale * np.sqrt(h)) * drawn, h) - xs).reshape(
                            streams.paths, -1
                        )
                        for h in design.steps
                    ],
                    axis=1,
                )
                for sign in signs
            ),
            *quadratic,
            *linear,
        )

    blocks = run_seeded(
        compute,
        name="layer_samples",
        configuration=(layer_map, x, design.steps, signs, torch_quadratic, hessians is not None, differences),
        seed=seed,
        key=key,
        paths=design.samples,
        block_paths=design.block_paths,
        start=start,
    )
    with_quadratic = torch_quadratic or hessians is not None
    at = 3 + with_quadratic  # where the linear responses sit in a block's tuple
    drawn = LayerSamples(
        [block[0] for block in blocks],
        np.concatenate([block[1] for block in blocks]),
        np.concatenate([block[2] for block in blocks]) if len(signs) == 2 else None,
        np.concatenate([block[3] for block in blocks]) if with_quadratic else None,
        np.concatenate([block[at] for block in blocks]) if jacobians is not None else None,
        derivatives,
        tuple(design.steps),
    )
    return drawn if previous is None else previous.extended(drawn)


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


def rounding_allowance(per_step: np.ndarray | None) -> np.ndarray | float:
    """The rounding bound of the Richardson estimate R_2 = 2 m(h/4) - m(h/2) from per-step bounds (axis 0): 2 r(h/4)
    + r(h/2) (0 when none were computed)."""
    return 0.0 if per_step is None else 2 * per_step[2] + per_step[1]


def _remainder(differences: np.ndarray, rounding: np.ndarray | None, design: LocalDesign, z: float):
    """The bias allowance of a Richardson estimate from the per-sample R_1 - R_2 (samples, ...; module docstring):
    |mean| / 3; for the public checks (``LocalDesign.for_users``) an upper bound instead, ``REMAINDER_SAFETY`` times
    (|mean| + z se) / 3 (the remainder's estimate has a standard error of its own), plus the rounding floor."""
    mean = differences.mean(axis=0)
    if not design.for_users:
        return np.abs(mean) / 3
    se = differences.std(axis=0, ddof=1) / np.sqrt(differences.shape[0])
    return REMAINDER_SAFETY * (np.abs(mean) + z * se) / 3 + rounding_allowance(rounding)


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


def _interval_check(
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
) -> Check:
    """Mean of ``per_sample`` (expected 0) with a z interval, the bias allowance and the resolution rule
    (resolution at ``power``; ``bias_span`` 2: whatever the bias within the allowance, ``detectable_effect``)."""
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
                else "; the O(h^2) bias exceeds the target: use a smaller step"
            ),
        )
    return check


def _max_z_check(
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
        checks = self.checks
        bad = first_nonfinite(
            {"layer map - claimed diffusion": np.moveaxis(data.drift, 1, -1), "covariance terms": data.scale_terms},
            [f"h={h:g}" for h in design.steps],
        )
        if bad:
            nan = float("nan")
            checks += [
                Check(name, 0.0, nan, (nan, nan), FAIL, cfg, note=bad)
                for name in ("drift_scale", "drift", "diffusion_scale", "diffusion")
            ]
            return
        claimed = sde.drift(x[None])[0].reshape(-1)
        r1, r2 = data.drift_richardson
        # the O(h^2) remainder's size, plus the floating-point floor of the estimate
        bias = _remainder(r1 - r2, data.drift_rounding, design, z)
        measured = r2.mean(axis=0)
        # the relative error is measured along the layer's drift where it is resolved, else along the claimed one
        # (few samples: an interval with its resolution, never a silent pass); a drift-free claim of a drift-free
        # map has no relative error, and the max-z drift check decides
        resolved = float(measured @ measured) > (10 * z) ** 2 * float(np.sum(r2.var(axis=0, ddof=1))) / r2.shape[0]
        direction, along = (measured, "measured") if resolved else (claimed, "claimed")
        norm2 = float(direction @ direction)
        scaled = resolved or norm2 > 0
        # a typical component: the larger of the drift's and the noise's per unit of the model's time (the noise's
        # alone for a drift-free claim and map)
        typical = float(np.sqrt(max(norm2, float(np.trace(data.claimed_cov))) / claimed.size))
        if scaled:
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
            checks.append(
                _interval_check(
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
            )
        checks.append(
            _max_z_check(
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
        c_norm2 = float(np.sum(data.claimed_cov**2))
        s1, s2 = data.scale_richardson
        checks.append(
            _interval_check(
                "diffusion_scale",
                s2[:, 0] / c_norm2,
                float(np.squeeze(_remainder(s1 - s2, data.scale_rounding, design, z))) / c_norm2,
                z,
                design.state_target,
                cfg,
                "relative covariance error along the claimed covariance C",
                confidence,
                design.power,
                design.bias_span,
            )
        )
        # relative to the mean variance per direction (a radial probe has claimed variance 0 on the sphere)
        scale = float(np.trace(data.claimed_cov)) / data.claimed_cov.shape[0]
        p1, p2 = data.probe_richardson
        checks.append(
            _max_z_check(
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
        )
        self.pooled["drift_scale"].append(gamma if scaled else None)
        self.pooled["diffusion_scale"].append(s2[:, 0] / c_norm2)
        self.pooled_bias["drift_scale"].append(checks[-4].allowance if scaled else None)
        self.pooled_bias["diffusion_scale"].append(checks[-2].allowance)

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
            pooled = _interval_check(
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


def name_key(name: str) -> int:
    """A state's stream key from its name (32 bits of its SHA-256), so a named state and its samples are the same
    whatever list it appears in, and at whatever place."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def states_for(tokens: int, dim: int, names: Sequence[str], seed: int, key: Sequence[int]) -> dict[str, np.ndarray]:
    """The named states of ``STATES`` for a map with ``tokens`` tokens in dimension ``dim`` (seeded)."""
    out = {}
    for name in names:
        if name not in STATES:
            raise ValueError(f"states must be names in {sorted(STATES)}, got {name!r}")
        rng = random_stream(seed, (*key, name_key(name), 2))
        out[name] = STATES[name](rng, tokens, dim)
    return out
