"""Example (a): a Pre-LN variant of model F, its limit derived with ``verify`` and checked numerically.

Pre-LN puts the normalisation inside the residual branch: x_i <- x_i + sqrt(h) V a_i(N(X)), with N the
token-wise normalisation and a_i the softmax attention average. There is no normalisation after the
residual, so no Ito correction: one step is linear in dw, and ``verify.one_step_limit`` derives

    dx_i = dW a_i(N(X)),   drift 0,   Cov(dx_i, dx_j) = sigma^2 <a_i, a_j> I dt

(tokens leave the sphere: E|x_i|^2 grows like sigma^2 d |a_i|^2 t). ``verify.check_limit`` compares that with
the claimed SDE at random points to 30 digits; ``convergence.check_strong_order`` then drives the layer map
and the claim with one Brownian path (RMS order 1/2, same limit). Model F's Ito drift copied into the
Pre-LN claim is inconsistent, and both checks say so.

Run it:  python examples/pre_ln.py  (about 10 s)   or   python -m pytest examples/pre_ln.py
"""

import numpy as np
import sympy as sp

import convergence as cv
import verify

D, N, SIGMA, BETA = 3, 2, 0.5, 1.0
PATHS, HORIZON = 4096, 0.5  # tokens leave the sphere: at T = 1 the Euler reference is far from asymptotic
NOISE = cv.matrix_noise(D, SIGMA)


# --- the map and the claim in sympy (for the one-step expansion) ---------------------------------------
def attention_sym(xs, i):
    units = [x / sp.sqrt((x.T * x)[0]) for x in xs]
    weights = [sp.exp(BETA * (units[i].T * u)[0]) for u in units]
    return sum((w * u for w, u in zip(weights, units)), sp.zeros(D, 1)) / sum(weights)


def step_sym(xs, dw, h):
    """dw = sqrt(h) V: the d x d increment of the noise (sigma included), as in the numpy step."""
    return [xs[i] + dw * attention_sym(xs, i) for i in range(N)]


def claimed_drift_sym(xs):
    return [sp.zeros(D, 1) for _ in range(N)]


def claimed_diffusion_sym(xs, dw):
    """dw: the matrix Brownian increment (entry variance sigma^2 per unit time)."""
    return [dw * attention_sym(xs, i) for i in range(N)]


def model_f_drift_sym(xs):  # the wrong claim: model F's Ito correction, which Pre-LN does not have
    return [
        -sp.Rational(D - 1, 2) * SIGMA**2 * (attention_sym(xs, i).T * attention_sym(xs, i))[0] * xs[i] for i in range(N)
    ]


# --- the same in numpy (for the simulations) -----------------------------------------------------------
def attention(x):
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    scores = BETA * (u @ np.swapaxes(u, -1, -2))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ u


def step(x, dw, h):
    return x + attention(x) @ np.swapaxes(dw, -1, -2)


def model_f_drift(x):
    a = attention(x)
    return -0.5 * (D - 1) * SIGMA**2 * np.sum(a * a, axis=-1, keepdims=True) * x


LAYER = cv.layer_map(step, N, D, NOISE, name="Pre-LN")
CLAIM = cv.limit_sde(
    lambda x: np.zeros_like(x),
    lambda x, dw: attention(x) @ np.swapaxes(dw, -1, -2),
    N,
    D,
    NOISE,
    name="dx = dW a(N(X))",
)
WRONG = cv.limit_sde(model_f_drift, CLAIM.diffusion_fn, N, D, NOISE, name="with model F's Ito drift")


def test_the_expansion_gives_the_claimed_sde(depth_limits):
    depth_limits.assert_expansion_matches(step_sym, claimed_drift_sym, claimed_diffusion_sym, N, D, NOISE)
    assert not verify.check_limit(step_sym, model_f_drift_sym, claimed_diffusion_sym, N, D, NOISE).consistent


def test_the_layer_map_converges_to_the_claim(depth_limits):
    depth_limits.assert_strong_order(LAYER, CLAIM, order=0.5, paths=PATHS, horizon=HORIZON)


if __name__ == "__main__":
    derived = verify.one_step_limit(step_sym, N, D, NOISE)
    print("derived drift:", sp.simplify(derived.expand().drift.T))
    for drift in (claimed_drift_sym, model_f_drift_sym):
        print(drift.__name__, verify.check_limit(step_sym, drift, claimed_diffusion_sym, N, D, NOISE), sep="\n")
    for claim in (CLAIM, WRONG):
        print(cv.check_strong_order(LAYER, claim, paths=PATHS, horizon=HORIZON, title=claim.name).table(), end="\n\n")
