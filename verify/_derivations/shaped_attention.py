"""The shaped attention and shaped transformer blocks' covariance SDEs (``verify._analysis.shaped_attention``), each
step checked another way: the softmax's Taylor coefficients against their hand-written forms, the derived drift and
attention noise against closed forms written from the logits' second moments, and one layer simulated in numpy
(actual softmax of actual logits at a finite key width, so non-Gaussian logits) against the derived one-step moments."""

from __future__ import annotations

import numpy as np
import sympy as sp

from .._analysis.covariance import ShapedMLP, c_minus, c_plus, correlation_sde, epsilon, rho
from .._analysis.shaped_attention import (
    ShapedAttention,
    ShapedTransformer,
    attention_drift_closed_form,
    attention_noise_closed_form,
    gamma,
    is_odd,
    logit_symbols,
    softmax_expansion,
    tau_0,
)
from .._common import random_stream
from .._models import attention_first_order, frame_states, shaped_attention, shaped_relu
from .covariance import K_SE, SHAPING
from .derivation import Derivation

STATE = ((1.0, 0.3, -0.2), (0.3, 1.5, 0.4), (-0.2, 0.4, 0.8))
BLOCK = {"tau_0": 0.5, "gamma": 0.5**0.5, "keys": 4}  # kappa = 4; lambda = gamma; n_k = 4 keys (non-Gaussian logits)
MEAN_STEP = {"width": 1024, "samples": 12000}
COVARIANCE_STEP = {"width": 128, "samples": 4000}
ENTRIES = ((0, 1), (1, 2), (0, 0), (2, 2))
# n Cov's remainder is O(1/n) relative (its O(n^-1/2) terms are odd in W or S): bounded by 4 |Sigma| / n, stated
BIAS_WIDTHS = 4.0


def haar_state(state: np.ndarray, width: int, rng: np.random.Generator) -> np.ndarray:
    """One Z (m x n) with Z Z^T / n = ``state`` exactly (``frame_states``; the layers commute with Z -> Z O, so any Z
    of covariance V is as good as another)."""
    return frame_states(state, width, 1, rng)[0]


def attention_matrix(z: np.ndarray, tau: float, keys: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A and S (``shaped_attention``) with W_Q, W_K (n x n_k) drawn from ``rng``."""
    width = z.shape[-1]
    w_q = rng.standard_normal((width, keys))
    return shaped_attention(z, w_q, rng.standard_normal((width, keys)), tau)


def simulated_attention_mean(state: np.ndarray, width: int, samples: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """n (E[V' | Z] - V) of the attention block at one Z (``haar_state``), E over W exact (lambda^2 V + gamma^2 A V A^T)
    and over (W_Q, W_K) by ``samples`` draws less the control ``attention_first_order``: mean and standard error."""
    rng = random_stream(seed, (55, 3))
    z, g2 = haar_state(state, width, rng), BLOCK["gamma"] ** 2
    draws = np.empty((samples, *state.shape))
    for s in range(samples):
        a, scores = attention_matrix(z, BLOCK["tau_0"], BLOCK["keys"], rng)
        mean = (1 - g2) * state + g2 * a @ state @ a.T
        draws[s] = width * (mean - state) - np.sqrt(width) * g2 * attention_first_order(scores, state)
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(samples)


def shaped_mlp_activation(x: np.ndarray, width: int) -> tuple[np.ndarray, float]:
    """The shaped ReLU and its c (``shaped_relu``) at ``SHAPING``."""
    return shaped_relu(x, width, SHAPING[c_plus], SHAPING[c_minus])


def simulated_block(z: np.ndarray, rng: np.random.Generator, transformer: bool) -> tuple[np.ndarray, ...]:
    """One attention block (and the MLP half if ``transformer``) on Z, every weight drawn: (Z_out, A, S)."""
    width, g = z.shape[1], BLOCK["gamma"]
    lam = np.sqrt(1 - g**2)
    a, scores = attention_matrix(z, BLOCK["tau_0"], BLOCK["keys"], rng)
    z = lam * z + g * a @ z @ rng.standard_normal((width, width)) / np.sqrt(width)
    if transformer:
        hidden, c = shaped_mlp_activation(z @ rng.standard_normal((width, width)) / np.sqrt(width), width)
        z = lam * z + g * np.sqrt(c / width) * hidden @ rng.standard_normal((width, width))
    return z, a, scores


def simulated_covariance(
    state: np.ndarray, width: int, samples: int, transformer: bool, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """n Var(V'_ab) for ``ENTRIES`` over ``samples`` layers at one Z (every weight drawn), with standard errors."""
    rng = random_stream(seed, (55, 4 + transformer))
    z = haar_state(state, width, rng)
    moved = np.empty((samples, len(ENTRIES)))
    for s in range(samples):
        out, _, _ = simulated_block(z, rng, transformer)
        v = out @ out.T / width
        moved[s] = [v[a, b] for a, b in ENTRIES]
    squares = width * (moved - moved.mean(axis=0)) ** 2
    return squares.mean(axis=0), squares.std(axis=0, ddof=1) / np.sqrt(samples)


def simulated_transformer_mean(state: np.ndarray, width: int, samples: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """n (E[V'' | Z] - V) of the transformer block: E over W_2 exact (lambda^2 V' + gamma^2 c phi phi^T / n), less two
    controls of mean exactly 0: the attention half's n (V' - E_W V') + sqrt(n) gamma^2 (A_1 V + V A_1^T) and the hidden
    layer's gamma^2 (G G^T - n V') (G = Z' W_1 / sqrt(n), columns N(0, V') given Z')."""
    rng = random_stream(seed, (55, 6))
    z, g2 = haar_state(state, width, rng), BLOCK["gamma"] ** 2
    draws = np.empty((samples, *state.shape))
    for s in range(samples):
        moved, a, scores = simulated_block(z, rng, transformer=False)
        scores_free = (1 - g2) * state + g2 * a @ state @ a.T  # E_W V' given the attention weights
        pre = moved @ rng.standard_normal((width, width)) / np.sqrt(width)
        hidden, c = shaped_mlp_activation(pre, width)
        mlp = c * hidden @ hidden.T - pre @ pre.T  # n (c K - V') less the hidden control
        draws[s] = width * (scores_free - state) + g2 * mlp - np.sqrt(width) * g2 * attention_first_order(scores, state)
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(samples)


def _numeric(model, state: np.ndarray) -> dict:
    """Substitutions putting ``state`` and ``BLOCK``'s constants (and ``SHAPING``) into a model's symbols."""
    v = model.state
    values = {v[a, b]: state[a, b] for a in range(state.shape[0]) for b in range(state.shape[0])}
    return {**values, tau_0: BLOCK["tau_0"], gamma: BLOCK["gamma"], **SHAPING}


def _moment_rows(simulated: np.ndarray, se: np.ndarray, derived: np.ndarray, entries) -> list[dict]:
    return [
        {"entry": f"({a + 1},{b + 1})", "simulated": float(s), "se": float(e), "derived": float(d)}
        for (a, b), s, e, d in zip(entries, simulated, se, derived)
    ]


def moment_gap(rows: list[dict], allowance_fraction: float = 0.0) -> float:
    """The largest |simulated - derived| / (K_SE se + ``allowance_fraction`` |derived|) over ``rows``: below 1 when
    every simulated moment is within K_SE standard errors plus the stated O(1/n) remainder of the derived one (false
    failure about 6e-5 per entry at K_SE = 4)."""
    return max(
        abs(r["simulated"] - r["derived"]) / (K_SE * r["se"] + allowance_fraction * abs(r["derived"])) for r in rows
    )


def _check_moments(der: Derivation, what: str, rows: list[dict], allowance_fraction: float = 0.0) -> None:
    gap = moment_gap(rows, allowance_fraction)
    der.check(what, gap < 1, f"largest gap / allowance {gap:.2f}")


def _simulated_diffusion(der: Derivation, model, transformer: bool) -> None:
    width, samples = COVARIANCE_STEP["width"], COVARIANCE_STEP["samples"]
    state = np.array(STATE)
    simulated, se = simulated_covariance(state, width, samples, transformer)
    values = _numeric(model, state)
    derived = [float(model.diffusion(a, b, a, b).subs(values)) for a, b in ENTRIES]
    rows = _moment_rows(simulated, se, np.array(derived), ENTRIES)
    der.results["n Var(V'_ab), simulated at n = 128"] = rows
    _check_moments(
        der,
        f"simulated n Var(V'_ab) at n = {width} ({samples} layers, every weight drawn) equals Sigma_ab,ab",
        rows,
        BIAS_WIDTHS / width,
    )


def shaped_attention_covariance() -> Derivation:
    """The shaped attention block's covariance SDE (``ShapedAttention``): drift and diffusion for m tokens, the
    correlation SDE of two, each checked against a closed form and a simulated layer."""
    der = Derivation(
        "shaped_attention_covariance",
        "shaped attention (temperature tau_0 sqrt(n n_k)), t = l/n: dV = b(V) dt + Sigma(V)^(1/2) dB",
    )
    pair, model = ShapedAttention(2), ShapedAttention(3)
    drift, squared = correlation_sde(pair)
    equal_norms = {pair.state[0, 0]: 1, pair.state[1, 1]: 1}
    der.results.update(
        {
            "b(V), m = 2": pair.drift(),
            "Sigma_12,12, m = 2": sp.factor(pair.diffusion(0, 1, 0, 1)),
            "correlation drift at V_11 = V_22 = 1": sp.factor(drift.subs(equal_norms)),
            "correlation diffusion^2 at V_11 = V_22 = 1": sp.factor(squared.subs(equal_norms)),
        }
    )
    _check_expansion(der)
    zero = sp.zeros(3, 3)
    first, third = model.odd_orders()
    der.check(
        "the one-step mean's eps^1 and eps^3 coefficients are odd in the logits S (a degree count: S -> -S, i.e. "
        "W_Q -> -W_Q, leaves the weights' law unchanged, which is the premise, stated), so their means vanish and b/n "
        "is exact to O(n^-2) (m = 3; A_2 is seen as not odd)",
        is_odd(first, 3) and is_odd(third, 3) and not is_odd(softmax_expansion(3)[1], 3),
    )
    gap = (model.drift() - attention_drift_closed_form(model.state, 3)).applyfunc(sp.simplify)
    der.check("the derived drift equals the closed form from E[S_ij S_kl] = kappa V_ik V_jl (m = 3)", gap == zero)
    noise_gaps = [
        sp.simplify(model.attention_noise(*i) - attention_noise_closed_form(model.state, 3, i))
        for i in ((0, 1, 0, 1), (0, 1, 1, 2), (0, 0, 1, 2), (2, 2, 2, 2))
    ]
    der.check(
        "the attention noise's covariance equals gamma^4 kappa (V_ac R_bd + ...), R = V H V H V / m^2 (m = 3)",
        all(g == 0 for g in noise_gaps),
        f"{noise_gaps}",
    )
    ends = [(sp.simplify(drift.subs(rho, e)), sp.simplify(squared.subs(rho, e))) for e in (1, -1)]
    der.check("rho = +-1 are fixed points of the correlation (drift and diffusion 0)", ends == [(0, 0), (0, 0)])
    _simulated_attention_mean(der, model)
    _simulated_diffusion(der, model, transformer=False)
    return der


def _check_expansion(der: Derivation) -> None:
    """A_1 = (S - row mean) / m and A_2 = ((S - row mean)^2 - row variance) / (2 m), written by hand (m = 3)."""
    s = logit_symbols(3)
    first, second = softmax_expansion(3)
    centred = s - sp.Matrix(3, 3, lambda i, j: sum(s[i, :]) / 3)
    variance = [sum(centred[i, k] ** 2 for k in range(3)) / 3 for i in range(3)]
    hand_first = centred / 3
    hand_second = sp.Matrix(3, 3, lambda i, j: (centred[i, j] ** 2 - variance[i]) / 6)
    der.check(
        "the softmax's eps and eps^2 coefficients are the centred logits and their centred squares, over m (m = 3)",
        (first - hand_first).applyfunc(sp.expand) == sp.zeros(3, 3)
        and (second - hand_second).applyfunc(sp.expand) == sp.zeros(3, 3),
    )


def _simulated_attention_mean(der: Derivation, model: ShapedAttention) -> None:
    width, samples = MEAN_STEP["width"], MEAN_STEP["samples"]
    state = np.array(STATE)
    mean, se = simulated_attention_mean(state, width, samples)
    derived = np.array(model.drift().subs(_numeric(model, state)), dtype=float)
    entries = [(a, b) for a in range(3) for b in range(a, 3)]
    rows = _moment_rows(*(np.array([m[a, b] for a, b in entries]) for m in (mean, se, derived)), entries)
    der.results["n E[V' - V], simulated at n = 1024"] = rows
    _check_moments(
        der, f"simulated n E[V' - V] at n = {width} ({samples} draws of W_Q, W_K; n_k = 4) equals b(V)", rows
    )


def shaped_transformer_covariance() -> Derivation:
    """The shaped transformer block's covariance SDE (``ShapedTransformer``): the attention half's drift and diffusion
    plus the shaped MLP half's, checked on a simulated block."""
    der = Derivation(
        "shaped_transformer_covariance",
        "attention then shaped ReLU MLP, residual: b = b_attention + gamma^2 b_MLP, Sigma + 2 gamma^2 (VV + VV)",
    )
    model = ShapedTransformer(3)
    v = model.state
    mlp_part = sp.expand(model.diffusion(0, 1, 1, 2) - ShapedAttention(3).diffusion(0, 1, 1, 2))
    der.results.update(
        {
            "b_12(V) - b_12 of the attention": sp.simplify(model.drift()[0, 1] - ShapedAttention(3).drift()[0, 1]),
            "Sigma_12,23 - Sigma_12,23 of the attention": sp.factor(mlp_part),
        }
    )
    expected = 2 * gamma**2 * (v[0, 1] * v[1, 2] + v[0, 2] * v[1, 1])
    der.check(
        "the MLP half adds 2 gamma^2 (V_ac V_bd + V_ad V_bc) to Sigma (m = 3)", sp.expand(mlp_part - expected) == 0
    )
    _simulated_transformer_mean(der, model)
    _simulated_diffusion(der, model, transformer=True)
    return der


def _simulated_transformer_mean(der: Derivation, model: ShapedTransformer) -> None:
    """The simulated block's n E[V'' - V] against b_attention(V) + gamma^2 n (c K(V) - V), the MLP half's one-step mean
    exact in eps = n^-1/2 (``ShapedMLP.one_step_mean``), beside the limit drift."""
    width, samples = COVARIANCE_STEP["width"], 5000
    state = np.array(STATE)
    mean, se = simulated_transformer_mean(state, width, samples)
    values = _numeric(model, state)
    mlp = ShapedMLP(3)
    step = (mlp.one_step_mean().subs(values).subs(epsilon, width**-0.5) - sp.Matrix(state)) * width
    derived = np.array(ShapedAttention(3).drift().subs(values), float) + BLOCK["gamma"] ** 2 * np.array(step, float)
    entries = [(a, b) for a in range(3) for b in range(a, 3)]
    rows = _moment_rows(*(np.array([m[a, b] for a, b in entries]) for m in (mean, se, derived)), entries)
    der.results["n E[V'' - V], simulated at n = 128"] = rows
    der.results["b(V) at the state"] = np.array(model.drift().subs(values), float).round(5).tolist()
    what = f"simulated transformer block's n E[V'' - V] at n = {width} ({samples} blocks) equals the derived one"
    _check_moments(der, what, rows)
