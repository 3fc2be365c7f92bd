"""The peers the bench measures against: model F's limit SDE solved by Euler steps in diffrax (jit, vmap, an unsafe
Brownian path) and in torchsde (a hand-written ``g_prod``), each None when its package is not installed (extra
``[peers]``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np

from .._runtime import random_stream
from .workload import BenchConfig


def diffrax_limit(config: BenchConfig, sigma: float):
    """Model F's limit SDE (beta = 1, Q^T K = I) as diffrax's ``(drift, diffusion)`` for one path y (n, d): the
    diffusion is a lineax operator taking the d x d increment dW to P_{y_i} sigma dW a_i, token by token."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platform_name", "cpu")
    import jax.numpy as jnp
    import lineax

    d = config.dim

    def attention(y):
        scores = y @ y.T
        return jax.nn.softmax(scores, axis=1) @ y

    def drift(t, y, args):
        a = attention(y)
        return -0.5 * (d - 1) * sigma**2 * jnp.sum(a * a, axis=1, keepdims=True) * y

    def diffusion(t, y, args):
        a = attention(y)

        def apply(w):
            z = a @ (sigma * w).T
            return z - jnp.sum(z * y, axis=1, keepdims=True) * y

        return lineax.FunctionLinearOperator(apply, jax.ShapeDtypeStruct((d, d), jnp.float64))

    return drift, diffusion


def diffrax_euler(config: BenchConfig, sigma: float) -> Callable[[], object] | None:
    """A jitted, vmapped diffrax Euler solve of model F's limit SDE, or None when diffrax is not installed."""
    if importlib.util.find_spec("diffrax") is None:
        return None
    drift, diffusion = diffrax_limit(config, sigma)
    import diffrax
    import jax
    import jax.numpy as jnp

    d, n, h = config.dim, config.tokens, 1.0 / config.steps

    def solve(y0, key):
        path = diffrax.UnsafeBrownianPath(shape=(d, d), key=key)
        terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, path))
        sol = diffrax.diffeqsolve(
            terms,
            diffrax.Euler(),
            0.0,
            1.0,
            h,
            y0,
            saveat=diffrax.SaveAt(t1=True),
            max_steps=config.steps + 1,
            adjoint=diffrax.ForwardMode(),
        )
        return sol.ys[0]

    batched = jax.jit(jax.vmap(lambda y0, key: solve(y0, key)))
    y0 = random_stream(0).standard_normal((config.paths, n, d))
    y0 = jnp.asarray(y0 / np.linalg.norm(y0, axis=-1, keepdims=True))
    keys = jax.random.split(jax.random.PRNGKey(0), config.paths)
    return lambda: batched(y0, keys).block_until_ready()


def torchsde_limit(config: BenchConfig, sigma: float):
    """Model F's limit SDE (beta = 1, Q^T K = I) as a torchsde module: drift ``f``, Euler's ``g_prod`` and ``g``."""
    import torch

    d, n = config.dim, config.tokens

    class FedorovLimit(torch.nn.Module):
        noise_type, sde_type = "general", "ito"

        def _split(self, y):
            x = y.view(-1, n, d)
            a = torch.softmax(x @ x.transpose(1, 2), dim=-1) @ x
            return x, a

        def f(self, t, y):
            x, a = self._split(y)
            return (-0.5 * (d - 1) * sigma**2 * (a * a).sum(-1, keepdim=True) * x).reshape(y.shape)

        def g_prod(self, t, y, v):
            x, a = self._split(y)
            z = a @ (sigma * v.view(-1, d, d)).transpose(1, 2)
            return (z - (z * x).sum(-1, keepdim=True) * x).reshape(y.shape)

        def g(self, t, y):  # full (n d) x (d d) matrix sigma P_{x_i} (x) a_i^T: torchsde checks its shape
            x, a = self._split(y)
            proj = torch.eye(d, dtype=y.dtype) - x[..., :, None] * x[..., None, :]
            return (sigma * proj[..., :, :, None] * a[..., None, None, :]).reshape(y.shape[0], n * d, d * d)

    return FedorovLimit()


def torchsde_euler(config: BenchConfig, sigma: float) -> Callable[[], object] | None:
    """torchsde's Euler solve of the same SDE with a hand-written ``g_prod``, or None when not installed."""
    if importlib.util.find_spec("torchsde") is None or importlib.util.find_spec("torch") is None:
        return None
    import torch
    import torchsde

    d, n, h = config.dim, config.tokens, 1.0 / config.steps
    sde = torchsde_limit(config, sigma)
    y0 = torch.nn.functional.normalize(torch.from_numpy(random_stream(0).standard_normal((config.paths, n, d))), dim=-1)
    y0 = y0.reshape(config.paths, n * d)
    ts = torch.tensor([0.0, 1.0], dtype=torch.float64)

    def solve():  # a fresh Brownian path per run: a reused BrownianInterval would serve cached increments
        bm = torchsde.BrownianInterval(t0=0.0, t1=1.0, size=(config.paths, d * d), dtype=torch.float64)
        return torchsde.sdeint(sde, y0, ts, bm=bm, method="euler", dt=h)

    return solve
