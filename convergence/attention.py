"""Self-attention averages on token batches shaped (paths, tokens, d).

Scores are ``beta <Q x_i, K x_j> = beta x_i^T (Q^T K) x_j``; the matrix ``Q^T K`` is called the
interaction matrix. Softmax subtracts each row's maximum before exponentiating, so weights stay
finite (and sum to one) for any beta up to 1e3 and any token geometry.
"""

from __future__ import annotations

import numpy as np


def attention_scores(x: np.ndarray, beta: float, interaction: np.ndarray | None = None) -> np.ndarray:
    """Scores ``beta x_i^T G x_j`` shaped (paths, tokens, tokens); ``G = I`` when ``interaction`` is None."""
    left = x if interaction is None else x @ interaction
    return beta * (left @ np.swapaxes(x, -1, -2))


def softmax_weights(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis, computed stably."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


SCORE_BYTES_PER_PATH = 2 * 2**20  # one path's block of scores; n x n attention beyond n = 512 goes in row blocks


def attention_average(x: np.ndarray, beta: float, interaction: np.ndarray | None = None) -> np.ndarray:
    """``a_i = sum_j softmax_j(beta x_i^T G x_j) x_j``, shaped like ``x`` (|a_i| <= max_j |x_j|).

    The n x n scores are formed for blocks of query rows at a time (``SCORE_BYTES_PER_PATH`` per path),
    so memory stays bounded for thousands of tokens; each row's softmax sees all n keys. The row block
    depends on n only (never on how paths are grouped), so results stay bit-identical across blocks.
    """
    n = x.shape[-2]
    rows = max(1, SCORE_BYTES_PER_PATH // (8 * n))
    if rows >= n:
        return softmax_weights(attention_scores(x, beta, interaction)) @ x
    left = x if interaction is None else x @ interaction
    keys = np.swapaxes(x, -1, -2)
    out = np.empty_like(x)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        out[..., start:stop, :] = softmax_weights(beta * (left[..., start:stop, :] @ keys)) @ x
    return out


def scaled_unnormalised_attention(x: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """``(u_i exp(-m_i), m_i)`` with ``u_i = (1/n) sum_j exp(beta <x_i, x_j>) x_j`` and ``m_i = max_j`` score.

    The unnormalised average overflows for beta > 709; returning it scaled by ``exp(-m_i)`` keeps every
    number finite, and a map that normalises afterwards only needs the scaled value.
    """
    scores = attention_scores(x, beta)
    top = scores.max(axis=-1, keepdims=True)
    scaled = (np.exp(scores - top) @ x) / x.shape[-2]
    return scaled, top


def tangent_projection(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``P_x v = v - <x, v> x / |x|^2`` token-wise: the orthogonal projection onto x's complement.

    On the sphere this is ``I - x x^T``; off it (where an unprojected integrator wanders) it stays an
    orthogonal projection, so an SDE's coefficients remain bounded near the sphere.
    """
    return v - (np.sum(x * v, axis=-1, keepdims=True) / np.sum(x * x, axis=-1, keepdims=True)) * x


def normalise(y: np.ndarray) -> np.ndarray:
    """Token-wise ``y / |y|`` (RMS normalisation to unit radius)."""
    return y / np.linalg.norm(y, axis=-1, keepdims=True)
