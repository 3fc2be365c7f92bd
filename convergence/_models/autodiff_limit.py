"""The Ito limit of a torch layer map, by automatic differentiation of its step at h = 0.

A layer x -> F(x, dW, h) whose increment dW has covariance C h (C = s^2 I for the packed increment of scale s)
and whose change vanishes at h = 0 (F(x, 0, 0) = x) expands as

    F(x, dW, h) - x = d_h F h + D_W F dW + (1/2) dW^T D_W^2 F dW + o(h),

so its Ito limit is dx = b(x) dt + G(x) dW with

    b(x) = d_h F(x, 0, 0) + (1/2) sum_jk C_jk d^2 F / dW_j dW_k (x, 0, 0),    G(x) dW = D_W F(x, 0, 0) dW

(the moments of one step: E[F - x] = b h + o(h), Cov[F - x] = G C G^T h + o(h); source: the Kramers-Moyal
expansion of a Markov chain with small steps, as ``verify.one_step_limit`` derives it symbolically). Here every
derivative is taken by ``torch.func`` at the state asked for: G dW and d_h F are forward-mode derivatives (``jvp``),
exact to rounding and linear in dW; the trace of the Hessian is the sum of the second directional derivatives
d^2/dt^2 F(x, t v, 0) along the p basis directions v of dW, each a jvp of a jvp (forward over forward, batched with
``vmap``): about 4 p forward passes of the block per state, no Monte Carlo.

Forward over forward needs every operation's forward-mode rule to be right at second order. torch's rule for
``layer_norm`` is right to first order only (its nested second derivative is off by O(1): 0.88 on the post-LN
example; pytorch/pytorch#196700, umbrella #198017; seen on torch 2.13), so ``layer_norm`` and ``rms_norm`` are
computed from their definitions (mean, variance, rsqrt) while the curvature is taken
(``_composite_norms_mode``). Any other operation may have such a rule: at up to three of the first states a limit
is asked for, the forward curvature is compared with reverse over reverse (right for all of them,
``silu_backward``'s missing forward rule included, but about n d times the work: 57 times slower on the Hugging Face
Llama layer of ``examples/hf_blocks.py``), and a block on which they differ (beyond rounding: 1024 eps of the lowest
precision the block computes in, at least 1e-9), or whose forward curvature raises, keeps reverse over reverse, with
a warning naming the difference. A heuristic: a rule wrong only away from the compared states goes unseen (the
module's tests compare the result with limits derived by hand).

The expansion needs a step twice differentiable in dW near 0. A kink within an increment's reach (ReLU, abs or a max
at its switching point, a mask that changes) makes torch return a one-sided derivative (ReLU'(0) = 0) while the
step's increments have an O(sqrt(h)) mean and no SDE limit. So at up to three states of every call, central
differences along seeded directions of dW (steps s/8, s/32, s/128 of the noise's scale s) are compared with the
automatic first and second derivatives; a block on which they part is refused, naming the operations with kinks it
calls and the module each runs in (``kinked_operations``).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from .._runtime import random_stream
from .activation_limit import ActivationBlock, activation_limit
from .covariance_limits import CovarianceSDE
from .noise import CommonNoise
from .protocols import Wrapper
from .torch_block import TorchBlockLayer, one_thread

# A step must return its input at dW = 0, h = 0 to this relative accuracy (else it has no diffusion limit)
RESTING_TOLERANCE = 1e-12
BASIS_CHUNK = 64  # basis directions of dW per batched pass (memory: paths x chunk x the block's activations)
# Forward and reverse curvature agree to this relative accuracy on a block whose forward rules are right
CURVATURE_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class AutodiffLimit(Wrapper):
    """The Ito limit (a ``LimitSDE``) of a torch layer map, derived from its step (module docstring)."""

    model: TorchBlockLayer
    name: str = "limit by automatic differentiation"
    # the curvature's mode, once decided (``_mode``)
    _modes: list = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def noise(self) -> CommonNoise:
        return self.model.noise

    def drift(self, x: np.ndarray) -> np.ndarray:
        """b(x) = d_h F + (1/2) s^2 sum_j d^2 F / dW_j^2 at (x, 0, 0), per path: x (paths, n, d) -> (paths, n, d)."""
        import torch
        from torch.func import jvp, vmap

        step, size, variance = self.model.torch_step, self.noise.shape[0], self.noise.scale**2
        zero_w, zero_h, one_h = (
            torch.zeros(size, dtype=torch.float64),
            torch.zeros((), dtype=torch.float64),
            torch.ones((), dtype=torch.float64),
        )
        states = torch.from_numpy(self._resting(x))
        if not states.shape[0]:
            return states.numpy().copy()
        with one_thread(torch):
            mode = self._mode(step, size, states)
            self._smooth(states, mode)
            curvature = _curvature(step, size, states, mode)
            rate = vmap(lambda xp: jvp(lambda hh: step(xp, zero_w, hh), (zero_h,), (one_h,))[1])(states)
            return (rate + 0.5 * variance * curvature).numpy()

    def _mode(self, step, size: int, states) -> str:
        """The curvature's mode: forward, unless it differs from reverse over reverse at up to three of the first
        states asked for (first, middle, last), or raises: then reverse, with a warning (module docstring). Decided
        once per copy of the limit (a copy sent to a dask worker decides on its own first call); while every compared
        curvature is 0 (nothing to tell the modes apart) it stays undecided and this call uses reverse mode.
        A heuristic: an operation whose forward rule is wrong only away from the compared states goes unseen."""
        if self._modes:
            return self._modes[0]
        probe = states[sorted({0, states.shape[0] // 2, states.shape[0] - 1})]
        reverse = _curvature(step, size, probe, "reverse")
        scale = reverse.flatten(1).abs().max(dim=1).values
        if not bool((scale > 0).any()):
            return "reverse"
        try:
            forward = _curvature(step, size, probe, "forward")
            error = (forward - reverse).flatten(1).abs().max(dim=1).values
            difference = float((error / scale.clamp(min=1e-300)).max())
            tolerance = self._tolerance()
            problem = (
                None if difference <= tolerance else f"differs by {difference:.3g} (relative; allowed {tolerance:.3g})"
            )
        except Exception as error:  # an operation without a forward-mode rule at second order
            problem = f"raised {type(error).__name__}: {error}"
        if problem is not None:
            warnings.warn(
                f"{self.model.name}: the drift's forward-mode curvature {problem} from reverse over reverse at the "
                "first states; using reverse over reverse (right, but about n d times slower)",
                RuntimeWarning,
                stacklevel=3,
            )
        self._modes.append("forward" if problem is None else "reverse")
        return self._modes[0]

    def _smooth(self, states, mode: str) -> None:
        """Refuse a block that is not twice differentiable in the noise at up to three of ``states`` (first, middle,
        last): along ``SMOOTHNESS_DIRECTIONS`` seeded unit directions v of dW, the central differences
        (F(e v) - F(-e v)) / (2 e) and (F(e v) + F(-e v) - 2 F(0)) / e^2 at the steps e = s / 8, s / 32, s / 128
        (s the noise's scale: the reach of an increment at h = 1/64) must agree with the automatic derivatives
        D_W F v and d^2/dt^2 F(t v) (in the curvature's ``mode``; their O(e^2) error and rounding allowed). At a
        kink within that reach (ReLU, abs, max or a mask switching) the first difference stays O(1) away from the
        derivative torch returns and the second grows like 1/e: the block has no SDE limit there (its increments
        have an O(sqrt(h)) mean), and the error names the operations with kinks that the block calls and where
        (``kinked_operations``)."""
        problem = _smoothness_problem(
            self.model.torch_step, self.noise.shape[0], self.noise.scale, states, mode, self._epsilon()
        )
        if problem is not None:
            found = kinked_operations(self.model)
            raise ValueError(
                f"{self.model.name}: derive_limit cannot take this block: its step is not twice differentiable in the "
                f"noise at the states asked for ({problem}), so it has no diffusion limit there"
                + (f"; operations with kinks it calls: {found}" if found else "")
            )

    def _epsilon(self) -> float:
        """The machine epsilon of the lowest precision the block computes in (float64's when none is lower)."""
        return max(float(np.finfo(np.float64).eps), self.model.lowest_precision_eps)

    def _tolerance(self) -> float:
        """``CURVATURE_TOLERANCE``, or 1024 times the machine epsilon of the lowest precision the block computes in
        (two right modes agree only to that rounding when the block computes in float32)."""
        return max(CURVATURE_TOLERANCE, 1024 * self.model.lowest_precision_eps)

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        """G(x) dW = D_W F(x, 0, 0) dW per path: x (paths, n, d), dw (paths, total) -> (paths, n, d)."""
        import torch
        from torch.func import jvp, vmap

        step, size = self.model.torch_step, self.noise.shape[0]
        zero_w, zero_h = torch.zeros(size, dtype=torch.float64), torch.zeros((), dtype=torch.float64)

        def one_path(xp, dwp):
            return jvp(lambda u: step(xp, u, zero_h), (zero_w,), (dwp,))[1]

        states = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
        with one_thread(torch):
            if states.shape[0]:
                self._smooth(states, self._mode(step, size, states))
            out = vmap(one_path)(states, torch.from_numpy(np.ascontiguousarray(dw, dtype=np.float64)))
        return out.numpy()

    def _resting(self, x: np.ndarray) -> np.ndarray:
        """``x`` as float64, after checking that the step leaves it in place at dW = 0, h = 0 (a step that moves x
        by O(1) has no diffusion limit: its change does not vanish with h)."""
        states = np.ascontiguousarray(x, dtype=np.float64)
        change = zero_noise_step(self.model, states)[1]
        if not change <= RESTING_TOLERANCE:
            biases = self.model.biases_moving_the_state(states)
            raise ValueError(
                f"{self.model.name}: the step's change at dW = 0, h = 0 must vanish (F(x, 0, 0) = x) for "
                f"a diffusion limit to exist; got max |F(x, 0, 0) - x| / max(1, |x|) = {change:.3g}: "
                + (biases or "is the state where the block lives, e.g. on its LayerNorm sphere?")
            )
        return states


SMOOTHNESS_DIRECTIONS = 4  # seeded directions of dW along which the block's smoothness is checked
SMOOTHNESS_STEPS = (1 / 8, 1 / 32, 1 / 128)  # finite-difference steps, in units of the noise's scale
FIRST_TOLERANCE, SECOND_TOLERANCE = 1e-2, 5e-2  # relative agreement of the differences with the derivatives
KINKS = frozenset(
    "relu relu_ relu6 abs absolute max maximum min minimum amax amin clamp clamp_ clip where argmax argmin sign "
    "floor ceil round trunc hardtanh leaky_relu threshold heaviside masked_fill gt lt ge le".split()
)


def _smoothness_problem(
    step, size: int, scale: float, states, mode: str = "forward", eps: float = float(np.finfo(np.float64).eps)
) -> str | None:
    """None when the block's step is twice differentiable in the noise at up to three of ``states`` (as
    ``AutodiffLimit._smooth`` says), else a sentence saying where the differences and the derivatives part."""
    import torch
    from torch.func import jvp, vmap

    probe = states[sorted({0, states.shape[0] // 2, states.shape[0] - 1})]
    zero_h = torch.zeros((), dtype=torch.float64)
    zero_w = torch.zeros(size, dtype=torch.float64)
    directions = torch.from_numpy(random_stream(0).standard_normal((SMOOTHNESS_DIRECTIONS, size)))
    directions /= directions.norm(dim=1, keepdim=True)

    def at(xp, w):
        return step(xp, w, zero_h)

    for x in probe:
        base = at(x, zero_w)
        size_f = float(base.abs().max()) + 1.0
        first = vmap(lambda v: jvp(lambda w: at(x, w), (zero_w,), (v,))[1])(directions)
        second = _curvature(step, size, x[None], mode, directions, summed=False)[0]
        for factor in SMOOTHNESS_STEPS:
            e = factor * max(scale, 1e-12)
            plus = vmap(lambda v: at(x, e * v))(directions)
            minus = vmap(lambda v: at(x, -e * v))(directions)
            d1 = (plus - minus) / (2 * e)
            d2 = (plus + minus - 2 * base) / e**2
            rounding1, rounding2 = 64 * eps * size_f / e, 64 * eps * size_f / e**2
            gap1 = float((d1 - first).abs().max())
            gap2 = float((d2 - second).abs().max())
            size1 = float(torch.maximum(d1.abs(), first.abs()).max())
            size2 = float(torch.maximum(d2.abs(), second.abs()).max())
            if gap1 > FIRST_TOLERANCE * size1 + rounding1:
                return (
                    f"along a direction of dW the first difference at step {e:.3g} differs from the derivative by "
                    f"{gap1:.3g} (of {size1:.3g})"
                )
            if gap2 > SECOND_TOLERANCE * size2 + rounding2:
                return (
                    f"along a direction of dW the second difference at step {e:.3g} differs from the second "
                    f"derivative by {gap2:.3g} (of {size2:.3g})"
                )
    return None


def kinked_operations(layer: TorchBlockLayer) -> str:
    """The operations with kinks (``KINKS``: ReLU, abs, max, a mask, ...) that one forward pass of the block calls, each
    with the path of the module it runs in, e.g. ``relu at mlp.act``; empty when none is seen."""
    import torch
    from torch.overrides import TorchFunctionMode

    block, where, seen = layer.template, [], []
    hooks = []
    for path, module in block.named_modules():
        hooks.append(module.register_forward_pre_hook(lambda m, a, path=path: where.append(path or "the block")))
        hooks.append(module.register_forward_hook(lambda m, a, o: where.pop()))

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", str(func)).removeprefix("__").removesuffix("__")
            if name in KINKS:
                entry = f"{name} at {where[-1] if where else 'the block'}"
                if entry not in seen:
                    seen.append(entry)
            return func(*args, **(kwargs or {}))

    x = torch.from_numpy(np.linspace(-1.0, 1.0, layer.tokens * layer.dim).reshape(1, layer.tokens, layer.dim))
    try:
        with torch.no_grad(), Record():
            block(x)
    except Exception:  # a block that cannot run alone (a library layer): the differences' sentence stands alone
        pass
    finally:
        for hook in hooks:
            hook.remove()
    return ", ".join(seen)


def _curvature(step, size: int, states, mode: str, basis=None, summed: bool = True):
    """sum_j d^2/dt^2 F(x, t e_j, 0) at t = 0 for each state x of ``states`` (paths, n, d): forward over forward
    (under ``_composite_norms_mode``) or reverse over reverse (module docstring). ``basis``: the directions e_j
    (rows; the unit basis of dW by default); ``summed=False``: each direction's second derivative, shaped (paths,
    directions, n, d)."""
    import torch
    from torch.func import jacrev, jvp, vmap

    zero_w, zero_h = torch.zeros(size, dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    basis = torch.eye(size, dtype=torch.float64) if basis is None else basis

    def one_path(xp):
        def along(v):
            if mode == "forward":
                return jvp(lambda w: jvp(lambda u: step(xp, u, zero_h), (w,), (v,))[1], (zero_w,), (v,))[1]
            return jacrev(jacrev(lambda t: step(xp, t * v, zero_h)))(zero_h)

        values = vmap(along, chunk_size=BASIS_CHUNK)(basis)
        return values.sum(dim=0) if summed else values

    if mode == "forward":  # with grad mode on, silu's forward rule is itself differentiable (its no-grad one is not)
        with torch.enable_grad(), _composite_norms_mode()():
            return vmap(one_path)(states)
    return vmap(one_path)(states)


@cache
def _composite_norms_mode() -> type:
    """The class of a torch function mode computing ``layer_norm`` and ``rms_norm`` from their definitions (their
    forward-mode rules are wrong at second order, module docstring); built once."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
        dims = tuple(range(-len(normalized_shape), 0))
        centred = x - x.mean(dim=dims, keepdim=True)
        y = centred * torch.rsqrt((centred * centred).mean(dim=dims, keepdim=True) + eps)
        y = y if weight is None else y * weight
        return y if bias is None else y + bias

    def rms_norm(x, normalized_shape, weight=None, eps=None):
        dims = tuple(range(-len(normalized_shape), 0))
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        y = x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + eps)
        return y if weight is None else y * weight

    composite = {F.layer_norm: layer_norm, F.rms_norm: rms_norm}

    class Composite(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return composite.get(func, func)(*args, **(kwargs or {}))

    return Composite


# each layer's curvature mode once decided (``AutodiffLimit._mode``), so that it is decided once per layer and process
# (a copy sent to a dask worker is another key); the value holds no reference to its key
_MODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def noise_quadratic(layer: TorchBlockLayer, x: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The layer's own second-order noise response at state ``x`` (n, d), centred: for each standard draw E (rows of
    ``draws``, packed, entries of mean 0 and variance 1) q(E) - E[q], with q(E) = (1/2) d^2/dt^2 F(x, t s E, 0) at
    t = 0 (s the noise's scale) and E[q] = (s^2 / 2) sum_j d^2/dt^2 F(x, t e_j, 0) over the unit basis (E[E^T H E] =
    tr H for any such entries). Shaped (draws, n d).

    A control variate of exactly mean 0 for the even part of one step, (F(x, dW, h) + F(x, -dW, h)) / 2 - x =
    h d_h F + h q(E) + O(h^2) with dW = s sqrt(h) E: subtracting h (q(E) - E[q]) leaves the O(h) fluctuations only
    (``convergence._experiments.local``). The mean is exact whatever rules autodiff applies at a kink, since q is the
    same quadratic form in E on both sides. Curvature in forward mode unless its rules are wrong at second order
    (``AutodiffLimit._mode``, decided once per layer)."""
    import torch

    limit = AutodiffLimit(layer)
    limit._modes.extend(_MODES.get(layer, ()))
    size, variance = layer.noise.shape[0], layer.noise.scale**2
    state = torch.from_numpy(np.ascontiguousarray(x[None], dtype=np.float64))
    directions = torch.from_numpy(np.ascontiguousarray(draws, dtype=np.float64))
    step = layer.torch_step
    with one_thread(torch):
        mode = limit._mode(step, size, state)
        _MODES[layer] = list(limit._modes)
        mean = 0.5 * variance * _curvature(step, size, state, mode)[0]
        per_draw = 0.5 * variance * _curvature(step, size, state, mode, directions, summed=False)[0]
    return (per_draw - mean).reshape(draws.shape[0], -1).numpy()


def zero_noise_step(layer, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The layer's step without noise at h = 0, y = F(x, 0, 0), for states x (paths, n, d), and its largest change
    max |y - x| / max(1, max |x|) (0 where x is a resting state; ``RESTING_TOLERANCE`` allows rounding)."""
    moved = np.asarray(layer.layer(x, np.zeros((x.shape[0], *layer.noise.shape)), 0.0), dtype=np.float64)
    if not x.size:
        return moved, 0.0
    return moved, float(np.max(np.abs(moved - x))) / max(1.0, float(np.max(np.abs(x))))


def derive_limit(
    layer: TorchBlockLayer | ActivationBlock, name: str = "limit by automatic differentiation"
) -> AutodiffLimit | CovarianceSDE:
    """The Ito limit of a torch layer map (``convergence.torch_layer_map``), by automatic differentiation of its step
    (module ``convergence._models.autodiff_limit``): a ``LimitSDE`` every check accepts as a claim; or the covariance
    SDE of a width-indexed ``activation_block`` (``convergence._models.activation_limit``), a ``covariance_sde``."""
    if isinstance(layer, ActivationBlock):
        return activation_limit(layer, name)
    if not isinstance(layer, TorchBlockLayer):
        raise TypeError(
            f"layer must be a torch layer map (convergence.torch_layer_map) or a width-indexed activation_block, got "
            f"{type(layer).__name__}; a numpy map's limit is derived symbolically (verify.one_step_limit), a shipped "
            "width block's by covariance_limit"
        )
    if layer.differentiation_problem:
        raise ValueError(f"derive_limit cannot take {layer.name}: {layer.differentiation_problem}")
    return AutodiffLimit(layer, name)
