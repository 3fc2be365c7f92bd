"""The models of docs/models.md written as normalised layer steps in the tokens' span, and their limit SDEs.

Each ``*_layer`` function states a discrete layer map exactly as the numerical side implements it;
``limit_system`` (``verify._calculus.expansion``) turns it into the Ito SDE that the studies test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import sympy as sp

from .._calculus import (
    BrownianField,
    MatrixBrownian,
    NormalisedStep,
    ParticleSystem,
    ScalarBrownian,
    Span,
    SymmetricMatrixBrownian,
    Vec,
    limit_system,
)

beta = sp.Symbol("beta", real=True)
eps = sp.Symbol("epsilon", nonnegative=True)
m = sp.Symbol("m", real=True)  # mean value part M = m I
v_sign = sp.Symbol("v", real=True)  # attention value matrix V = v I (model A)


def softmax_attention(span: Span, i: int, strength: sp.Expr = beta) -> Vec:
    """``a_i = sum_j exp(beta G_ij) x_j / sum_k exp(beta G_ik)`` (Q^T K = I)."""
    g = span.gram
    weights = [sp.exp(strength * g[i, j]) for j in range(span.n)]
    total = sum(weights)
    return sum((span.token(j) * (w / total) for j, w in enumerate(weights)), span.zero())


def unnormalised_attention(span: Span, i: int, strength: sp.Expr = beta) -> Vec:
    """``u_i = (1/n) sum_j exp(beta G_ij) x_j`` (the hybrid model)."""
    g = span.gram
    return sum((span.token(j) * (sp.exp(strength * g[i, j]) / span.n) for j in range(span.n)), span.zero())


def fedorov_layer(span: Span, mean: sp.Expr = 0) -> list[list[NormalisedStep]]:
    """Model F: ``N(x_i + sqrt(h) V a_i)`` with ``sqrt(h) V = h M + dW``, M = mean I."""
    steps = []
    for i in range(span.n):
        a = softmax_attention(span, i)
        steps.append([NormalisedStep(mu=a * mean, noise_arg=a)])
    return steps


def hybrid_layer(span: Span) -> list[list[NormalisedStep]]:
    """Hybrid: ``N(x_i + h u_i + eps dB u_i)`` with one scalar Brownian increment dB."""
    return [
        [NormalisedStep(mu=unnormalised_attention(span, i), noise_arg=unnormalised_attention(span, i) * eps)]
        for i in range(span.n)
    ]


def softmax_hybrid_layer(span: Span) -> list[list[NormalisedStep]]:
    """The hybrid model with model F's softmax attention: ``N(x_i + h a_i + eps dB a_i)``, dB scalar."""
    return [
        [NormalisedStep(mu=softmax_attention(span, i), noise_arg=softmax_attention(span, i) * eps)]
        for i in range(span.n)
    ]


def agazzi_layer(span: Span) -> list[list[NormalisedStep]]:
    """Model A: ``Y = N(X + h v a(X))`` then ``X' = N(Y + sqrt(h) G(Y))``, Q^T K = beta I, V = v I,
    G a Gaussian field with covariance k(<x,y>) I_d (the infinite-width MLP block)."""
    return [
        [NormalisedStep(mu=softmax_attention(span, i) * v_sign), NormalisedStep(mu=span.zero(), noise_arg=i)]
        for i in range(span.n)
    ]


def quadratic_form_layer(span: Span) -> list[list[NormalisedStep]]:
    """Random quadratic form, normalised Euler step ``N(x - dQ x)`` of dX = -P_X o dQ X."""
    return [[NormalisedStep(mu=span.zero(), noise_arg=-span.token(i))] for i in range(span.n)]


def one_token_layer(span: Span) -> list[list[NormalisedStep]]:
    """Model F with one token (a = x_0) beside a fixed unit vector x_1 (no drift, no noise): the overlap
    <x_0, x_1> is a zonal coordinate of Brownian motion on the sphere (calibration, docs/models.md section 3)."""
    return [[NormalisedStep(mu=span.zero(), noise_arg=span.token(0))], [NormalisedStep(mu=span.zero())]]


@dataclass(frozen=True)
class SymbolicModel:
    """A model of docs/models.md: its layer as normalised steps in the tokens' span and the law of its common noise.

    ``tokens`` fixes the span's size for a model defined only for it (one token beside a fixed vector);
    ``parameters`` are the layer's keyword parameters in the form the derivations check (model F's mean value
    M = m I); ``min_tokens`` is the fewest tokens whose system the derivations expand (model A's field acts on pairs).
    """

    layer: Callable[..., list[list[NormalisedStep]]]
    noise: Callable[[], object]
    tokens: int | None = None
    parameters: Mapping[str, sp.Expr] = field(default_factory=dict)
    min_tokens: int = 1

    @property
    def field_noise(self) -> bool:
        """Whether the noise is a Brownian field with a kernel k (no finite coordinates of its own)."""
        return hasattr(self.noise(), "kernel")

    def system(self, n: int = 2, unit: bool = True, **parameters) -> ParticleSystem:
        """The limit SDE of ``n`` tokens (unit tokens when ``unit``); ``parameters`` go to the layer (model F's
        mean)."""
        span = Span(self.tokens or n, unit)
        return limit_system(span, self.layer(span, **parameters), self.noise())

    def checked_system(self, n: int = 2, unit: bool = True) -> ParticleSystem:
        """The limit SDE in the form the derivations check: the layer at ``parameters``."""
        return self.system(max(n, self.min_tokens), unit, **self.parameters)


MODELS: dict[str, SymbolicModel] = {  # verify's one registry of models
    "fedorov": SymbolicModel(fedorov_layer, MatrixBrownian, parameters={"mean": m}),
    "hybrid": SymbolicModel(hybrid_layer, ScalarBrownian),
    "softmax_hybrid": SymbolicModel(softmax_hybrid_layer, ScalarBrownian),
    "agazzi": SymbolicModel(agazzi_layer, BrownianField, min_tokens=2),
    "quadratic_form": SymbolicModel(quadratic_form_layer, SymmetricMatrixBrownian),
    "one_token": SymbolicModel(one_token_layer, MatrixBrownian, tokens=2),
}


def model_system(model: str, n: int = 2, unit: bool = True, **parameters) -> ParticleSystem:
    """The limit SDE of registered ``model`` (``MODELS``) for ``n`` tokens."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
    return MODELS[model].system(n, unit, **parameters)


def one_token_system(unit: bool = True) -> ParticleSystem:
    return model_system("one_token", unit=unit)


def fedorov_system(n: int = 2, unit: bool = True, mean: sp.Expr = 0) -> ParticleSystem:
    return model_system("fedorov", n, unit, mean=mean)


def hybrid_system(n: int = 2, unit: bool = True) -> ParticleSystem:
    return model_system("hybrid", n, unit)


def agazzi_system(n: int = 2, unit: bool = True) -> ParticleSystem:
    return model_system("agazzi", n, unit)


def quadratic_form_system(n: int = 2, unit: bool = True) -> ParticleSystem:
    return model_system("quadratic_form", n, unit)
