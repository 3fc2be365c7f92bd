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
along the p basis directions of dW, each by reverse-over-reverse differentiation (batched with ``vmap`` in chunks),
no Monte Carlo. Not forward mode at second order: torch's forward-mode rule for ``layer_norm`` (and ``batch_norm``)
is right to first order only, its nested second derivative off by O(1), also when reverse mode is applied over it
(pytorch/pytorch#196700, umbrella #198017; seen on torch 2.13), and ``silu_backward`` (Llama's MLP) has no
forward-mode rule, so forward over reverse fails; reverse over reverse is right for all of them. The cost is about
2 p n d backward passes of the block per state: cheap for the local check (a few states), heavy for an integrator
that asks for the drift at every path and step of a large noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .noise import CommonNoise
from .protocols import Wrapper
from .torch_block import TorchBlockLayer, one_thread

# A step must return its input at dW = 0, h = 0 to this relative accuracy (else it has no diffusion limit)
RESTING_TOLERANCE = 1e-12
BASIS_CHUNK = 64  # basis directions of dW per batched pass (memory: paths x chunk x the block's activations)


@dataclass(frozen=True, eq=False)
class AutodiffLimit(Wrapper):
    """The Ito limit (a ``LimitSDE``) of a torch layer map, derived from its step (module docstring)."""

    model: TorchBlockLayer
    name: str = "limit by automatic differentiation"

    @property
    def noise(self) -> CommonNoise:
        return self.model.noise

    def drift(self, x: np.ndarray) -> np.ndarray:
        """b(x) = d_h F + (1/2) s^2 sum_j d^2 F / dW_j^2 at (x, 0, 0), per path: x (paths, n, d) -> (paths, n, d)."""
        import torch
        from torch.func import jacrev, jvp, vmap

        step, size, variance = self.model.torch_step, self.noise.shape[0], self.noise.scale ** 2
        zero_w, zero_h, one_h = (torch.zeros(size, dtype=torch.float64), torch.zeros((), dtype=torch.float64),
                                 torch.ones((), dtype=torch.float64))
        basis = torch.eye(size, dtype=torch.float64)

        def one_path(xp):
            def along(v):  # d^2/dt^2 F(x, t v, 0) at t = 0, reverse over reverse (module docstring)
                return jacrev(jacrev(lambda t: step(xp, t * v, zero_h)))(zero_h)

            curvature = vmap(along, chunk_size=BASIS_CHUNK)(basis).sum(dim=0)
            rate = jvp(lambda hh: step(xp, zero_w, hh), (zero_h,), (one_h,))[1]
            return rate + 0.5 * variance * curvature

        states = self._resting(x)
        with one_thread(torch):
            return vmap(one_path)(torch.from_numpy(states)).numpy()

    def diffusion(self, x: np.ndarray, dw: np.ndarray) -> np.ndarray:
        """G(x) dW = D_W F(x, 0, 0) dW per path: x (paths, n, d), dw (paths, total) -> (paths, n, d)."""
        import torch
        from torch.func import jvp, vmap

        step, size = self.model.torch_step, self.noise.shape[0]
        zero_w, zero_h = torch.zeros(size, dtype=torch.float64), torch.zeros((), dtype=torch.float64)

        def one_path(xp, dwp):
            return jvp(lambda u: step(xp, u, zero_h), (zero_w,), (dwp,))[1]

        with one_thread(torch):
            out = vmap(one_path)(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)),
                                 torch.from_numpy(np.ascontiguousarray(dw, dtype=np.float64)))
        return out.numpy()

    def _resting(self, x: np.ndarray) -> np.ndarray:
        """``x`` as float64, after checking that the step leaves it in place at dW = 0, h = 0 (a step that moves x
        by O(1) has no diffusion limit: its change does not vanish with h)."""
        states = np.ascontiguousarray(x, dtype=np.float64)
        change = zero_noise_step(self.model, states)[1]
        if not change <= RESTING_TOLERANCE:
            raise ValueError(f"{self.model.name}: the step's change at dW = 0, h = 0 must vanish (F(x, 0, 0) = x) for "
                             f"a diffusion limit to exist; got max |F(x, 0, 0) - x| / max(1, |x|) = {change:.3g} (is "
                             "the state where the block lives, e.g. on its LayerNorm sphere?)")
        return states


def zero_noise_step(layer, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The layer's step without noise at h = 0, y = F(x, 0, 0), for states x (paths, n, d), and its largest change
    max |y - x| / max(1, max |x|) (0 where x is a resting state; ``RESTING_TOLERANCE`` allows rounding)."""
    moved = np.asarray(layer.layer(x, np.zeros((x.shape[0], *layer.noise.shape)), 0.0), dtype=np.float64)
    if not x.size:
        return moved, 0.0
    return moved, float(np.max(np.abs(moved - x))) / max(1.0, float(np.max(np.abs(x))))


def derive_limit(layer: TorchBlockLayer, name: str = "limit by automatic differentiation") -> AutodiffLimit:
    """The Ito limit of a torch layer map (``convergence.torch_layer_map``), by automatic differentiation of its step
    (module ``convergence.models.autodiff_limit``): a ``LimitSDE`` every check accepts as a claim."""
    if not isinstance(layer, TorchBlockLayer):
        raise TypeError(f"layer must be a torch layer map (convergence.torch_layer_map), got {type(layer).__name__}; "
                        "a numpy map's limit is derived symbolically (verify.one_step_limit)")
    return AutodiffLimit(layer, name)
