"""The numerical pieces of the width-indexed layers of docs/models.md, section 4b, written once for the derivations'
one-layer simulations and for the numerical side's width blocks: representations with a given covariance
(``frame_states``), the shaped ReLU (``shaped_relu``), the shaped attention matrix (``shaped_attention``) and its
first-order response, a control variate of mean exactly 0 (``attention_first_order``). Arrays carry any leading batch
axes: Z is (..., m, n).
"""

from __future__ import annotations

import numpy as np


def frame_states(state: np.ndarray, width: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` representations Z (m x n) with Z Z^T / n = ``state`` exactly: its Cholesky factor times a
    Haar-random orthonormal m-frame of R^n, scaled by sqrt(n); (samples, m, n). The frame is the Q of a Gaussian
    matrix's QR with each column's sign set by R's diagonal (Mezzadri 2007): LAPACK's Q alone is not Haar (its first
    column's first entry is never positive), which a coordinate-wise activation sees."""
    frames, triangles = np.linalg.qr(rng.standard_normal((samples, width, state.shape[0])))
    frames = frames * np.sign(np.diagonal(triangles, axis1=-2, axis2=-1))[:, None, :]
    return np.sqrt(width) * np.linalg.cholesky(state) @ np.swapaxes(frames, -1, -2)


def shaped_relu(x: np.ndarray, width: int, c_plus: float, c_minus: float) -> tuple[np.ndarray, float]:
    """phi(x) = s_+ max(x, 0) + s_- min(x, 0), s_+- = 1 + c_+- / sqrt(n), and c = 2 / (s_+^2 + s_-^2)."""
    s_plus, s_minus = 1 + c_plus / np.sqrt(width), 1 + c_minus / np.sqrt(width)
    return np.where(x > 0, s_plus * x, s_minus * x), 2 / (s_plus**2 + s_minus**2)


def shaped_attention(z: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, tau_0: float) -> tuple[np.ndarray, np.ndarray]:
    """A = I + softmax(logits) - 1/m, logits <q_i, k_j> / (tau_0 sqrt(n n_k)) with q = Z W_Q / sqrt(n), k = Z W_K /
    sqrt(n) (W_Q, W_K: n x n_k); and S = sqrt(n) logits, the logits' O(1) scale. Z (..., m, n)."""
    tokens, width = z.shape[-2:]
    keys = w_q.shape[-1]
    q, k = z @ w_q / np.sqrt(width), z @ w_k / np.sqrt(width)
    scores = q @ np.swapaxes(k, -1, -2) / (tau_0 * np.sqrt(keys))
    logits = scores / np.sqrt(width)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    softmax = weights / weights.sum(axis=-1, keepdims=True)
    return np.eye(tokens) + softmax - 1.0 / tokens, scores


def attention_first_order(scores: np.ndarray, state: np.ndarray) -> np.ndarray:
    """A_1 V + V A_1^T with A_1 = (S - row means) / m: linear in S, whose mean is 0 given Z (S is bilinear in the
    independent W_Q, W_K), so a control variate of mean exactly 0 whatever the drift."""
    first = (scores - scores.mean(axis=-1, keepdims=True)) / scores.shape[-1]
    return first @ state + state @ np.swapaxes(first, -1, -2)
