"""Model A's grid (Agazzi et al., arXiv:2604.26898): its configurations (activation, d, bias, attention sign) and
their streams, the run's sizes, each configuration's certified constants and predicted collapse rate, and the
plausible wrong predictions the claims are shown to reject."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from verify._analysis import KernelSpec, activation_constants

from .collapse import RATE_TARGET, layer_rate

ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh")


BIASES = (0.0, 0.1)


ATTENTION = (1.0, 0.0, -1.0)


TOKENS, DEPTH, HORIZON, BETA = 64, 150, 5.0, 1.0


EVERY = 3  # record every third layer: 51 records


H = HORIZON / DEPTH


# repulsion: runs from one tight cluster (``tight_cluster``) over a short horizon, at the grid's step
CLUSTER_RADIUS, CLUSTER_HORIZON, CLUSTER_DEPTH = 1e-3, 1.0, 30


@dataclass(frozen=True)
class GridDesign:
    paths: dict[int, int]  # per dimension d (the noisier low dimension gets more)
    block_paths: int
    rate_target: float = RATE_TARGET  # collapse_rate may miss this relative error of the layers' rate
    repulsion_target: float = 1.0  # the repulsion checks' resolution, as a fraction of each row's predicted rate
    cluster_paths: dict[int, int] = field(default_factory=dict)  # paths of the runs from one cluster (else ``paths``)
    replicates: int = 1000  # bootstrap replicates of the figures' bands


@dataclass(frozen=True)
class Config:
    act: str
    dim: int
    bias: float
    v: float

    @property
    def label(self) -> str:
        return f"{self.act} d={self.dim} bias={self.bias:g} v={self.v:+g}"

    @property
    def odd(self) -> bool:
        return KernelSpec(self.act, self.dim, self.bias, self.bias).odd


@cache
def constants(act: str, dim: int, bias: float) -> dict[str, float]:
    """k(1), k'(1), lambda_1, lambda_bar (``verify.activation_constants``)."""
    return activation_constants(act, dim, bias, bias)


def lambda_true(c: Config) -> float:
    return constants(c.act, c.dim, c.bias)["lambda_1"]


def _lambda(d: int, k1: float, k1p: float) -> float:
    return ((d - 3) * k1p - (d - 1) * k1) / 2


def k_one(c: Config) -> float:
    return constants(c.act, c.dim, c.bias)["k1"]


def k_one_prime(c: Config) -> float:
    return constants(c.act, c.dim, c.bias)["k1_prime"]


def predicted_rate(c: Config) -> float:
    """The rate of log E_beta of a tight cluster under the layers (``layer_rate``) with the certified lambda_1:
    2 (lambda_1 - v) + v^2 h + ..."""
    return layer_rate(lambda_true(c), c.v, H)


# Plausible wrong predictions of the rate, one per claim that it should contradict (each a slip a derivation
# could make).
WRONG_PREDICTIONS = {
    "k'(1) without its 1/d": lambda c: layer_rate(_lambda(c.dim, k_one(c), c.dim * k_one_prime(c)), c.v, H),
    "the Ito term's sign flipped": lambda c: layer_rate(_lambda(c.dim, -k_one(c), k_one_prime(c)), c.v, H),
    "the attention's sign ignored": lambda c: predicted_rate(replace(c, v=abs(c.v))),
}


def stream_key(study_key: int, c: Config) -> tuple[int, ...]:
    """A configuration's stream, by what it is (adding a dimension to the grid changes no other configuration's)."""
    return (study_key, ACTIVATIONS.index(c.act), c.dim, BIASES.index(c.bias), ATTENTION.index(c.v))


def cluster_key(study_key: int, c: Config) -> tuple[int, ...]:
    """The stream of a configuration's run from one tight cluster (beside its grid run's ``stream_key``)."""
    return (*stream_key(study_key, c), 1)


def configs(design: GridDesign) -> list[Config]:
    return [Config(a, d, b, v) for a in ACTIVATIONS for d in tuple(design.paths) for b in BIASES for v in ATTENTION]


def repulsion_configs(grid: list[Config]) -> list[Config]:
    """The repulsive configurations (v = -1) whose claims are judged: not odd (an antipodal attractor)."""
    return [c for c in grid if c.v == -1.0 and not c.odd]


TIMES = np.linspace(0.0, HORIZON, DEPTH // EVERY + 1)


CLUSTER_TIMES = np.linspace(0.0, CLUSTER_HORIZON, CLUSTER_DEPTH + 1)
