"""Numerical cross-check of every derivation: one discrete layer against the derived generator.

For a layer map X_h = layer(x, noise, h) at an explicit two-token configuration,
``D(h) = (E f(X_h) - f(x)) / h`` must tend to ``L f(x)`` (the derived generator) with an O(h) bias.
E is estimated by Monte Carlo with antithetic noise (noise and -noise, both of the same law), which
removes the O(sqrt(h)) term exactly and leaves an O(1) variance. At three step sizes the estimates
are fitted by weighted least squares as ``D(h) = L + c h``; the check passes when the intercept is
within 4 standard errors (false-failure rate about 6e-5 under the normal approximation) plus a bias
allowance ``|c| h_min`` (the size of the next-order term) of the derived value.

The layer maps are written here with numpy from docs/models.md's statements, independently of the numerical side
(``convergence``, which ``verify`` never imports); ``convergence``'s own layer maps are checked against these
derived generators by its conformance tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import sympy as sp

from .._calculus import d, gram_symbol, polynomial_kernel, sigma
from .._common import Verdict, random_stream
from .._models import MODELS, beta, eps, m, v_sign


def checked_system(model: str, n: int = 2, unit: bool = True):
    """The limit SDE of a checked model, in the form the derivations check (``SymbolicModel.checked_system``)."""
    if model not in CHECKED:
        raise ValueError(f"model must be one of the cross-checked models {list(CHECKED)}, got {model!r}")
    return MODELS[model].checked_system(n, unit)


STEPS = (0.04, 0.02, 0.01)
K_SE = 4.0
PARAMS = {"beta": 0.7, "sigma": 1.2, "epsilon": 0.75, "m": 0.5, "v": 1.0, "kernel": (1 / 3, 1 / 2, 1 / 4)}
TEST_FUNCTIONS = {
    "rho": (lambda g: g, lambda r: r),
    "rho^2": (lambda g: g**2, lambda r: r**2),
    "exp(beta rho)": (lambda g: sp.exp(beta * g), lambda r: np.exp(PARAMS["beta"] * r)),
}


@dataclass(frozen=True)
class OneStepCheck:
    model: str
    observable: str
    dim: int
    rho: float
    generator: float
    steps: list[float]
    estimates: list[float]
    standard_errors: list[float]
    intercept: float
    intercept_se: float
    slope: float
    allowance: float
    verdict: Verdict

    def to_dict(self) -> dict:
        return asdict(self)


def configuration(dim: int, rho: float) -> np.ndarray:
    """Two unit tokens with <x_0, x_1> = rho, shape (1, 2, d)."""
    x = np.zeros((1, 2, dim))
    x[0, 0, 0] = 1.0
    x[0, 1, 0], x[0, 1, 1] = rho, np.sqrt(1 - rho**2)
    return x


def _overlap(x: np.ndarray) -> np.ndarray:
    return np.sum(x[:, 0] * x[:, 1], axis=-1)


def _normalise(y: np.ndarray) -> np.ndarray:
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def _softmax_average(x: np.ndarray) -> np.ndarray:
    """a_i = sum_j softmax_j(beta <x_i, x_j>) x_j (row maximum subtracted)."""
    scores = PARAMS["beta"] * x @ np.swapaxes(x, -1, -2)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ x


def _fedorov_layer(x, dw, h):
    """Model F with mean value M = m I: N(x_i + h M a_i + dW a_i), dW = sqrt(h) Z with entries N(0, sigma^2)."""
    a = _softmax_average(x)
    return _normalise(x + a @ np.swapaxes(dw, -1, -2) + h * PARAMS["m"] * a)


def _hybrid_layer(x, xi, h):
    """The hybrid model: N(x_i + (h + eps sqrt(h) xi) u_i), u_i = (1/n) sum_j exp(beta <x_i, x_j>) x_j."""
    u = np.exp(PARAMS["beta"] * x @ np.swapaxes(x, -1, -2)) @ x / x.shape[-2]
    return _normalise(x + (h + PARAMS["epsilon"] * xi)[:, None, None] * u)


def _softmax_hybrid_layer(x, xi, h):
    """The hybrid model with softmax attention: N(x_i + (h + eps sqrt(h) xi) a_i), a_i as model F's."""
    return _normalise(x + (h + PARAMS["epsilon"] * xi)[:, None, None] * _softmax_average(x))


def _agazzi_layer(x, g_noise, h):
    """Model A: Y = N(X + h v a(X)), beta-softmax attention; X' = N(Y + G(Y)) with G ~ sqrt(h) field."""
    y = _normalise(x + h * PARAMS["v"] * _softmax_average(x))
    c0, c1, c2 = PARAMS["kernel"]
    u = np.sum(y[:, 0] * y[:, 1], axis=-1)
    k11 = c0 + c1 + c2
    k01 = c0 + c1 * u + c2 * u**2
    # G(y_0) = sqrt(h)(sqrt(k11) z0), G(y_1) = sqrt(h)(r z0 + s z1): covariance k(<y_i, y_j>) I.
    r = k01 / np.sqrt(k11)
    s = np.sqrt(np.maximum(k11 - r**2, 0.0))
    z0, z1 = g_noise[:, 0], g_noise[:, 1]
    field = np.sqrt(h) * np.stack([np.sqrt(k11) * z0, r[:, None] * z0 + s[:, None] * z1], axis=1)
    return _normalise(y + field)


def _quadratic_form_layer(x, dq, h):
    return _normalise(x - x @ dq)  # dq symmetric: (dQ x_i)^T = x_i^T dQ


def _value_matrices(rng: np.random.Generator, pairs: int, h: float, dim: int) -> np.ndarray:
    return PARAMS["sigma"] * np.sqrt(h) * rng.standard_normal((pairs, dim, dim))


def _scalar(rng: np.random.Generator, pairs: int, h: float, dim: int) -> np.ndarray:
    return np.sqrt(h) * rng.standard_normal(pairs)


def _field_normals(rng: np.random.Generator, pairs: int, h: float, dim: int) -> np.ndarray:
    return rng.standard_normal((pairs, 2, dim))


def _symmetric(rng: np.random.Generator, pairs: int, h: float, dim: int) -> np.ndarray:
    b = rng.standard_normal((pairs, dim, dim))
    return np.sqrt(h) * (b + np.swapaxes(b, -1, -2)) / np.sqrt(2)


# model of verify._models.MODELS -> (draw(rng, pairs, h, dim) -> noise, layer(x, noise, h)), written here from
# docs/models.md; every noise is symmetric in law. These are the models every derivation covers.
INDEPENDENT: dict[str, tuple[Callable, Callable]] = {
    "fedorov": (_value_matrices, _fedorov_layer),
    "hybrid": (_scalar, _hybrid_layer),
    "softmax_hybrid": (_scalar, _softmax_hybrid_layer),
    "agazzi": (_field_normals, _agazzi_layer),
    "quadratic_form": (_symmetric, _quadratic_form_layer),
}
CHECKED = tuple(INDEPENDENT)


def derived_generator(model: str, f_sym: sp.Expr, dim: int, rho: float) -> float:
    """``L f`` at the configuration, from the symbolic system (unit tokens, d = dim)."""
    system = checked_system(model, 2)
    expr = system.generator(f_sym)
    if MODELS[model].field_noise:
        expr = expr.replace(system.noise.kernel, polynomial_kernel([sp.nsimplify(c) for c in PARAMS["kernel"]]))
    values = {
        d: dim,
        beta: sp.nsimplify(PARAMS["beta"]),
        sigma: sp.nsimplify(PARAMS["sigma"]),
        eps: sp.nsimplify(PARAMS["epsilon"]),
        m: sp.nsimplify(PARAMS["m"]),
        v_sign: sp.nsimplify(PARAMS["v"]),
        gram_symbol(0, 1): sp.nsimplify(rho),
    }
    return float(sp.N(expr.subs(values), 20))


def one_step_check(
    model: str, observable: str, dim: int = 4, rho: float = 0.3, pairs: int = 200_000, seed: int = 0, steps=STEPS
) -> OneStepCheck:
    """Estimate D(h) at ``steps`` and compare its extrapolation with the derived generator."""
    f_sym, f_num = TEST_FUNCTIONS[observable]
    draw, layer = INDEPENDENT[model]
    x = configuration(dim, rho)
    f0 = f_num(rho)
    rng = random_stream(seed, (dim, list(TEST_FUNCTIONS).index(observable)))
    estimates, errors = [], []
    xs = np.repeat(x, pairs, axis=0)
    for h in steps:
        noise = draw(rng, pairs, h, dim)
        values = (f_num(_overlap(layer(xs, noise, h))) + f_num(_overlap(layer(xs, -noise, h))) - 2 * f0) / (2 * h)
        estimates.append(float(values.mean()))
        errors.append(float(values.std(ddof=1) / np.sqrt(pairs)))
    h = np.asarray(steps)
    w = 1 / np.asarray(errors) ** 2
    design = np.stack([np.ones_like(h), h], axis=1)
    cov = np.linalg.inv(design.T @ (w[:, None] * design))
    intercept, slope = cov @ design.T @ (w * np.asarray(estimates))
    intercept_se = float(np.sqrt(cov[0, 0]))
    target = derived_generator(model, f_sym(gram_symbol(0, 1)), dim, rho)
    allowance = abs(float(slope)) * min(steps)
    verdict = Verdict.of(bool(abs(intercept - target) <= K_SE * intercept_se + allowance))
    return OneStepCheck(
        model,
        observable,
        dim,
        rho,
        target,
        list(steps),
        estimates,
        errors,
        float(intercept),
        intercept_se,
        float(slope),
        allowance,
        verdict,
    )
