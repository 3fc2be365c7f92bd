"""The registry of models: every layer map the suite ships that declares its claims, as a small example instance.

The conformance tests run over this registry (``tests/test_conformance.py``): protocol, noise and output shapes,
sphere invariance, permutation and rotation equivariance (through the model's ``rotate_noise``), the limit's drift
against the one ``verify`` derives (``claims.symbolic``, at the model's ``symbolic_values()``) and local consistency.
Each model states on its ``claims.exempt`` which of these do not apply to it, and why. A new model is checked by
adding one line here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verify._analysis import KernelSpec

from .._runtime import random_stream
from .agazzi import AgazziModel
from .fedorov import FedorovModel
from .hybrid import HybridModel
from .mlp_field import FrozenFeatureField, GaussianField
from .protocols import ClaimingModel
from .quadratic_form import QuadraticFormModel
from .softmax_hybrid import SoftmaxHybridModel

FEATURE_SEED = 20261201

MODELS: dict[str, Callable[[], ClaimingModel]] = {
    "fedorov": lambda: FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4)),
    "fedorov rademacher": lambda: FedorovModel(3, 5, beta=1.2, law="rademacher"),
    "hybrid": lambda: HybridModel(4, beta=0.8, eps=1.3, law="gaussian"),
    "softmax hybrid": lambda: SoftmaxHybridModel(3, beta=1.5, eps=0.9, tokens=3, law="gaussian"),
    "agazzi gaussian field": lambda: AgazziModel(2, GaussianField(KernelSpec("relu", 4), 2), beta=0.8, v=1.0),
    "agazzi frozen features": lambda: AgazziModel(
        3, FrozenFeatureField.draw(KernelSpec("tanh", 4), 16, random_stream(FEATURE_SEED)), beta=0.8, v=-1.0
    ),
    "quadratic_form": lambda: QuadraticFormModel(2, 4),
}
