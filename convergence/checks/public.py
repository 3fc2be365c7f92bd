"""Check your own layer map: the public interface (stable; everything here is re-exported by ``convergence``).

A user describes

* a discrete layer map ``step(x, dw, h) -> x_next`` on float64 arrays shaped (paths, tokens, d), with ``dw``
  one layer's noise shaped (paths, *noise.shape): ``layer_map(step, tokens, dim, noise)``;
* the law of its noise: ``matrix_noise(d, sigma)`` (a common d x d matrix, model F), ``field_noise(shape)``
  (a common field, e.g. Brownian output weights), ``scalar_noise()`` or ``per_token_noise(tokens, d)``;
  the increment over a step h is ``scale * sqrt(h) * E`` with E i.i.d. of mean 0 and variance 1;
* the limit SDE they claim, ``dx = drift(x) dt + diffusion(x, dW)``, as numpy callables:
  ``limit_sde(drift, diffusion, tokens, dim, noise)`` (``diffusion`` is linear in ``dW``);

and runs

* ``check_strong_order``: the layer map and the claimed SDE (Ito Euler-Maruyama at a 16 times finer step,
  a different scheme) on one Brownian path per sample; RMS order in h (expected 1/2) and ``same_limit``
  (the mean-square error's plateau is 0: a wrong SDE fails it). Needs a Gaussian noise.
* ``check_local_consistency``: at fixed states (uniform, merged, antipodal, near-merged tokens), one step's
  conditional mean and covariance against the claimed drift and diffusion, with the claimed diffusion on the
  same noise as a control variate and Richardson over h, h/2, h/4 (``convergence.experiments.local``): sees a 1% drift
  coefficient error in seconds. Works for any noise law.
* ``check_weak_order``: coupled differences E f(X^L) - E f(X^{2L}) of a user observable f, order 1.
* ``check_same_weak_limit``: two layer maps with the same noise law, driven by the same noise, have the
  same weak limit of f (Richardson-extrapolated difference of their means is 0).

Each returns an ``Outcome``: the checks (``pass``, ``fail`` or ``inconclusive``: too noisy to decide, never a
pass), the per-level table and fitted order with its interval (``Outcome.table()``), and ``write(out)``
writes the same Markdown/JSON/PNG report as the suite's own studies.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from verify.common import check_choice, check_int, check_real, check_tokens, file_stem

from ..experiments import (
    CONTROLS,
    DRIFT_TARGET,
    SAMPLE_BLOCK,
    STATES,
    DiffusionScaled,
    DriftScaled,
    LocalDesign,
    StrongData,
    StrongDesign,
    WeakDesign,
    analyse_strong,
    blind,
    bootstrap_generator,
    claim_limit_check,
    coupled_layer_and_claims,
    coupled_observables,
    coupled_strong_errors,
    deeper_depths,
    local_checks,
    order_check,
    rejection_row,
    states_for,
    wants_deeper,
    weak_order,
)
from ..models import (
    CommonNoise,
    JointNoise,
    LayerMap,
    LimitSDE,
    joint_noise,
    matrix_noise,
    scalar_noise,
)
from ..models.autodiff_limit import RESTING_TOLERANCE, zero_noise_step
from ..models.ito_correction import ito_correction
from ..output import Curve, Panel, Plot, StudyResult, write_study
from ..paths import InitialState, PathStreams, uniform_sphere
from ..runtime import SEED_BLOCK, STREAM_KEYS, concatenate_blocks, cpu_meter
from ..statistics import (
    DEEPER,
    DETECTION_POWER,
    FAIL,
    FAMILY_ALPHA,
    INCONCLUSIVE,
    PASS,
    Check,
    Looks,
    all_finite,
    combine_verdicts,
    confidence_label,
    decide_in_stages,
    differences_settled_away,
    effect_check,
    family_confidence,
    first_nonfinite,
    paths_for_effect,
    samples_to_decide,
    z_confidence,
    z_value,
)

Step = Callable[[np.ndarray, np.ndarray, float], np.ndarray]
Observable = Callable[[np.ndarray], np.ndarray]
USER_KEY = STREAM_KEYS["user checks"]  # the first entry of every user check's stream key
WEAK_BLOCK = 4096  # paths per compute block of the weak checks (a look is a whole number of blocks)

__all__ = [
    "ClaimedSDE",
    "Outcome",
    "UserLayerMap",
    "check_local_consistency",
    "check_same_weak_limit",
    "check_strong_order",
    "check_weak_limit",
    "check_weak_order",
    "field_noise",
    "joint_noise",
    "layer_map",
    "limit_sde",
    "matrix_noise",
    "per_token_noise",
    "scalar_noise",
    "scaled_diffusion",
    "scaled_drift",
]


def field_noise(shape: tuple[int, ...], scale: float = 1.0) -> CommonNoise:
    """A common noise field: an array of ``shape`` shared by every token (e.g. MLP output weights)."""
    return CommonNoise(shape=tuple(shape), scale=check_real("scale", scale, minimum=0.0))


def per_token_noise(tokens: int, dim: int, scale: float = 1.0) -> CommonNoise:
    """Independent noise for each token, shaped (tokens, d) (its shape depends on the number of tokens)."""
    return CommonNoise(
        shape=(check_int("tokens", tokens, minimum=1), check_int("dim", dim, minimum=1)),
        scale=check_real("scale", scale, minimum=0.0),
    )


@dataclass(frozen=True, eq=False)
class UserLayerMap:
    """A layer map given by a function; implements ``convergence.LayerMap``."""

    step: Step
    tokens: int
    dim: int
    noise: CommonNoise
    name: str = "layer map"

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        return _checked_array(
            f"{self.name}: step(x, dw, h)",
            _called(self.name, "step(x, dw, h)", self.step, h, x, _parts(self.noise, dw), h),
            x.shape,
        )


@dataclass(frozen=True, eq=False)
class ClaimedSDE:
    """A limit SDE given by numpy callables; implements ``convergence.LimitSDE`` (an Ito SDE). ``form``: "ito", or
    "stratonovich" when ``drift_fn`` is the Stratonovich drift: ``drift`` then returns the Ito drift, with the
    correction of ``convergence.models.ito_correction`` added."""

    drift_fn: Callable[[np.ndarray], np.ndarray]
    diffusion_fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    tokens: int
    dim: int
    noise: CommonNoise
    name: str = "claimed SDE"
    form: str = "ito"

    def drift(self, x: np.ndarray) -> np.ndarray:
        drift = _checked_array(
            f"{self.name}: drift(x)", _called(self.name, "drift(x)", self.drift_fn, None, x), x.shape
        )
        if self.form == "stratonovich":
            drift = drift + ito_correction(self.diffusion, self.noise.shape, self.noise.scale**2, x)
        return drift

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return _checked_array(
            f"{self.name}: diffusion(x, dw)",
            _called(self.name, "diffusion(x, dw)", self.diffusion_fn, None, x, _parts(self.noise, dw)),
            x.shape,
        )


def _parts(noise: CommonNoise, dw: np.ndarray):
    """What a user's function receives: ``dw`` itself, or a joint noise's parts (tuple or dict, scaled)."""
    return noise.split(dw) if isinstance(noise, JointNoise) else dw


def _called(name: str, what: str, function: Callable, h: float | None, *args: np.ndarray):
    """``function(*args)``; an exception inside the user's function is re-raised naming the map, the call, the
    step h (which names the depth: L = T / h) and the shapes it was given."""
    try:
        return function(*args)
    except Exception as error:
        shapes = ", ".join(_shapes(a) for a in args if isinstance(a, (np.ndarray, tuple, dict)))
        at = "" if h is None else f" at step h = {h:g}"
        raise RuntimeError(
            f"{name}: {what} raised {type(error).__name__}: {error}{at} (arrays shaped {shapes})"
        ) from error


def _shapes(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {np.shape(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(str(np.shape(v)) for v in value) + ")"
    return str(np.shape(value))


def _checked_array(what: str, value: object, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as a real float64 array of ``shape``; a clear error instead of numpy broadcasting on the wrong
    shape, a silent cast of complex values, or a list."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{what} must return a numpy array shaped {shape}, got {type(value).__name__}")
    if np.iscomplexobj(value) or not np.issubdtype(value.dtype, np.number):
        raise TypeError(f"{what} must return real numbers (float64), got dtype {value.dtype}")
    if value.shape != tuple(shape):
        raise ValueError(f"{what} must return an array shaped {tuple(shape)}, got {value.shape}")
    return value.astype(np.float64, copy=False)


def _checked_observable(observable: Observable, layer: UserLayerMap) -> Observable:
    """``observable`` with its output checked: one real value per path, shape (paths,). It is called once here, on
    two paths of ``layer``'s shape (``_probe``'s tokens), so a wrong shape or dtype is reported before any path is
    simulated."""
    if not callable(observable):
        raise TypeError(f"observable must be callable f(x) -> (paths,), got {type(observable).__name__}")

    def checked(x: np.ndarray) -> np.ndarray:
        return _checked_array("observable f(x)", observable(x), x.shape[:1])

    _probe(layer, "the observable f(x)", lambda x, dw: checked(x))
    return checked


def _check_pair(first, second, what: str, same_entry_law: bool = True) -> None:
    """Two maps, or a map and its claim, must have the same tokens, dimension and noise (shape and scale; with
    ``same_entry_law`` the entry law too: a claim's noise is Gaussian whatever law the map's entries have)."""
    for attribute in ("tokens", "dim"):
        a, b = getattr(first, attribute, None), getattr(second, attribute, None)
        if a != b:
            raise ValueError(
                f"{what}: the {attribute} must agree: {_name(first)} and {_name(second)} need the same "
                f"{attribute}, got {a} and {b}"
            )
    noise_a, noise_b = first.noise, second.noise
    if (noise_a != noise_b) if same_entry_law else _noise_layout(noise_a) != _noise_layout(noise_b):
        rule = "the same law" if same_entry_law else "the same shape and scale"
        raise ValueError(f"{what}: the noises must have {rule}, got {noise_a} and {noise_b}")


def _noise_layout(noise: CommonNoise) -> tuple:
    """A noise's shape and scale, part by part for a joint noise (keys, shapes, scales, tuple or dict): what a map
    and its claim must share when only the entry law may differ."""
    if isinstance(noise, JointNoise):
        return noise.mapping, tuple((key, part.shape, part.scale) for key, part in noise.parts)
    return noise.shape, noise.scale


def _check_protocol(name: str, value: object, protocol: type) -> None:
    if not isinstance(value, protocol):
        raise TypeError(
            f"{name} must implement convergence.{protocol.__name__} (use layer_map / limit_sde), "
            f"got {type(value).__name__}"
        )


def _nonfinite_checks(names: list[str], message: str, config: dict) -> list[Check]:
    """Every check of a look whose data hold NaN or infinity: ``fail``, with the message naming where."""
    nan = float("nan")
    return [Check(name, 0.0, nan, (nan, nan), FAIL, config, note=message) for name in names]


def _name(obj: object) -> str:
    """A map's or an SDE's label in reports (its ``name``, else its class)."""
    return getattr(obj, "name", type(obj).__name__)


def _check_shape(tokens: int, dim: int, noise) -> tuple[int, int, CommonNoise]:
    """Checked tokens and dim, and the noise: a ``CommonNoise``, or a tuple / dict of them (independent noises of
    one layer, packed by ``joint_noise``)."""
    if isinstance(noise, (tuple, list)) and noise and all(isinstance(n, int) for n in noise):
        raise TypeError(
            f"noise must be a CommonNoise or a tuple or dict of them, got the integers {tuple(noise)} "
            "(a shape? use field_noise(shape))"
        )
    if isinstance(noise, (tuple, list, dict)):
        noise = joint_noise(noise)
    if not isinstance(noise, CommonNoise):
        raise TypeError(
            f"noise must be a CommonNoise (matrix_noise, field_noise, scalar_noise, per_token_noise) or "
            f"a tuple or dict of them, got {type(noise).__name__}"
        )
    return check_int("tokens", tokens, minimum=1), check_int("dim", dim, minimum=1), noise


def layer_map(step: Step, tokens: int, dim: int, noise, name: str = "layer map") -> UserLayerMap:
    """Wrap ``step(x, dw, h)`` (arrays (paths, tokens, d) and (paths, *noise.shape)) as a layer map. ``noise``: a
    ``CommonNoise``, or a tuple / dict of independent noises, in which case ``dw`` is a tuple / dict of their
    increments (``joint_noise``)."""
    if not callable(step):
        raise TypeError(f"step must be callable step(x, dw, h), got {type(step).__name__}")
    tokens, dim, noise = _check_shape(tokens, dim, noise)
    layer = UserLayerMap(step, tokens, dim, noise, name)
    _probe(layer, "step(x, dw, h)", lambda x, dw: layer.layer(x, dw, PROBE_STEP))
    return layer


def limit_sde(
    drift: Callable, diffusion: Callable, tokens: int, dim: int, noise, name: str = "claimed SDE", form: str = "ito"
) -> ClaimedSDE:
    """The claimed limit ``dx = drift(x) dt + diffusion(x, dW)`` driven by ``noise`` (numpy callables; with several
    noises, ``dW`` is a tuple / dict as for ``layer_map``). ``form="stratonovich"`` reads it as
    ``dx = drift(x) dt + diffusion(x, o dW)``: the checks then test its Ito form (the Ito-Stratonovich correction
    added to the drift, ``convergence.models.ito_correction``), and its name says so."""
    for label, fn in (("drift", drift), ("diffusion", diffusion)):
        if not callable(fn):
            raise TypeError(f"{label} must be callable, got {type(fn).__name__}")
    form = check_choice("form", form, FORMS)
    tokens, dim, noise = _check_shape(tokens, dim, noise)
    if form == "stratonovich":
        name = f"{name} (Stratonovich, tested in Ito form)"
    sde = ClaimedSDE(drift, diffusion, tokens, dim, noise, name, form)
    _probe(sde, "drift(x)", lambda x, dw: sde.drift(x))
    _probe(sde, "diffusion(x, dw)", sde.diffusion)
    return sde


def scaled_drift(claim: LimitSDE, factor: float) -> LimitSDE:
    """The near miss ``dx = factor b(x) dt + g(x) dW`` of a claim ``dx = b(x) dt + g(x) dW`` (same tokens, dimension
    and noise): a drift error of ``factor - 1``, which a check whose target is that small must reject (as
    ``check_weak_limit``'s ``near_misses`` do on the true claim's paths; or with the plugin's ``assert_rejects``).
    ``factor``: a finite real number."""
    _check_protocol("claim", claim, LimitSDE)
    return DriftScaled(claim, _finite_factor(factor))


def scaled_diffusion(claim: LimitSDE, factor: float) -> LimitSDE:
    """The near miss ``dx = b(x) dt + factor g(x) dW`` of a claim ``dx = b(x) dt + g(x) dW``: its noise variance
    x ``factor``^2 (``sqrt(1.05)`` for a 5% variance error), the drift kept. Works for every noise kind, a joint noise
    included (the scaled diffusion receives the increment as the claim's own does). ``factor``: a finite real
    number."""
    _check_protocol("claim", claim, LimitSDE)
    return DiffusionScaled(claim, _finite_factor(factor))


def _finite_factor(factor: object) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)):
        raise TypeError(f"factor must be a real number, got {type(factor).__name__}")
    if not np.isfinite(factor):
        raise ValueError(f"factor must be finite, got {factor}")
    return float(factor)


PROBE_STEP = 1.0 / 64
FORMS = ("ito", "stratonovich")  # how a claim's drift is read
NUMPY_SHAPE_ERROR = re.compile(r"broadcast|core dimension|not aligned|cannot reshape|shapes? \(")


def _probe(obj: UserLayerMap | ClaimedSDE, what: str, call: Callable) -> None:
    """Call a user's function once at construction, on two paths of tokens in general position and a random
    increment of the declared noise, so that a dimension that does not match the noise, or a wrong output shape
    (numpy's shape errors are ValueErrors), is reported when the map is built, naming the shapes, rather than deep
    inside a study. Other exceptions are left to the run, which reports them with the step h."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, obj.tokens, obj.dim))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    dw = PROBE_STEP**0.5 * obj.noise.standard(rng, (2, *obj.noise.shape))
    try:
        call(x, dw)
    except Exception as error:
        if isinstance(error, (ValueError, TypeError)) and error.__cause__ is None:
            raise  # our own output check (_checked_array): its message names the shapes
        cause = error.__cause__
        if not (type(cause) is ValueError and NUMPY_SHAPE_ERROR.search(str(cause))):
            return  # any other failure is the run's to report, naming the depth where it happens
        raise ValueError(
            f"{obj.name}: {what} fails on a probe with tokens x shaped {x.shape} (n = {obj.tokens}, "
            f"d = {obj.dim}) and the declared noise's increment dw shaped {dw.shape[1:]} per path: "
            f"{error.__cause__}. Does the noise match the dimension?"
        ) from error


@dataclass
class Outcome:
    """The result of a user check: checks, convergence panels and the overall verdict."""

    title: str
    checks: list[Check]
    panels: list[Panel] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    seed: int = 0
    plots: list[Plot] = field(default_factory=list)  # other figures (the local check's per-state estimates)
    elapsed_s: float = 0.0  # wall seconds of the check
    cpu_s: float = 0.0  # CPU seconds: this thread's and every block a dask worker ran for it

    @property
    def verdict(self) -> str:
        """The verdict of the claims (findings, e.g. whether a near miss is seen, are reported beside it)."""
        return combine_verdicts([check.verdict for check in self.checks if check.claim])

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def sample_size(self) -> int:
        """The paths (local consistency: samples per state and step) this outcome was measured on."""
        return int(self.params.get("paths", self.params.get("samples", 0)))

    def paths_needed(self, effect: float) -> dict[str, int | None]:
        """Sample-size planning from this run as a pilot: for each claim check, the paths (``sample_size`` units) at
        which it would reject a departure of ``effect`` from its expected value with probability 90% at its level
        (``statistics.paths_for_effect``: the measured interval's standard error scaled as paths^-1/2, and the
        check's bias span: twice the allowance where it bounds a bias, as in its resolution). ``effect``
        is in the check's own units, those its resolution is printed in (order units for orders; a relative
        coefficient error for the local checks' scales). None where no number of paths can: the effect lies within
        the check's bias allowance, or the check has no interval (the local checks' vector rows). The allowance is
        held fixed; where it holds standard errors of its own (the weak checks' discretisation biases) more paths
        shrink it too, so the plan is conservative there. Keys: the check's name and configuration."""
        effect = check_real("effect", effect, minimum=0.0, strict_minimum=True)
        return {
            _check_label(check): paths_for_effect(
                check.ci, check.allowance, check.confidence, self.sample_size, effect, bias_span=check.bias_span
            )
            for check in self.checks
            if check.claim
        }

    def table(self) -> str:
        """Plain-text summary: every level of every panel, each check's estimate, interval and verdict."""
        lines = [f"{self.title}: {self.verdict}"] + (
            [f"  sampled in stages: {self.params['stages']}"] if "stages" in self.params else []
        )
        for panel in self.panels:
            for series in panel.series:
                lines.append(f"  {series.label} (fitted order {series.order:.3f})")
                lines.append(f"    {'step h':>12} {'value':>12} {'interval':>27}")
                for h, v, lo, hi in zip(series.steps, series.values, series.ci_lo, series.ci_hi):
                    lines.append(f"    {h:12.5g} {v:12.5g}   [{lo:11.5g}, {hi:11.5g}]")
        for check in self.checks:
            if check.verdict != FAIL and not all_finite(check.estimate, *check.ci):  # nothing was estimated
                numbers = f"not estimated, expected {check.expected:.4g} +- {check.allowance:.3g}"
            else:
                numbers = (
                    f"estimate {check.estimate:.4g}, expected {check.expected:.4g} +- {check.allowance:.3g}, "
                    f"{confidence_label(check.confidence)} interval [{check.ci[0]:.4g}, {check.ci[1]:.4g}]"
                )
            resolved = check.resolution is not None and all_finite(check.resolution)
            lines.append(
                f"  {_check_label(check)}: {numbers} -> {check.verdict.upper()}"
                + (f", resolution {check.resolution:.3g}" if resolved else "")
                + f"  ({check.note})"
            )
        return "\n".join(lines)

    def write(self, out: str | Path) -> dict[str, Path]:
        """Write ``<out>/<stem>.{json,md,png}`` like the suite's studies (stem: the title with every character
        other than letters, digits, '.', '_' and '-' replaced by '-', so a title never names a folder)."""
        result = StudyResult(
            study=file_stem(self.title),
            profile="user",
            seed=self.seed,
            params=self.params,
            checks=self.checks,
            panels=self.panels,
            plots={"": list(self.plots)} if self.plots else {},
            elapsed_s=round(self.elapsed_s, 3),
            cpu_s=round(self.cpu_s, 3),
        )
        return write_study(result, Path(out))


def timed(check: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """``check`` with its outcome's wall and CPU seconds recorded (``runtime.cpu_meter``; the signature kept)."""

    @functools.wraps(check)
    def run(*args, **options) -> Outcome:
        start = time.perf_counter()
        with cpu_meter() as cpu:
            outcome = check(*args, **options)
            seconds = cpu.split()[0]
        return replace(outcome, elapsed_s=time.perf_counter() - start, cpu_s=seconds)

    return run


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
    evidence from the asymptotic regime (``convergence.statistics.settled_away``: the finest local order outside the
    band by its interval and not turning back towards it); where the ladder shows none, the order and limit checks
    are inconclusive and name deeper depths that would decide. Then the check **deepens itself**: it doubles the deepest
    depth, up to ``max_depth`` (default 4 x the deepest given; ``max_depth`` = the deepest given turns it off), and
    judges the longer ladder on as many paths as do the work of the last look (the paths it ended at, times the
    deepest depth asked over the new one: within the budget; same seed, a finer grid draws its Brownian path
    anew), until its checks decide. Every deeper ladder is one more look: the family-wise rate 1% is split over the
    staged looks and the deeper ladders alike (Bonferroni), so a true claim still fails at most 1% whichever stops.

    ``target``: the largest relative drift error ``same_limit`` may miss (its plateau is compared with the plateau
    that the claim with its drift x (1 + target) leaves, measured on the same paths). Looks at ``first``,
    2 ``first``, ... paths up to ``budget`` (``convergence.statistics.sequential``); ``paths``: one look at this
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
    _check_protocol("layer", layer, LayerMap)
    _check_protocol("sde", sde, LimitSDE)
    _check_pair(layer, sde, "check_strong_order", same_entry_law=False)
    if reference is not None:
        _check_protocol("reference", reference, LayerMap)
        _check_pair(layer, reference, "check_strong_order", same_entry_law=True)
    order = check_real("order", order, minimum=0.0, strict_minimum=True)
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    title = _check_title(title)
    depths = tuple(depths)
    ladders = _deeper_ladders(depths, max_depth)
    block = 128
    looks = _looks(paths, first, budget, block)
    key = (USER_KEY, 1)
    config = {"map": _name(layer), "sde": _name(sde)}
    drawn = _Drawn(depths, StrongData.extended)
    panels: list[Panel] = []

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = StrongDesign(
            depths=drawn.depths,
            horizon=horizon,
            paths=n,
            order=order,
            block_paths=_compute_block(looks, block),
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

    checks, stopped = _decide_deepening(look, looks, ladders, drawn)
    return Outcome(
        title,
        checks,
        panels,
        {
            "depths": list(drawn.depths),
            "depths_asked": list(depths),
            "horizon": horizon,
            "paths": stopped,
            "order": f"{'exactly' if exact else 'at least'} {order:g}",
            "target": target,
            "reference_factor": reference_factor,
            "reference": "Euler-Maruyama" if reference is None else _name(reference),
            "looks": list(looks.sizes),
            "stages": looks.describe() + _deeper_stages(looks, ladders),
        },
        seed,
    )


@timed
def check_weak_order(
    layer: UserLayerMap,
    observable: Observable,
    *,
    order: float = 1.0,
    depths: tuple[int, ...] = (4, 8, 16, 32, 64),
    horizon: float = 1.0,
    budget: int = 65_536,
    first: int = WEAK_BLOCK,
    paths: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "weak order",
) -> Outcome:
    """Coupled differences E f(X^L) - E f(X^{2L}) decay like h^order (pooled slope over significant levels). Looks at
    ``first``, 2 ``first``, ... paths up to ``budget``; ``paths``: one look at this fixed size instead."""
    _check_protocol("layer", layer, LayerMap)
    order = check_real("order", order, minimum=0.0, strict_minimum=True)
    title = _check_title(title)
    checked = _checked_observable(observable, layer)
    looks = _looks(paths, first, budget, WEAK_BLOCK)
    key = (USER_KEY, 2)
    config = {"map": _name(layer)}
    drawn = _Drawn()
    panels: list[Panel] = []

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=tuple(depths), horizon=horizon, paths=n, block_paths=_compute_block(looks, WEAK_BLOCK), order=order
        )
        values = drawn.extend(
            coupled_observables(layer, design, {"f": checked}, seed, key, initial, start=drawn.size), n
        )
        bad = first_nonfinite({f"f of {_name(layer)}": values["f"]}, [f"L={L}" for L in design.depths])
        if bad:
            panels.clear()
            return _nonfinite_checks(["weak_order"], bad, config)
        z = z_value(1, alpha)
        fits = weak_order(values, design.steps(), bootstrap_generator(seed, key), design.replicates, z)
        panels[:] = [Panel(title, "step h", "|coupled difference|", [fits["f"].series("|E f(L) - E f(2L)|", z)], order)]
        rate = _asymptotic_rate(order_check(fits, design, z, config, power), values["f"], design)
        return [_identifiable_rate(rate, fits["f"], z)]

    checks, stopped = decide_in_stages(look, looks)
    return Outcome(
        title,
        checks,
        panels,
        {
            "depths": list(depths),
            "horizon": horizon,
            "paths": stopped,
            "looks": list(looks.sizes),
            "stages": looks.describe(),
        },
        seed,
    )


@timed
def check_weak_limit(
    layer: UserLayerMap,
    sde: ClaimedSDE,
    observable: Observable,
    *,
    order: float = 1.0,
    depths: tuple[int, ...] = (4, 8, 16, 32, 64),
    horizon: float = 1.0,
    resolution: float = 0.05,
    budget: int = 65_536,
    first: int = WEAK_BLOCK,
    paths: int | None = None,
    reference_factor: int = 4,
    near_misses: tuple[float, ...] = (0.05, 0.2),
    max_depth: int | None = None,
    seed: int = 0,
    initial: InitialState = uniform_sphere,
    title: str = "weak limit",
) -> Outcome:
    """Does the law of ``layer`` converge to the law of the claimed ``sde``, and at which rate?

    On one Brownian path: the layer at every depth of the ladder (``weak_order``: coupled differences decay like
    h^order) and the claim integrated by Euler-Maruyama, another scheme, at h_ref = h_finest / ``reference_factor``
    and 2 h_ref (``claim_limit``: E f(layer) - E f(claim) within its interval plus both discretisation biases;
    ``convergence.experiments.weak``). Laws, not paths, are compared: a claim equal in law but driven differently
    passes (the strong check tells them apart). ``resolution``: claim_limit's target, in standard deviations of f.
    Where the order is undecided and every coupled difference lies below that target, the rate is not identifiable on
    this ladder: it is reported as a finding and claim_limit decides. ``near_misses``: for each eps, the claim with
    its drift x (1 + eps) is judged on the same paths; each row says whether the check rejects it (a finding beside
    the verdict: the smallest drift error this run can see). Looks at ``first``, 2 ``first``, ... paths up to
    ``budget`` (``convergence.statistics.sequential``); ``paths``: one look at this fixed size instead. Needs
    Gaussian noise (the claim shares the layer's Brownian path).

    Where the ladder is too coarse to decide (the weak order pre-asymptotic, or claim_limit's bias allowance, the
    finest coupled difference and the Euler reference's, above its target), the check **deepens itself** as
    ``check_strong_order`` does: the deepest depth doubled up to ``max_depth`` (default 4 x the deepest given; the
    deepest given turns it off), on as many paths as do the work of the last look, each deeper ladder one more look
    of the sequential design.
    """
    _check_protocol("layer", layer, LayerMap)
    _check_protocol("sde", sde, LimitSDE)
    _check_pair(layer, sde, "check_weak_limit", same_entry_law=False)
    if not layer.noise.brownian:
        raise ValueError(
            f"check_weak_limit needs Gaussian (Brownian) noise to drive the claim with the layer's own "
            f"increments, got law {layer.noise.law!r}; compare laws with check_same_weak_limit"
        )
    order = check_real("order", order, minimum=0.0, strict_minimum=True)
    reference_factor = check_int("reference_factor", reference_factor, minimum=2)
    if reference_factor % 2:
        raise ValueError(
            f"reference_factor must be even (the Euler reference runs at h_ref and 2 h_ref), got {reference_factor}"
        )
    resolution = check_real("resolution", resolution, minimum=0.0, strict_minimum=True)
    near_misses = tuple(check_real("near_misses", eps, minimum=-1.0, strict_minimum=True) for eps in near_misses)
    title = _check_title(title)
    checked = _checked_observable(observable, layer)
    looks = _looks(paths, first, budget, WEAK_BLOCK)
    depths = tuple(depths)
    ladders = _deeper_ladders(depths, max_depth)
    key = (USER_KEY, 5)
    claims = [sde, *(DriftScaled(sde, 1.0 + eps) for eps in near_misses)]
    config = {"map": _name(layer), "sde": _name(sde)}
    drawn = _Drawn(depths)
    panels: list[Panel] = []
    # a drift-free claim's near misses are the claim itself: claim_limit still compares laws, it is not blind
    drift_free = not np.any(sde.drift(np.asarray(initial(_probe_streams(seed, key), layer.tokens, layer.dim))))

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=drawn.depths,
            horizon=horizon,
            paths=n,
            block_paths=_compute_block(looks, WEAK_BLOCK),
            order=order,
        )
        layer_values, claim_values = drawn.extend(
            coupled_layer_and_claims(
                layer, claims, design, {"f": checked}, seed, key, initial, reference_factor, start=drawn.size
            ),
            n,
        )
        bad = first_nonfinite(
            {
                f"f of {_name(layer)}": layer_values["f"],
                "f of the claims (Euler at 2 h_ref, h_ref)": claim_values["f"].reshape(n, -1),
            },
            [f"L={L}" for L in design.depths],
        )
        if bad:
            panels.clear()
            return _nonfinite_checks(["weak_order", "claim_limit"], bad, config)
        z = z_value(2, alpha)  # the two claims (order and limit) share the family-wise rate
        fits = weak_order(layer_values, design.steps(), bootstrap_generator(seed, key), design.replicates, z)
        limit = claim_limit_check(
            layer_values["f"],
            claim_values["f"][:, 0],
            z,
            resolution,
            config,
            power=power,
            bias_span=2.0,
            order_floor=design.order - design.order_allowance,
        )
        # near misses whose Euler values equal the claim's on every path (the observable does not see them)
        unseen = [np.array_equal(claim_values["f"][:, k], claim_values["f"][:, 0]) for k in range(1, len(claims))]
        if unseen and all(unseen) and not drift_free and np.isfinite(limit.resolution):
            limit = blind(
                limit, "every drift near miss gives f the claim's values on every path: f does not see the drift"
            )
        rate = _identifiable_rate(
            _asymptotic_rate(order_check(fits, design, z, config, power), layer_values["f"], design),
            fits["f"],
            z,
            resolution * float(layer_values["f"][:, -1].std(ddof=1)),
        )
        checks = [rate, _limit_needs_rate(limit, rate, design)]
        for index, (eps, same) in enumerate(zip(near_misses, unseen), start=1):
            label = f"drift x (1 + {eps:g})"
            if same:  # e.g. a drift-free claim
                checks.append(
                    Check(
                        "rejects",
                        1.0,
                        0.0,
                        (0.0, 1.0),
                        INCONCLUSIVE,
                        {"check": "weak", "model": _name(layer), "mutant": label},
                        claim=False,
                        false_failure_rate=0.0,
                        note="skipped: on every path its Euler values equal the "
                        "claim's, so this near miss is the claim itself",
                    )
                )
                continue
            inner = claim_limit_check(
                layer_values["f"],
                claim_values["f"][:, index],
                z,
                resolution,
                config,
                power=power,
                bias_span=2.0,
                order_floor=design.order - design.order_allowance,
            )
            inner = _limit_needs_rate(inner, rate, design)  # a rejection needs the same proven bias bound as a fail
            checks.append(rejection_row("weak", _name(layer), label, eps, [inner], float("inf")))
        panels[:] = [Panel(title, "step h", "|coupled difference|", [fits["f"].series("|E f(L) - E f(2L)|", z)], order)]
        return checks

    checks, stopped = _decide_deepening(look, looks, ladders, drawn)
    params = {
        "depths": list(drawn.depths),
        "depths_asked": list(depths),
        "horizon": horizon,
        "paths": stopped,
        "reference_factor": reference_factor,
        "near_misses": list(near_misses),
        "resolution": resolution,
        "looks": list(looks.sizes),
        "stages": looks.describe() + _deeper_stages(looks, ladders),
    }
    return Outcome(title, checks, panels, params, seed)


def _looks(
    fixed: int | None,
    first: int,
    budget: int,
    block: int,
    names: tuple[str, str, str] = ("paths", "first", "budget"),
    minimum: int = 2,
) -> Looks:
    """Staged looks ``first``, 2 ``first``, ... up to ``budget`` (rounded up to a whole look unit), or one look at a
    ``fixed`` size. The unit (``Looks.unit``, the compute block of the run) is ``block``, or the largest divisor of
    it that ``first`` is a multiple of, so ``first`` is honoured as given; it must be a multiple of ``SEED_BLOCK``
    (numbers are seeded per seed block: a look cannot stop inside one). ``names``: the caller's names of the three
    parameters (for its error messages)."""
    if fixed is not None:
        return Looks(check_int(names[0], fixed, minimum=minimum), fixed)
    first = check_int(names[1], first, minimum=max(minimum, SEED_BLOCK))
    if first % SEED_BLOCK:
        raise ValueError(
            f"{names[1]} must be a multiple of {SEED_BLOCK} (paths are seeded in blocks of {SEED_BLOCK}: a look "
            f"extends whole blocks), got {first}; pass {names[0]}={first} for one look of exactly that size"
        )
    return Looks(first, check_int(names[2], budget, minimum=first), math.gcd(first, block))


def _spent(check: Check, factor: float) -> Check:
    """A claim check with its false-failure rate multiplied by ``factor`` (the looks it was spent over); a finding
    keeps its own."""
    return replace(check, false_failure_rate=min(1.0, factor * check.false_failure_rate)) if check.claim else check


def _deeper_ladders(depths: tuple[int, ...], max_depth: int | None) -> list[tuple[int, ...]]:
    """The ladders a strong check deepens to: ``depths`` with the deepest doubled, again and again, up to
    ``max_depth`` (default 4 x the deepest)."""
    deepest = check_int("depths", depths[-1], minimum=1)
    limit = 4 * deepest if max_depth is None else check_int("max_depth", max_depth, minimum=deepest)
    ladders, current = [], depths
    while 2 * current[-1] <= limit:
        current = (*current, 2 * current[-1])
        ladders.append(current)
    return ladders


def _decide_deepening(
    look: Callable[[int, float, float], list[Check]], looks: Looks, ladders: list[tuple[int, ...]], drawn: _Drawn
) -> tuple[list[Check], int]:
    """Staged looks on the ladder asked for (``drawn.depths``), then, while some check says a deeper ladder would
    decide and none fails (``wants_deeper``), each deeper ladder of ``ladders`` in turn. Every deeper ladder
    is one more look of the group-sequential design: with K staged looks and D deeper ladders each look is at level
    alpha / (K + D) and power 1 - beta / (K + D), so a true claim fails at most alpha and an effect at the target
    passes at most beta whichever look stops. A deeper ladder's paths do the work of the last look on the ladder
    asked for (within the budget). Returns the checks and the paths of the look that decided."""
    total = looks.count + len(ladders)
    share = looks.count / total  # the staged looks' share of the rates; each deeper ladder has 1 / total
    checks, stopped = decide_in_stages(look, looks, FAMILY_ALPHA * share, 1.0 - (1.0 - DETECTION_POWER) * share)
    checks = [_spent(c, total / looks.count) for c in checks]
    asked, last_look = drawn.depths, stopped
    for number, deeper in enumerate(ladders, start=looks.count + 1):
        if not wants_deeper(checks):
            break
        stopped = max(looks.unit, last_look * asked[-1] // deeper[-1] // looks.unit * looks.unit)
        drawn.restart(deeper)
        checks = [
            _spent(
                replace(c, note=f"{c.note}; deepened to depths {deeper} on {stopped} paths (look {number} of {total})"),
                total,
            )
            for c in look(stopped, FAMILY_ALPHA / total, 1.0 - (1.0 - DETECTION_POWER) / total)
        ]
    return checks, stopped


def _deeper_stages(looks: Looks, ladders: list[tuple[int, ...]]) -> str:
    """The deeper ladders' part of a deepening check's description of its looks."""
    total = looks.count + len(ladders)
    return (
        f"; with up to {len(ladders)} deeper ladders, {total} looks in all, each at level {FAMILY_ALPHA:g}/{total} and "
        f"power 1 - {1 - DETECTION_POWER:g}/{total}"
        if ladders
        else ""
    )


def _probe_streams(seed: int, key: tuple[int, ...]):
    """The streams of the first seed block of a check's paths (its initial states, to ask a claim where it starts)."""
    return PathStreams(seed, 0, SEED_BLOCK, key)


def _compute_block(looks: Looks, block: int) -> int:
    """The compute block of a staged run: its looks' unit (every look a whole number of blocks), or ``block`` for one
    look of a fixed size."""
    return looks.unit if looks.unit > 1 else block


class _Drawn:
    """A staged check's data so far: ``size`` paths on the ladder ``depths``, extended at each look by the next seeded
    blocks; ``restart`` moves it to a deeper ladder, whose paths are drawn anew (a finer grid, the same seed)."""

    def __init__(
        self, depths: tuple[int, ...] = (), extended: Callable = lambda data, more: concatenate_blocks([data, more])
    ) -> None:
        self.data, self.size, self._extended, self.depths = None, 0, extended, depths

    def restart(self, depths: tuple[int, ...]) -> None:
        self.data, self.size, self.depths = None, 0, depths

    def extend(self, more, size: int):
        """The data of paths 0 .. ``size`` - 1: these followed by ``more`` (paths ``self.size`` .. ``size`` - 1)."""
        self.data = more if self.data is None else self._extended(self.data, more)
        self.size = size
        return self.data


def _asymptotic_rate(rate: Check, values: np.ndarray, design: WeakDesign) -> Check:
    """A weak order below its band fails only on evidence from the asymptotic regime
    (``statistics.differences_settled_away``: the finest local order of the coupled differences below the band by its
    interval and not rising towards it); a ladder whose local orders still rise towards the rate is inconclusive and
    names a deeper one. ``values``: f per path and depth (paths, levels)."""
    if rate.verdict != FAIL or not all_finite(*rate.ci):
        return rate
    floor = design.order - design.order_allowance
    evidence = differences_settled_away(values, floor, confidence=rate.confidence)
    if evidence is not None:
        return replace(rate, note=rate.note + f"; asymptotic evidence: {evidence}")
    deeper = deeper_depths(design.depths)
    return replace(
        rate,
        verdict=INCONCLUSIVE,
        note=rate.note + "; the coupled differences are not shown to decay below the claimed rate at the finest "
        f"levels without turning back towards it (pre-asymptotic), so the order cannot carry a fail; {DEEPER}: depths "
        f"{deeper}",
    )


def _limit_needs_rate(limit: Check, rate: Check, design: WeakDesign) -> Check:
    """claim_limit's allowance bounds the layer's remaining bias by t(p) |Delta_last| for a weak order p of at least
    the order floor (0.85): its fail stands only where that order is not in doubt, i.e. weak_order passes, fails, or is
    a finding (every coupled difference below the target). Where weak_order is undecided (a pre-asymptotic or
    under-sampled ladder: the registry's hybrid model at depths 4, 8, 16, whose weak order at these depths is about
    0.1), the bound is unproven and the difference cannot carry a fail."""
    if limit.verdict != FAIL or not rate.claim or rate.verdict != INCONCLUSIVE or not all_finite(*limit.ci):
        return limit
    floor = design.order - design.order_allowance
    return replace(
        limit,
        verdict=INCONCLUSIVE,
        note=f"{limit.note}; the allowance bounds the layer's bias for a weak order of at least {floor:g}, which "
        f"weak_order does not show on this ladder, so the difference cannot carry a fail; {DEEPER}: depths "
        f"{deeper_depths(design.depths)}",
    )


def _identifiable_rate(rate: Check, fit, z: float, target: float | None = None) -> Check:
    """A weak order claim is a finding, not a claim, when the rate cannot be identified on the ladder at the check's
    target: every coupled difference within rounding (an exact step), or an undecided order whose every coupled
    difference lies, by its upper bound, below claim_limit's target (the whole depth dependence is smaller than the
    effect the limit is judged at; claim_limit, which allows the last difference as a bias, decides). Without a
    ``target`` (the weak order alone) only the first applies."""
    if fit.at_roundoff.all():
        return replace(rate, claim=False)
    if target is None:
        return rate
    upper = np.abs(fit.differences) + z * fit.standard_errors
    if rate.verdict == INCONCLUSIVE and np.all(upper <= target):
        return replace(
            rate,
            claim=False,
            note=rate.note + f"; order not identifiable at this target: every coupled "
            f"difference is below claim_limit's target {target:.3g} (largest upper bound "
            f"{upper.max():.3g}): a finding, claim_limit decides",
        )
    return rate


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
    _check_protocol("first", first, LayerMap)
    _check_protocol("second", second, LayerMap)
    _check_pair(first, second, "check_same_weak_limit")
    depth = check_int("depth", depth, minimum=4)
    if depth % 4:
        raise ValueError(f"depth must be a multiple of 4 (the ladder is depth/4, depth/2, depth), got {depth}")
    resolution = check_real("resolution", resolution, minimum=0.0, strict_minimum=True)
    title = _check_title(title)
    checked = _checked_observable(observable, first)
    looks = _looks(paths, first_look, budget, WEAK_BLOCK, ("paths", "first_look", "budget"))
    key = (USER_KEY, 3)
    config = {"first": _name(first), "second": _name(second), "depth": depth}
    drawn = _Drawn()

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = WeakDesign(
            depths=(depth // 4, depth // 2, depth),
            horizon=horizon,
            paths=n,
            block_paths=_compute_block(looks, WEAK_BLOCK),
        )
        used = design.depths[1:]  # the ladder's finest two levels (same Brownian path as the whole ladder)
        a, b = drawn.extend(
            tuple(
                coupled_observables(m, design, {"f": checked}, seed, key, initial, used, start=drawn.size)["f"]
                for m in (first, second)
            ),
            n,
        )
        bad = first_nonfinite({f"f of {_name(first)}": a, f"f of {_name(second)}": b}, [f"L={L}" for L in used])
        if bad:
            return _nonfinite_checks(["same_weak_limit"], bad, config)
        extrapolated = 2 * (a[:, -1] - b[:, -1]) - (a[:, -2] - b[:, -2])
        mean, se = float(extrapolated.mean()), float(extrapolated.std(ddof=1) / np.sqrt(n))
        z = z_value(1, alpha)
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
        return [check]

    checks, stopped = decide_in_stages(look, looks)
    return Outcome(
        title,
        checks,
        [],
        {"depth": depth, "horizon": horizon, "paths": stopped, "looks": list(looks.sizes), "stages": looks.describe()},
        seed,
    )


def _check_label(check: Check) -> str:
    """A check's name with the configuration that tells it apart (state, observable), e.g.
    ``drift_scale [state=uniform]``."""
    where = ", ".join(f"{k}={v}" for k, v in check.config.items() if k not in ("map", "sde", "first", "second"))
    return f"{check.name} [{where}]" if where else check.name


def _check_title(title: object) -> str:
    """A non-empty title (reports are written to a file name made from it, see ``Outcome.write``)."""
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"title must be a non-empty string, got {title!r}")
    return title


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
            f"{_name(layer)}: the step at dW = 0, h = 0 moves the state {name!r} and then moves its "
            "image again, so the map has no resting state near it; "
            + (biases or "give states as arrays (name -> (tokens, dim)) where the map lives")
        )
    return image[0]


def resolve_states(
    tokens: int, dim: int, states: tuple[str, ...] | dict[str, np.ndarray], seed: int, key: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """The states a check is judged at: ``states`` names ``convergence.experiments.local.STATES`` (each drawn from
    ``seed`` and its own name) or maps names to arrays (tokens, dim), checked against that shape."""
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
    rng = np.random.default_rng(0)
    for name, x in states.items():
        dw = PROBE_STEP**0.5 * sde.noise.scale * sde.noise.standard(rng, (2, *sde.noise.shape))
        moved = np.asarray(sde.diffusion(np.broadcast_to(x, (2, *x.shape)).copy(), dw))
        if not np.any(moved):
            raise ValueError(
                f"sde: the claimed diffusion of {_name(sde)} is identically zero at state {name!r} (noise scale "
                f"{sde.noise.scale:g}): the local check compares the one-step covariance with the claim's, relative "
                "to it, so it decides SDE claims with noise only; give the claim its noise, or compare a deterministic "
                "limit pathwise (check_strong_order)"
            )


@timed
def check_local_consistency(
    layer: UserLayerMap,
    sde: ClaimedSDE,
    *,
    states: tuple[str, ...] | dict[str, np.ndarray] = ("uniform", "merged", "antipodal", "near merged"),
    step: float = 1.0 / 64,
    target: float = 0.01,
    budget: int = 262_144,
    first: int = 4096,
    samples: int | None = None,
    control: str = "layer",
    seed: int = 0,
    title: str = "local consistency",
) -> Outcome:
    """One layer step's conditional moments against the claim (``convergence.experiments.local``) at each state,
    sampled in stages until the checks decide (``convergence.statistics.sequential``).

    ``control``: the drift's variance reduction. "layer" (default): the layer's own first-order noise response is
    removed by evaluating each step at dW and at -dW (antithetic: the half-sum is the increment's even part, the
    drift's estimate, with no claim in it), so a claim equal in law to the layer's limit but driven differently
    decides at the cost of one that is pathwise equal; the claim's noise enters only the covariance comparison.
    "claim": the claimed diffusion on the same noise subtracted (one step per sample; noisy unless the claim is
    pathwise the layer's). Every noise law here is symmetric, so -dW has the law of dW. Where a state's drift is
    small beside its noise, its drift_scale target is in units of a typical component (docs/checks.md).

    ``states``: names of ``convergence.experiments.local.STATES`` (drawn on the unit sphere; for a map that lives
    elsewhere, moved there by one step without noise, ``where_it_lives``) or a mapping name -> array (tokens, d),
    taken as given; ``target``:
    the pooled checks' largest resolution (relative coefficient error) that still decides (a single state's is
    twice that, a max-z check's five times that). Looks at ``first``, 2 ``first``, ... samples per state and step,
    up to ``budget``: fail as soon as an interval excludes its allowance, pass as soon as every check passes at its
    target, inconclusive at the budget
    (saying how many samples would decide). ``samples``: one look at this fixed size instead. Each check's
    resolution is reported; the family-wise false-failure rate over all checks and looks is 1%.
    """
    _check_protocol("layer", layer, LayerMap)
    _check_protocol("sde", sde, LimitSDE)
    _check_pair(layer, sde, "check_local_consistency", same_entry_law=False)
    title = _check_title(title)
    target = check_real("target", target, minimum=0.0, strict_minimum=True)
    control = check_choice("control", control, CONTROLS)
    looks = _looks(samples, first, budget, SAMPLE_BLOCK, ("samples", "first", "budget"), 64)
    key = (USER_KEY, 4)
    chosen = resolve_states(layer.tokens, layer.dim, states, seed, key)
    if not isinstance(states, dict):
        chosen = {name: where_it_lives(layer, x, name) for name, x in chosen.items()}
    _check_has_noise(sde, chosen)
    config = {"map": _name(layer), "sde": _name(sde)}
    drawn: dict = {}

    def look(n: int, alpha: float, power: float) -> list[Check]:
        design = LocalDesign(
            step=step,
            samples=n,
            target=target,
            state_target=2 * target,
            power=power,
            block_paths=_compute_block(looks, SAMPLE_BLOCK),
            control=control,
            for_users=True,
        )
        return local_checks(layer, sde, chosen, design, seed, key, config, alpha, drawn)

    checks, stopped = decide_in_stages(look, looks)
    return Outcome(
        title,
        checks,
        [],
        plots=local_plots(checks),
        params={
            "states": list(chosen),
            "step": step,
            "samples": stopped,
            "target": target,
            "control": control,
            "looks": list(looks.sizes),
            "stages": looks.describe(),
        },
        seed=seed,
    )
