"""The numerical side: layer maps, limit-SDE integrators, Brownian paths, estimators, studies, reports."""

from .fedorov import FedorovModel, FedorovSDE
from .hybrid import HybridModel, HybridSDE
from .integrators import EulerMaruyama
from .model import LayerMap, LimitSDE
from .noise import CommonNoise, matrix_noise, scalar_noise

__all__ = [
    "CommonNoise",
    "EulerMaruyama",
    "FedorovModel",
    "FedorovSDE",
    "HybridModel",
    "HybridSDE",
    "LayerMap",
    "LimitSDE",
    "matrix_noise",
    "scalar_noise",
]
