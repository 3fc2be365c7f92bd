"""The bench's workload and its kernels: the configuration (``BenchConfig``), the timer (``best_time``), and the
baselines it times beside the suite's runners: the draws alone (``draw_only``) and a plain loop over paths and layers
(``per_path_loop``, ``per_path_draws``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from verify._common import check_int

from .._models import FedorovModel
from .._paths import BrownianBlock, PathStreams, chunk_length
from .._runtime import random_stream


@dataclass(frozen=True)
class BenchConfig:
    """The workload: paths, steps (h = 1/steps), tokens n and dimension d of model F; model A's N; repeats."""

    paths: int = 4096
    steps: int = 64
    tokens: int = 2
    dim: int = 16
    loop_paths: int = 64
    model_a_tokens: int = 1024
    model_a_paths: int = 4
    model_a_steps: int = 4
    parallel_block: int = 1024  # two blocks per worker: the peers' 4096 paths split over 2 processes
    repeats: int = 3
    strong_paths: int = 256  # at d = 16; scaled by (16/d)^2 at larger d
    cost_repeats: int = 2  # 0: no cost curves
    user_checks: int = 1  # 0: no timing of a user's checks at their defaults (``user_checks``)
    variance: int = 1  # 0: no variance-reduction measurements (``variance``)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            check_int(name, value, minimum=0 if name in ("cost_repeats", "user_checks", "variance") else 1)


def best_time(run: Callable[[], object], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls after one warm-up call (seconds)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def draw_only(model, paths: int, steps: int, h: float, seed: int = 0) -> None:
    """Draw exactly the increments ``simulate`` draws for ``model``, in the same chunks, and nothing else."""
    streams = PathStreams(seed, 0, paths)
    block = BrownianBlock(model.noise, streams, h)
    chunk = min(steps, chunk_length(paths, int(np.prod(model.noise.shape)), 1))
    done = 0
    while done < steps:
        block.next(min(chunk, steps - done))
        done += chunk


def per_path_loop(model: FedorovModel, x0: np.ndarray, steps: int, h: float, seed: int = 0) -> np.ndarray:
    """Model F's layer map written as a plain loop over paths and layers (the baseline of vectorisation)."""
    rng = random_stream(seed)
    out = np.empty_like(x0)
    scale = model.sigma * np.sqrt(h)
    for p in range(x0.shape[0]):
        x = x0[p].copy()
        for _ in range(steps):
            v = scale * rng.standard_normal((model.dim, model.dim))
            scores = model.beta * (x @ x.T)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            a = (weights / weights.sum(axis=1, keepdims=True)) @ x
            y = x + a @ v.T
            x = y / np.linalg.norm(y, axis=1, keepdims=True)
        out[p] = x
    return out


def per_path_draws(dim: int, paths: int, steps: int, seed: int = 0) -> None:
    """Only the draws of ``per_path_loop`` (one d x d matrix per path and layer)."""
    rng = random_stream(seed)
    for _ in range(paths * steps):
        rng.standard_normal((dim, dim))
