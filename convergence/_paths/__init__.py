"""Paths: seeded nested Brownian increments (``brownian``), several depths on one path (``coupling``), depth
ladders (``design``), the Euler-Maruyama reference (``integrators``), the one runner of seeded blocks every
experiment uses (``runner``), forward runs (``simulate``), token configurations (``configurations``) and the width
ladder's runs of a width-indexed block and its covariance SDE's Euler scheme (``width_paths``).
"""

from __future__ import annotations

from .brownian import (
    BrownianBlock,
    CoarseIncrements,
    InitialState,
    PathStreams,
    SignedBlock,
    block_sums,
    uniform_sphere,
)
from .configurations import (
    CLASSES,
    class_fractions,
    classify,
    fixed_overlap,
    fixed_state,
    overlap,
    path_states,
    sampled_state,
)
from .coupling import (
    CoupledRun,
    Level,
    Martingale,
    Subsystems,
    chunk_length,
    common_noise,
    run_coupled,
    token_mean_sq_distance,
)
from .design import DepthLadder, RateTolerance, RecordGrid
from .integrators import EulerMaruyama, drift_and_diffusion
from .runner import run_seeded
from .simulate import record_at_two_steps, simulate
from .width_paths import (
    Statistic,
    block_step,
    correlation,
    covariance_euler,
    in_float64,
    seeded_block,
    width_run,
)

__all__ = [
    "BrownianBlock",
    "CLASSES",
    "CoarseIncrements",
    "CoupledRun",
    "DepthLadder",
    "EulerMaruyama",
    "InitialState",
    "Level",
    "Martingale",
    "PathStreams",
    "SignedBlock",
    "RateTolerance",
    "RecordGrid",
    "Subsystems",
    "block_sums",
    "chunk_length",
    "class_fractions",
    "classify",
    "common_noise",
    "drift_and_diffusion",
    "fixed_overlap",
    "path_states",
    "fixed_state",
    "overlap",
    "sampled_state",
    "record_at_two_steps",
    "run_coupled",
    "run_seeded",
    "simulate",
    "token_mean_sq_distance",
    "uniform_sphere",
    "Statistic",
    "block_step",
    "correlation",
    "covariance_euler",
    "in_float64",
    "seeded_block",
    "width_run",
]
