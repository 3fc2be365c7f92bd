"""A PyTorch block as a layer map: fresh random weights at every layer, batched over paths with ``torch.func``.

A user hands a factory of ``torch.nn.Module`` blocks mapping tokens (batch, n, d) to (batch, n, d), e.g. a post-LN
``torch.nn.TransformerEncoderLayer``, and names the parameters that are the layer's noise, with the standard
deviation ``sigma`` of their entries per unit time. At every layer each path gets fresh Gaussian entries
``sigma sqrt(h) z`` for those parameters (the suite's seeded increments, a ``JointNoise`` of one part per parameter,
so depth ladders share one Brownian path); every other parameter keeps the value of one template block, built
once under the seed ``template_seed`` (a fixed Q and K, as in model F). Naming a residual branch's output weights
scales that branch by sqrt(h): the branch ``W_out f(x)`` is linear in ``W_out``, whose increment has standard
deviation ``sigma sqrt(h)``. The block is evaluated with ``torch.func.functional_call`` under ``torch.func.vmap``
over paths, in float64 on the CPU, without gradients, on one thread: torch's kernels may split a sum differently
with another thread count, and a dask worker has one thread while the main process has one per core, so the
numbers would depend on the scheduler. (They can also depend on the batch: the suite always hands a layer map the
same compute block of paths, ``convergence._runtime.blocks``.)

torch is optional (``pip install -e ".[torch]"``); it is imported when a block is first run.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verify._common import check_int, check_real

from .._runtime import random_stream
from .noise import CommonNoise, JointNoise, joint_noise

_ONE_THREAD = threading.RLock()  # re-entrant: a block held by one_thread may build a cached part that takes it too


@contextmanager
def one_thread(torch):
    """Run torch on one thread, without gradients (torch's thread count is per process: one block at a time sets
    and restores it), quiet about vmap's path-by-path fallback for attention kernels (slower, same numbers) and
    torch's own deprecation notice when forward-mode AD first loads."""
    with _ONE_THREAD:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="There is a performance drop", category=UserWarning)
                # torch's forward-mode AD loads its jvp decompositions through torch.jit.script, deprecated in 2.13
                warnings.filterwarnings(
                    "ignore", message="`torch.jit.script` is deprecated", category=DeprecationWarning
                )
                yield
        finally:
            torch.set_num_threads(threads)


@dataclass(frozen=True, eq=False)
class TorchBlockLayer:
    """A layer map (``convergence.LayerMap``) given by a factory of torch blocks and the names of its noise
    parameters (module docstring). ``noise_parameters`` maps a parameter's name (as in ``named_parameters()``) to
    the standard deviation of its entries per unit time."""

    factory: Callable
    tokens: int
    dim: int
    noise_parameters: tuple[tuple[str, float], ...]
    template_seed: int = 0
    name: str = "torch block"
    zero_biases: bool = False  # every bias that is not noise set to 0 (``biases_moving_the_state``)

    @cached_property
    def template(self):
        """The template block (float64, eval mode): the values of every parameter that is not noise; with
        ``zero_biases``, every parameter named ``*bias`` that is not noise is 0."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.template_seed)
            block = self.factory()
        if not isinstance(block, torch.nn.Module):
            raise TypeError(f"{self.name}: factory() must return a torch.nn.Module, got {type(block).__name__}")
        block = block.double().eval()
        if self.zero_biases:
            noise = {k for k, _ in self.noise_parameters}
            with torch.no_grad():
                for key, parameter in block.named_parameters():
                    if key.rsplit(".", 1)[-1] == "bias" and key not in noise:
                        parameter.zero_()
        return block

    def biases_moving_the_state(self, x: np.ndarray) -> str:
        """Why the step moves states ``x`` (paths, n, d) at dW = 0, h = 0, when biases are the reason: the non-zero
        biases (not noise) with which zeroed the step rests, each with how far zeroing it alone reduces the change,
        as a sentence naming them and the fix; empty when zeroing them does not make it rest (or there are none).
        A bias on a residual branch (``nn.Linear``'s default initialisation draws one) moves the state by O(1) at
        every layer, so such a block has no diffusion limit."""
        import torch
        from torch.func import vmap

        noise = {k for k, _ in self.noise_parameters}
        parameters = {k: v.detach() for k, v in self.template.named_parameters() if k not in noise}
        biases = [k for k, v in parameters.items() if k.rsplit(".", 1)[-1] == "bias" and bool(v.any())]
        if not biases:
            return ""
        states = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
        zero_w, zero_h = torch.zeros(self.noise.shape[0], dtype=torch.float64), torch.zeros((), dtype=torch.float64)

        def change(zeroed) -> float:
            step = self.step_with({k: torch.zeros_like(parameters[k]) for k in zeroed})
            with one_thread(torch):
                moved = vmap(lambda xp: step(xp, zero_w, zero_h))(states)
            return float((moved - states).abs().max()) / max(1.0, float(states.abs().max()))

        try:
            rests = change(biases) <= 1e-12  # False for NaN as well
            whole = change([])
            alone = {k: whole - change([k]) for k in biases}
        except Exception:  # a diagnosis must not hide the error it explains
            return ""
        if not rests:
            return ""
        named = ", ".join(
            f"{k} (zeroed alone: change {whole:.3g} -> {whole - d:.3g})"
            for k, d in sorted(alone.items(), key=lambda item: -item[1])
        )
        return (
            f"non-zero biases move the state at dW = 0, h = 0: {named}; with all of them zeroed the step rests. A bias "
            "on a residual branch moves the state by O(1) per layer: zero it, or pass zero_biases=True to "
            "torch_layer_map"
        )

    @cached_property
    def noise(self) -> JointNoise:
        """One part per noise parameter, shaped like it (built once: ``layer`` splits every increment with it)."""
        parameters = dict(self.template.named_parameters())
        unknown = [k for k, _ in self.noise_parameters if k not in parameters]
        if unknown:
            raise ValueError(
                f"{self.name}: noise_parameters must name parameters of the block, got {unknown}; "
                f"the block has {sorted(parameters)}"
            )
        return joint_noise(
            {k: CommonNoise(shape=tuple(parameters[k].shape), scale=s) for k, s in self.noise_parameters}
        )

    @cached_property
    def torch_step(self):
        """The step of one path in torch, ``step(x, dw, h)``: tokens (n, d) and the packed increment (total,) ->
        tokens (n, d), each noise parameter set to its part of ``dw`` times its scale (as ``noise.split``). A block
        whose ``forward`` takes a keyword ``h`` receives the step (a 0-d float64 tensor), e.g. for a drift term
        ``h M a``; otherwise it sees h only through ``dw``. Differentiable (``torch.func``):
        ``convergence.derive_limit`` expands it."""
        return self.step_with({})

    def step_with(self, overrides: dict):
        """``torch_step`` with some fixed parameters replaced (name -> tensor; ``biases_moving_the_state`` zeroes
        biases with it)."""
        from torch.func import functional_call

        block = self.template
        random = {k for k, _ in self.noise_parameters}
        fixed = {k: v.detach() for k, v in block.named_parameters() if k not in random}
        fixed.update({k: v.detach() for k, v in block.named_buffers()})
        fixed.update(overrides)
        parts = [(name, part.shape, part.scale, int(np.prod(part.shape, dtype=int))) for name, part in self.noise.parts]

        takes_h = "h" in inspect.signature(block.forward).parameters

        def step(x, dw, h):
            weights, start = {}, 0
            for name, shape, scale, size in parts:
                weights[name] = scale * dw[start : start + size].reshape(shape)
                start += size
            return functional_call(block, {**fixed, **weights}, (x[None],), {"h": h} if takes_h else {})[0]

        return step

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """One layer: the block with each noise parameter set to its increment ``sigma sqrt(h) z`` on each path."""
        import torch
        from torch.func import vmap

        step, step_size = self.torch_step, torch.tensor(float(h), dtype=torch.float64)
        with one_thread(torch), self._reported("layer(x, dw, h)", h, x, dw):
            out = vmap(lambda xp, dwp: step(xp, dwp, step_size))(
                torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)),
                torch.from_numpy(np.ascontiguousarray(dw, dtype=np.float64)),
            )
        return out.numpy()

    @contextmanager
    def _reported(self, what: str, h: float | None, *arrays: np.ndarray):
        """An exception inside the block re-raised naming the map, the call, the step h and the shapes (as numpy
        maps' are), with the usual cause for a library layer."""
        try:
            yield
        except Exception as error:
            shapes = ", ".join(str(np.shape(a)) for a in arrays)
            at = "" if h is None else f" at step h = {h:g}"
            raise RuntimeError(
                f"{self.name}: {what} raised {type(error).__name__}: {error}{at} (arrays shaped "
                f"{shapes}; the block is called on one path's tokens (1, n, d)). A library layer that "
                "needs positions, a mask or returns a tuple: wrap it, "
                "convergence.wrap_library_layer"
            ) from error

    @cached_property
    def lowest_precision_eps(self) -> float:
        """The machine epsilon of the coarsest floating type among ``internal_dtypes`` (0 when the block computes in
        float64 only)."""
        import torch

        return max([0.0, *(float(torch.finfo(getattr(torch, name)).eps) for name in self.internal_dtypes)])

    @cached_property
    def internal_dtypes(self) -> dict[str, str]:
        """Floating dtypes other than float64 that the block computes in, each with the first torch function that
        produced it (e.g. Hugging Face's RMSNorm and softmax compute in float32), from one forward pass on a probe."""
        import torch
        from torch.overrides import TorchFunctionMode

        seen: dict[str, str] = {}

        class Record(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for value in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
                        seen.setdefault(str(value.dtype).removeprefix("torch."), getattr(func, "__name__", str(func)))
                return out

        x = torch.from_numpy(random_stream(0).standard_normal((1, self.tokens, self.dim)))
        step = self.torch_step
        zero = torch.zeros(self.noise.shape[0], dtype=torch.float64)
        with one_thread(torch), self._reported("the block's forward pass", None, x.numpy()), Record():
            step(x[0], zero, torch.tensor(1.0 / 64, dtype=torch.float64))
        return seen

    @cached_property
    def differentiation_problem(self) -> str:
        """Why ``torch.func`` cannot differentiate the step in its noise under ``vmap`` (as ``derive_limit`` does),
        as a sentence naming the operation and the innermost module running when it failed; "" when it can. One
        forward-mode derivative on a probe path, traced with module hooks."""
        import torch
        from torch.func import jvp, vmap

        running: list[str] = []
        names = {module: name for name, module in self.template.named_modules()}

        def enter(module, args):
            running.append(names.get(module, "") or "the block itself")

        def leave(module, args, output):
            running.pop()

        hooks = [m.register_forward_pre_hook(enter) for m in names] + [m.register_forward_hook(leave) for m in names]
        step = self.torch_step
        x = torch.from_numpy(random_stream(0).standard_normal((1, self.tokens, self.dim)))
        zero = torch.zeros((1, self.noise.shape[0]), dtype=torch.float64)
        h = torch.tensor(1.0 / 64, dtype=torch.float64)
        try:
            with one_thread(torch):
                vmap(lambda xp, dw: jvp(lambda w: step(xp, w, h), (dw,), (torch.ones_like(dw),)))(x, zero)
        except Exception as error:  # noqa: BLE001 (any failure here is the derivative's, reported as a sentence)
            where = running[-1] if running else "the block itself"
            text = str(error)
            if "in-place operation" in text:
                op = text.split("in-place operation (", 1)[-1].split(")", 1)[0] if "(" in text else "an in-place op"
                return (
                    f"in-place operation {op} in module {where!r} on a tensor the block received (its input "
                    "or a parameter): derive_limit differentiates the step under vmap, which cannot mutate a "
                    "captured tensor; use out-of-place ops (x = x + f(x), not x.add_(...) or x += ...)"
                )
            return f"{type(error).__name__} in module {where!r} while differentiating the step: {text}"
        finally:
            for hook in hooks:
                hook.remove()
        return ""

    def __getstate__(self) -> dict:
        """Pickled without the built torch objects (workers rebuild them from the factory and the seed)."""
        built = ("template", "torch_step", "internal_dtypes", "lowest_precision_eps")
        return {k: v for k, v in self.__dict__.items() if k not in built}


def torch_layer_map(
    factory: Callable,
    tokens: int,
    dim: int,
    noise_parameters: dict[str, float],
    *,
    template_seed: int = 0,
    name: str = "torch block",
    zero_biases: bool = False,
) -> TorchBlockLayer:
    """A torch block as a layer map (``TorchBlockLayer``). ``factory()`` builds one block (called once, under
    ``template_seed``); ``noise_parameters`` maps the names of the parameters drawn fresh at every layer to their
    entries' standard deviation per unit time; ``zero_biases``: set every bias that is not noise to 0 (a library
    layer built alone keeps ``nn.Linear``'s random biases, which move the state by O(1) per layer)."""
    if not isinstance(zero_biases, bool):
        raise TypeError(f"zero_biases must be True or False, got {zero_biases!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable factory() -> torch.nn.Module, got {type(factory).__name__}")
    if not isinstance(noise_parameters, dict) or not noise_parameters:
        raise ValueError(f"noise_parameters must be a non-empty dict name -> sigma, got {noise_parameters!r}")
    pairs = tuple(
        (str(k), check_real(f"noise_parameters[{k!r}]", float(v), minimum=0.0)) for k, v in noise_parameters.items()
    )
    layer = TorchBlockLayer(
        factory,
        check_int("tokens", tokens, minimum=1),
        check_int("dim", dim, minimum=1),
        pairs,
        check_int("template_seed", template_seed, minimum=0),
        name,
        zero_biases,
    )
    layer.noise  # noqa: B018  (builds the template now: a wrong name or factory is reported here)
    if layer.internal_dtypes:  # also runs the block once: a block that cannot run on (1, n, d) is reported here
        found = ", ".join(f"{dtype} (first from {func})" for dtype, func in layer.internal_dtypes.items())
        warnings.warn(
            f"{name}: the block computes in {found} internally, although it runs in float64: its numbers "
            "carry that type's rounding (about 1e-7 relative for float32), so a one-step drift is resolved "
            "to about 1e-7 / h at best and derived and claimed limits agree to about 1e-5 (compare_limits' "
            "rtol), not 1e-12",
            UserWarning,
            stacklevel=2,
        )
    if layer.differentiation_problem:  # the map runs, but derive_limit will refuse it: say so now
        warnings.warn(f"{name}: {layer.differentiation_problem}", UserWarning, stacklevel=2)
    return layer
