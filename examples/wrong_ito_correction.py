"""Example (b): a claimed limit SDE without the Ito correction is rejected.

Model F's layer x_i <- N(x_i + sqrt(h) V a_i) normalises every token, and the normalisation creates a radial
drift -(d-1)/2 sigma^2 |a_i|^2 x_i in the limit. Claiming dx_i = P_{x_i} dW a_i alone (a common mistake) is
wrong: the strong-order check drives the layer map and the claimed SDE with one Brownian path and finds
that they converge to different processes (``same_limit`` fails), while the right SDE passes.

Run it:  python examples/wrong_ito_correction.py        (prints both tables, about 5 s)
or as a test with the plugin:  python -m pytest examples/wrong_ito_correction.py
(the wrong claim's test fails with the table of levels; the right claim's test passes).
"""

import numpy as np

import convergence as cv

D, N, SIGMA, BETA = 4, 3, 0.5, 1.0
NOISE = cv.matrix_noise(D, SIGMA)  # dW: a d x d matrix, entries of variance sigma^2 per unit time


def attention(x):
    scores = BETA * (x @ np.swapaxes(x, -1, -2))
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ x


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def step(x, dw, h):
    """Model F's layer on (paths, tokens, d): x_i <- N(x_i + dW a_i), dw = sqrt(h) V."""
    return unit(x + attention(x) @ np.swapaxes(dw, -1, -2))


def diffusion(x, dw):
    """P_{x_i} dW a_i."""
    v = attention(unit(x)) @ np.swapaxes(dw, -1, -2)
    return v - np.sum(unit(x) * v, axis=-1, keepdims=True) * unit(x)


def ito_drift(x):
    """The Ito correction of the normalisation: -(d-1)/2 sigma^2 |a_i|^2 x_i."""
    a = attention(unit(x))
    return -0.5 * (D - 1) * SIGMA**2 * np.sum(a * a, axis=-1, keepdims=True) * unit(x)


LAYER = cv.layer_map(step, N, D, NOISE, name="model F")
RIGHT = cv.limit_sde(ito_drift, diffusion, N, D, NOISE, name="with Ito correction")
WRONG = cv.limit_sde(lambda x: np.zeros_like(x), diffusion, N, D, NOISE, name="without Ito correction")


def test_the_right_claim(depth_limits):
    depth_limits.assert_strong_order(LAYER, RIGHT, order=0.5)


def test_the_wrong_claim(depth_limits):  # fails on purpose: this is what a rejection looks like
    depth_limits.assert_strong_order(LAYER, WRONG, order=0.5)


if __name__ == "__main__":
    for claim in (RIGHT, WRONG):
        print(cv.check_strong_order(LAYER, claim, title=claim.name).table(), end="\n\n")
