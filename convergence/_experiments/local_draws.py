"""The layer's one-step draws at a state, shared by every claim compared with them, and the local check's design
(``LocalDesign``: steps, samples, targets, control variate, ``CONTROLS``; ``SAMPLE_BLOCK`` samples a block).

At a state x (n tokens in R^d) and the steps h, h/2, h/4, one draw E of the noise's standard entries gives the
increments Delta_h = layer(x, s sqrt(h) E, h) - x at every step (the same E for all three: Richardson then cancels
the O(h) bias without adding noise). With the layer's own control (``LocalDesign.control == "layer"``) also the
increments at -E (antithetic) and the layer's first- and second-order noise response at each step (central
differences in E, ``noise_derivatives``, where the draws have identity covariance, ``identity_covariance``, and the
Hessian is affordable; else the second difference along each draw, ``draw_quadratic``; or autodiff for a torch
block). A sample is a path of one step of the runner (``paths.run_seeded``, stream key per
state), so no number depends on how samples are split into blocks or where they run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verify._common import check_choice, check_int, check_real

from .._models import CommonNoise, JointNoise, LayerMap, TorchBlockLayer, noise_quadratic
from .._paths import PathStreams, run_seeded
from .._statistics import DETECTION_POWER

SAMPLE_BLOCK = 4096
CONTROLS = ("claim", "layer")  # the drift's control variate (``LocalDesign.control``)


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
    # allowance holds the floating-point floor (``local_statistics.rounding_bounds``) and the Richardson remainder x
    # ``local.REMAINDER_SAFETY``; where a state's drift is small beside its noise, its drift_scale target is in units
    # of a typical component (target x typical / |b|: the pooled check carries the relative target)
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
class LayerSamples:
    """One state's standard draws (per sample block) and the layer map's increments Delta at each step:
    everything a claim is compared with, drawn once for any number of claims."""

    entries: list[np.ndarray]  # per sample block: (size, *noise.shape)
    deltas: np.ndarray  # (samples, 3, n d)
    antithetic: np.ndarray | None = None  # the increments at -dW (``LocalDesign.control == "layer"``)
    # the layer's centred second-order noise response q(E) - E[q] per draw: a torch block's by autodiff at h = 0
    # (``noise_quadratic``), (samples, 1, n d); another map's by differences at each step, from its Hessian
    # (``difference_quadratic``) or along the draw (``draw_quadratic``), (samples, 3, n d)
    quadratic: np.ndarray | None = None
    # the layer's own first-order noise response J_h E per draw and step, (samples, 3, n d): the covariance
    # statistics' control
    linear: np.ndarray | None = None
    # each step's (J_h, H_h or None) at this state (``noise_derivatives``), kept for the next look's samples
    derivatives: tuple[tuple[np.ndarray, np.ndarray | None], ...] = ()
    steps: tuple[float, ...] = ()  # the steps the derivatives are at
    # each step's (F(x, 0, h), sum of the diagonal second differences) (``curvature_trace``) when ``quadratic`` is by
    # second differences along each draw (``draw_quadratic``), kept for the next look's samples
    curvatures: tuple[tuple[np.ndarray, np.ndarray], ...] = ()

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
            self.curvatures,
        )


# the per-draw quadratic forms cost n d m^2 per sample (m noise entries), the linear ones n d m: each is done only while
# that stays near a step's cost
QUADRATIC_WORK = 1 << 14
AXIS_CHUNK = 256  # noise directions per call of ``curvature_trace``
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
    f = at_directions(layer_map, x, h, np.concatenate([np.zeros((1, m)), eye, -eye, *pairs]))
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


def curvature_trace(layer_map: LayerMap, x: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """F(x, 0, h) and tr H (n d,): the sum over the m standard directions e_j of the central second differences
    (F(x, t s sqrt(h) e_j, h) + F(x, -t s sqrt(h) e_j, h) - 2 F(x, 0, h)) / t^2, t = ``DIFFERENCE_STEP`` (2 m + 1
    calls), the mean of ``draw_quadratic``'s second difference under draws of identity covariance."""
    m = int(np.prod(layer_map.noise.shape, dtype=int))
    centre = at_directions(layer_map, x, h, np.zeros((1, m)))[0]
    total = np.zeros_like(centre)
    for start in range(0, m, AXIS_CHUNK):  # a few hundred directions a call: memory stays O(chunk m), not O(m^2)
        eye = np.eye(m)[start : start + AXIS_CHUNK]
        total += at_directions(layer_map, x, h, np.concatenate([eye, -eye])).sum(axis=0)
    return centre, (total - 2 * m * centre) / DIFFERENCE_STEP**2


def at_directions(layer_map: LayerMap, x: np.ndarray, h: float, directions: np.ndarray) -> np.ndarray:
    """F(x, t s sqrt(h) u, h) for each row u of ``directions`` (rows, m) in units of a standard draw, t =
    ``DIFFERENCE_STEP``: (rows, n d), in float64."""
    noise = layer_map.noise
    xs = np.broadcast_to(x, (directions.shape[0], *x.shape)).copy()
    dw = (noise.scale * np.sqrt(h) * DIFFERENCE_STEP) * directions.reshape(-1, *noise.shape)
    return np.asarray(layer_map.layer(xs, dw, h), dtype=np.float64).reshape(directions.shape[0], -1)


def draw_quadratic(
    layer_map: LayerMap,
    x: np.ndarray,
    drawn: np.ndarray,
    steps: Sequence[float],
    curvatures: Sequence[tuple[np.ndarray, np.ndarray]],
) -> np.ndarray:
    """The layer's centred second-order noise response per draw and step along the draw itself, (draws, steps, n d):
    (F(x, t s sqrt(h) E, h) + F(x, -t s sqrt(h) E, h) - 2 F(x, 0, h)) / t^2 = E^T H E + O(t^2), less tr H from the
    diagonal (``curvature_trace``), over 2 h (t = ``DIFFERENCE_STEP``; two calls per draw and step, where the Hessian's
    n d m^2 entries are not affordable).

    Its mean is O(t^2 h) in the drift statistic (the fourth-order terms of the draw and of the diagonal differ), of
    the form of the step's own O(h) bias at t^2 of its size, which the Richardson extrapolation cancels with it."""
    flat = drawn.reshape(drawn.shape[0], -1)
    per_step = []
    for h, (centre, trace) in zip(steps, curvatures):
        plus, minus = (at_directions(layer_map, x, h, sign * flat) for sign in (1.0, -1.0))
        per_step.append(((plus + minus - 2 * centre) / DIFFERENCE_STEP**2 - trace) / (2 * h))
    return np.stack(per_step, axis=1)


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
    (``noise_quadratic``), another map's by differences where the noise's standard draws have identity covariance:
    from its Hessian where that is affordable (``difference_quadratic``, ``QUADRATIC_WORK``), else along each draw
    (``draw_quadratic``)."""
    noise = layer_map.noise
    start = 0 if previous is None else previous.deltas.shape[0]

    own = design.control == "layer"
    signs = (1.0, -1.0) if own else (1.0,)
    size = int(np.prod(noise.shape, dtype=int))
    differences = own and identity_covariance(noise) and x.size * size <= QUADRATIC_WORK
    second = differences and not isinstance(layer_map, TorchBlockLayer) and x.size * size**2 <= QUADRATIC_WORK
    quadratic_kind = _quadratic_kind(layer_map, x, design.step, own, second)
    along_draws = quadratic_kind == "draws"
    if previous is not None:  # the same state and steps: the derivatives of the first look
        derivatives, curvatures = previous.derivatives, previous.curvatures
    else:
        derivatives = tuple(noise_derivatives(layer_map, x, h, second) for h in design.steps) if differences else ()
        curvatures = tuple(curvature_trace(layer_map, x, h) for h in design.steps) if along_draws else ()
    jacobians = [jacobian for jacobian, _ in derivatives] or None
    hessians = [hessian for _, hessian in derivatives] if second else None

    def compute(streams: PathStreams, advance) -> tuple[np.ndarray, ...]:
        drawn = np.ascontiguousarray(streams.standard_draws(noise, 1)[:, 0])
        xs = np.broadcast_to(x, (streams.paths, *x.shape)).copy()
        quadratic = _quadratic_response(quadratic_kind, layer_map, x, drawn, design.steps, hessians, curvatures)
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
        configuration=(layer_map, x, design.steps, signs, quadratic_kind, differences),
        seed=seed,
        key=key,
        paths=design.samples,
        block_paths=design.block_paths,
        start=start,
    )
    with_quadratic, with_linear = quadratic_kind is not None, jacobians is not None
    drawn = _gathered(blocks, len(signs) == 2, with_quadratic, with_linear, derivatives, design.steps, curvatures)
    return drawn if previous is None else previous.extended(drawn)


def _quadratic_response(
    kind: str | None,
    layer_map: LayerMap,
    x: np.ndarray,
    drawn: np.ndarray,
    steps: Sequence[float],
    hessians: list[np.ndarray] | None,
    curvatures: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, ...]:
    """The layer's centred second-order noise response of the draws at the state ``x``, by ``kind``
    (``_quadratic_kind``): (the response,), or () without one."""
    if kind == "torch":
        return (noise_quadratic(layer_map, x, drawn.reshape(drawn.shape[0], -1))[:, None, :],)
    if kind == "hessian":
        return (difference_quadratic(hessians, steps, drawn),)
    return (draw_quadratic(layer_map, x, drawn, steps, curvatures),) if kind == "draws" else ()


def _quadratic_kind(layer_map: LayerMap, x: np.ndarray, h: float, own: bool, hessian: bool) -> str | None:
    """How the layer's own control (``own``) removes its second-order noise response: "torch" (autodiff),
    "hessian" (``difference_quadratic``), "draws" (``draw_quadratic``: draws of identity covariance and a map that
    returns float64, whose second differences' rounding ``curvature_rounding`` bounds), else None."""
    if not own:
        return None
    if isinstance(layer_map, TorchBlockLayer):
        return "torch"
    if hessian:
        return "hessian"
    if not identity_covariance(layer_map.noise):
        return None
    probe = layer_map.layer(x[None].copy(), np.zeros((1, *layer_map.noise.shape)), h)
    return "draws" if np.asarray(probe).dtype == np.float64 else None


def _gathered(
    blocks: list[tuple[np.ndarray, ...]],
    antithetic: bool,
    quadratic: bool,
    linear: bool,
    derivatives: tuple,
    steps: Sequence[float],
    curvatures: tuple,
) -> LayerSamples:
    """The blocks' tuples (draws, increments, [antithetic increments], [quadratic response], [linear response]) as
    one ``LayerSamples``, with the state's derivatives and curvatures."""
    at = 3 + quadratic  # where the linear responses sit in a block's tuple
    return LayerSamples(
        [block[0] for block in blocks],
        np.concatenate([block[1] for block in blocks]),
        np.concatenate([block[2] for block in blocks]) if antithetic else None,
        np.concatenate([block[3] for block in blocks]) if quadratic else None,
        np.concatenate([block[at] for block in blocks]) if linear else None,
        derivatives,
        tuple(steps),
        curvatures,
    )
