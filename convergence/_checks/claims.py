"""What a user states: a layer map ``step(x, dw, h) -> x_next`` on float64 arrays shaped (paths, tokens, d), with
``dw`` one layer's noise shaped (paths, *noise.shape) (``layer_map``); the law of that noise (``matrix_noise``,
``field_noise``, ``scalar_noise``, ``per_token_noise``, or several at once, ``joint_noise``: the increment over a step
h is ``scale * sqrt(h) * E``, E i.i.d. of mean 0 and variance 1); and the limit SDE claimed for it,
``dx = drift(x) dt + diffusion(x, dW)``, as numpy callables (``limit_sde``; Ito, or Stratonovich read in Ito form),
with its near misses (``scaled_drift``, ``scaled_diffusion``). Each function is called once when it is wrapped, so a
shape that does not match the noise is reported then, naming the shapes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verify._common import check_choice, check_int, check_real

from .._experiments import (
    DiffusionScaled,
    DriftScaled,
)
from .._models import (
    CommonNoise,
    JointNoise,
    LimitSDE,
    joint_noise,
)
from .._models.ito_correction import ito_correction
from .._runtime import random_stream
from .arguments import check_protocol

Step = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


Observable = Callable[[np.ndarray], np.ndarray]


PROBE_STEP = 1.0 / 64


FORMS = ("ito", "stratonovich")  # how a claim's drift is read


NUMPY_SHAPE_ERROR = re.compile(r"broadcast|core dimension|not aligned|cannot reshape|shapes? \(")


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
    correction of ``convergence._models.ito_correction`` added."""

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


def checked_observable(observable: Observable, layer: UserLayerMap) -> Observable:
    """``observable`` with its output checked: one real value per path, shape (paths,). It is called once here, on
    two paths of ``layer``'s shape (``_probe``'s tokens), so a wrong shape or dtype is reported before any path is
    simulated."""
    if not callable(observable):
        raise TypeError(f"observable must be callable f(x) -> (paths,), got {type(observable).__name__}")

    def checked(x: np.ndarray) -> np.ndarray:
        return _checked_array("observable f(x)", observable(x), x.shape[:1])

    _probe(layer, "the observable f(x)", lambda x, dw: checked(x))
    return checked


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
    added to the drift, ``convergence._models.ito_correction``), and its name says so."""
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
    check_protocol("claim", claim, LimitSDE)
    return DriftScaled(claim, _finite_factor(factor))


def scaled_diffusion(claim: LimitSDE, factor: float) -> LimitSDE:
    """The near miss ``dx = b(x) dt + factor g(x) dW`` of a claim ``dx = b(x) dt + g(x) dW``: its noise variance
    x ``factor``^2 (``sqrt(1.05)`` for a 5% variance error), the drift kept. Works for every noise kind, a joint noise
    included (the scaled diffusion receives the increment as the claim's own does). ``factor``: a finite real
    number."""
    check_protocol("claim", claim, LimitSDE)
    return DiffusionScaled(claim, _finite_factor(factor))


def _finite_factor(factor: object) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)):
        raise TypeError(f"factor must be a real number, got {type(factor).__name__}")
    if not np.isfinite(factor):
        raise ValueError(f"factor must be finite, got {factor}")
    return float(factor)


def _probe(obj: UserLayerMap | ClaimedSDE, what: str, call: Callable) -> None:
    """Call a user's function once at construction, on two paths of tokens in general position and a random
    increment of the declared noise, so that a dimension that does not match the noise, or a wrong output shape
    (numpy's shape errors are ValueErrors), is reported when the map is built, naming the shapes, rather than deep
    inside a study. Other exceptions are left to the run, which reports them with the step h."""
    rng = random_stream(0)
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
