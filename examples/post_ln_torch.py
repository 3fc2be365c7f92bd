"""Example (c): a standard PyTorch block, ``torch.nn.TransformerEncoderLayer`` (post-LN), as a depth limit.

The block is x <- LN(x + SA(x)), x <- LN(x + FF(x)) with one head, GELU, no biases, no dropout and LayerNorm
without epsilon, so each LN maps a token onto the sphere of radius sqrt(d) in the plane orthogonal to
(1, ..., 1). At every layer the output weights of both residual branches (``self_attn.out_proj.weight``, d x d, and
``linear2.weight``, d x m) are fresh Gaussians of entry variance sigma^2 h: the branches are scaled by sqrt(h).
Q, K, V and the first feed-forward layer keep one template block's weights (as Q and K in model F).

Limit (derived here by ``verify.one_step_limit`` from the block written in sympy, and by hand): with
u_i = the attention output before out_proj and f_i = GELU(W_1 x_i), P_1 = I - 1 1^T / d,

    dx_i = (I - x_i x_i^T / d) P_1 (dW_1 u_i + dW_2 f_i) - ((d - 2) / (2 d)) sigma^2 (|u_i|^2 + |f_i|^2) x_i dt.

The Ito factor is (d - 2)/(2 d), not model F's (d - 1)/2: the LN sphere has dimension d - 2 and radius sqrt(d).
Copying model F's factor (at radius sqrt(d): (d - 1)/(2 d), the drift 1.5 times too large at d = 4) fails the
symbolic check, the local check and the weak check's claim_limit; a 5% drift error fails the local check. The weak
order of this block is not decidable at 16384 paths (reported inconclusive, not passed).

Run it:  python examples/post_ln_torch.py  (about a minute)   or   python -m pytest examples/post_ln_torch.py
Needs the torch extra: pip install torch==2.13.0 && pip install -e ".[torch]".
"""

import numpy as np
import sympy as sp
import torch
from scipy.special import erf

import convergence as cv
import verify

D, M, N, SIGMA = 4, 8, 2, 1.0
NOISE_PARAMETERS = {"self_attn.out_proj.weight": SIGMA, "linear2.weight": SIGMA}


def block():
    return torch.nn.TransformerEncoderLayer(
        D, 1, M, dropout=0.0, activation="gelu", layer_norm_eps=0.0, batch_first=True, norm_first=False, bias=False
    )


LAYER = cv.torch_layer_map(block, N, D, NOISE_PARAMETERS, name="post-LN encoder layer")
WEIGHTS = {k: v.detach().numpy() for k, v in LAYER.template.named_parameters()}  # Q, K, V, W_1: the template's
W_Q, W_K, W_V = np.split(WEIGHTS["self_attn.in_proj_weight"], 3)
W_1 = WEIGHTS["linear1.weight"]


def on_layer_norm_sphere(y):
    """The LayerNorm (no epsilon, no affine part): centre, then scale to radius sqrt(d)."""
    c = y - y.mean(axis=-1, keepdims=True)
    return np.sqrt(D) * c / np.linalg.norm(c, axis=-1, keepdims=True)


# --- the claimed limit in numpy ---------------------------------------------------------------------------
def features(x):
    """(u, f): the attention output before out_proj (one head, scores / sqrt(d)) and GELU(W_1 x)."""
    scores = (x @ W_Q.T) @ np.swapaxes(x @ W_K.T, -1, -2) / np.sqrt(D)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    pre = x @ W_1.T
    return weights @ (x @ W_V.T), 0.5 * pre * (1 + erf(pre / np.sqrt(2)))


def drift(x, ito=(D - 2) / (2 * D)):
    """Evaluated at the LayerNorm of x, so that Euler-Maruyama, which leaves the sphere, stays bounded."""
    x = on_layer_norm_sphere(x)
    u, f = features(x)
    return -ito * SIGMA**2 * (np.sum(u * u, axis=-1, keepdims=True) + np.sum(f * f, axis=-1, keepdims=True)) * x


def diffusion(x, dw):
    x = on_layer_norm_sphere(x)
    u, f = features(x)
    v = u @ np.swapaxes(dw["self_attn.out_proj.weight"], -1, -2) + f @ np.swapaxes(dw["linear2.weight"], -1, -2)
    v = v - v.mean(axis=-1, keepdims=True)
    return v - np.sum(x * v, axis=-1, keepdims=True) * x / D


CLAIM = cv.limit_sde(drift, diffusion, N, D, LAYER.noise, name="derived limit")
MODEL_F_FACTOR = cv.limit_sde(
    lambda x: drift(x, (D - 1) / (2 * D)), diffusion, N, D, LAYER.noise, name="model F's Ito factor"
)
DRIFT_5_PERCENT = cv.limit_sde(lambda x: 1.05 * drift(x), diffusion, N, D, LAYER.noise, name="drift x 1.05")
_rng = np.random.default_rng(5)
STATES = {
    "generic": on_layer_norm_sphere(_rng.standard_normal((N, D))),
    "near merged": on_layer_norm_sphere(_rng.standard_normal(D) + 0.1 * _rng.standard_normal((N, D))),
}
INITIAL = cv.sampled_state(
    lambda rng, paths, n, d: on_layer_norm_sphere(rng.standard_normal((paths, n, d))), unit=False
)


def overlap(x):
    return np.sum(x[:, 0] * x[:, 1], axis=-1) / D


# --- the block and the claim in sympy (written from the definition, not from torch) ------------------------
def _matrix(a):
    return sp.Matrix(a.tolist())


Q_SYM, K_SYM, V_SYM, W1_SYM = (_matrix(a) for a in (W_Q, W_K, W_V, W_1))


def layer_norm_sym(y):
    c = y - sp.ones(D, 1) * (sum(y) / D)
    return c * sp.sqrt(D) / sp.sqrt((c.T * c)[0])


def attention_sym(xs, i):
    weights = [sp.exp(((Q_SYM * xs[i]).T * (K_SYM * x))[0] / sp.sqrt(D)) for x in xs]
    return sum((w * (V_SYM * x) for w, x in zip(weights, xs)), sp.zeros(D, 1)) / sum(weights)


def feed_forward_sym(y):
    return (W1_SYM * y).applyfunc(lambda p: p * (1 + sp.erf(p / sp.sqrt(2))) / 2)


def step_sym(xs, dw, h):
    ys = [layer_norm_sym(xs[i] + dw["self_attn.out_proj.weight"] * attention_sym(xs, i)) for i in range(N)]
    return [layer_norm_sym(ys[i] + dw["linear2.weight"] * feed_forward_sym(ys[i])) for i in range(N)]


def drift_sym(xs, ito=sp.Rational(D - 2, 2 * D)):
    out = []
    for i in range(N):
        u, f = attention_sym(xs, i), feed_forward_sym(xs[i])
        out.append(-ito * SIGMA**2 * ((u.T * u)[0] + (f.T * f)[0]) * xs[i])
    return out


def diffusion_sym(xs, dw):
    out = []
    for i in range(N):
        v = dw["self_attn.out_proj.weight"] * attention_sym(xs, i) + dw["linear2.weight"] * feed_forward_sym(xs[i])
        v = v - sp.ones(D, 1) * (sum(v) / D)
        out.append(v - (xs[i].T * v)[0] * xs[i] / D)
    return out


def test_the_expansion_gives_the_derived_limit(depth_limits):
    points = list(STATES.values())  # on the LayerNorm sphere, where the limit lives
    depth_limits.assert_expansion_matches(step_sym, drift_sym, diffusion_sym, N, D, LAYER.noise, points=points)
    wrong = verify.check_limit(
        step_sym, lambda xs: drift_sym(xs, sp.Rational(D - 1, 2 * D)), diffusion_sym, N, D, LAYER.noise, points=points
    )
    assert not wrong.consistent


def test_one_torch_layer_has_the_derived_moments(depth_limits):
    depth_limits.assert_local_consistency(LAYER, CLAIM, states=STATES, target=0.02)


WEAK = {"depths": (2, 4, 8, 16), "paths": 16384, "initial": INITIAL, "near_misses": (0.5,)}


def test_the_torch_layers_converge_in_law_to_the_derived_limit():
    """The law at depth 16 agrees with the claim's (claim_limit) and the drift 1.5 times too large (model F's
    factor) is rejected on the same paths. The weak order itself is not decidable at this size (its interval
    spans orders 0 to 2; the note says about 22000 paths would make the differences significant): not a pass."""
    outcome = cv.check_weak_limit(LAYER, CLAIM, overlap, **WEAK)
    checks = {c.name: c for c in outcome.checks}
    assert checks["claim_limit"].verdict == "pass", outcome.table()
    assert checks["weak_order"].verdict != "fail", outcome.table()
    assert checks["rejects"].verdict == "pass", outcome.table()  # the near miss is rejected


if __name__ == "__main__":
    for drift_claim in (drift_sym, lambda xs: drift_sym(xs, sp.Rational(D - 1, 2 * D))):
        print(verify.check_limit(step_sym, drift_claim, diffusion_sym, N, D, LAYER.noise, points=list(STATES.values())))
    for claim in (CLAIM, MODEL_F_FACTOR, DRIFT_5_PERCENT):
        print(
            cv.check_local_consistency(LAYER, claim, states=STATES, target=0.02, title=claim.name).table(), end="\n\n"
        )
    print(cv.check_weak_limit(LAYER, CLAIM, overlap, **WEAK).table())
