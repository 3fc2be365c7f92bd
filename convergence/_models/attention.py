"""Self-attention averages on token batches shaped (paths, tokens, d).

Scores are ``beta <Q x_i, K x_j> = beta x_i^T (Q^T K) x_j``; the matrix ``Q^T K`` is called the
interaction matrix. The softmax is shift-invariant; it is exponentiated unshifted when a bound on every
score, ``|beta| ||G||_2 max_j |x_j|^2``, is at most ``UNSHIFTED_BOUND`` (unit tokens at |beta| <= 300: no
exponent leaves [-300, 300], so nothing overflows or underflows), and otherwise after subtracting each row's
maximum, so weights stay finite (and sum to one) for any beta up to 1e3 and any token geometry. The
normalisation divides the weighted average, not the n x n weights, and the weights' row sums come out of the same
product as the average. Two tokens take a closed form (``two_token_average``): batched 2 x 2 products are numpy's
slow case.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

UNSHIFTED_BOUND = 300.0
# one block of scores: a quarter of the L2 cache of the machines measured; row blocks beyond n = 256
SCORE_BYTES = 2**19
# symmetric scores from this many tokens on take half the exponentials, in tiles of this many query rows (tiles of
# 32-64 rows were 1.2-1.3 times faster than the row blocks at n = 256-1024; at n = 128 about 1.06)
SYMMETRIC_TOKENS = 128
SYMMETRIC_TILE = 64


def attention_scores(x: np.ndarray, beta: float, interaction: np.ndarray | None = None) -> np.ndarray:
    """Scores ``beta x_i^T G x_j`` shaped (paths, tokens, tokens); ``G = I`` when ``interaction`` is None."""
    return _queries(x, beta, interaction) @ np.swapaxes(x, -1, -2)


def softmax_weights(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis, computed stably (row maximum subtracted)."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _queries(x: np.ndarray, beta: float, interaction: np.ndarray | None) -> np.ndarray:
    """``beta G^T``-transformed queries, so that scores are one matrix product: (beta x G) x^T."""
    return beta * x if interaction is None else x @ (beta * interaction)


def _needs_shift(x: np.ndarray, beta: float, interaction: np.ndarray | None) -> np.ndarray:
    """Per path (leading axes), whether the score bound |beta| ||G||_2 max_j |x_j|^2 exceeds ``UNSHIFTED_BOUND``."""
    norm = 1.0 if interaction is None else float(np.linalg.norm(interaction, 2))
    return abs(beta) * norm * np.max(np.einsum("...d,...d->...", x, x), axis=-1, initial=0.0) > UNSHIFTED_BOUND


def _softmax_average(scores: np.ndarray, extended: np.ndarray, shift: np.ndarray, out: np.ndarray) -> None:
    """``softmax(scores) @ values`` into ``out``, ``extended`` being ``[values, 1]``: one product gives the weighted
    sums and the row sums of the weights. ``scores`` is overwritten with the unnormalised weights; the paths flagged
    in ``shift`` have each row's maximum subtracted first."""
    if shift.any():
        scores -= np.where(shift[..., None, None], scores.max(axis=-1, keepdims=True), 0.0)
    np.exp(scores, out=scores)
    sums = scores @ extended
    np.divide(sums[..., :-1], sums[..., -1:], out=out)


def path_groups(paths: int, tokens: int) -> Iterator[slice]:
    """Consecutive paths whose ``tokens`` x ``tokens`` blocks of float64 fit in ``SCORE_BYTES`` together (at least
    one path a group), so that passes over them read from cache."""
    size = max(1, SCORE_BYTES // (8 * tokens * tokens))
    return (slice(first, first + size) for first in range(0, paths, size))


def attention_average(x: np.ndarray, beta: float, interaction: np.ndarray | None = None) -> np.ndarray:
    """``a_i = sum_j softmax_j(beta x_i^T G x_j) x_j``, shaped like ``x`` (|a_i| <= max_j |x_j|).

    The scores are formed for groups of paths, or for one path's blocks of query rows when n is large, of at most
    ``SCORE_BYTES`` each: the exponential and the products then read them from cache (1.6-1.8 times faster at
    n = 256-1024 than one array for 64 paths, 1.1 times at n = 32-128), and memory stays bounded for thousands of
    tokens; each row's softmax sees all n keys. When the scores are symmetric (G = G^T) and a path needs no shift,
    its weights are symmetric too and ``_symmetric_average`` exponentiates about half of them (n >=
    ``SYMMETRIC_TOKENS``). Every path's numbers come from products and elementwise operations on that path alone,
    and the blocks depend on n only, so results are bit-identical however paths are grouped.
    """
    n, dim = x.shape[-2:]
    if n == 2:
        return two_token_average(x, beta, interaction)
    flat = x.reshape(-1, n, dim)
    queries, shift = _queries(flat, beta, interaction), _needs_shift(flat, beta, interaction)
    extended = np.concatenate([flat, np.ones((*flat.shape[:-1], 1))], axis=-1)
    symmetric = ~shift if n >= SYMMETRIC_TOKENS and _is_symmetric(interaction) else np.zeros_like(shift)
    out = np.empty(flat.shape)
    if symmetric.all() or not symmetric.any():
        route = _symmetric_average if symmetric.all() else _row_block_average
        route(queries, flat, extended, shift, out)
    else:  # paths that need the shift beside paths that do not
        for paths, route in ((symmetric, _symmetric_average), (~symmetric, _row_block_average)):
            part = np.empty((int(paths.sum()), n, dim))
            route(queries[paths], flat[paths], extended[paths], shift[paths], part)
            out[paths] = part
    return out.reshape(x.shape)


def _is_symmetric(interaction: np.ndarray | None) -> bool:
    return interaction is None or np.array_equal(interaction, interaction.T)


def _row_block_average(
    queries: np.ndarray, flat: np.ndarray, extended: np.ndarray, shift: np.ndarray, out: np.ndarray
) -> None:
    """``attention_average`` of a (paths, n, d) batch into ``out``: every row against all n keys, in groups of paths
    or blocks of rows of at most ``SCORE_BYTES`` of scores."""
    n = flat.shape[1]
    rows = n if 8 * n * n <= SCORE_BYTES else max(1, SCORE_BYTES // (8 * n))
    for group in path_groups(flat.shape[0], n):
        keys = np.ascontiguousarray(np.swapaxes(flat[group], -1, -2))  # numpy's product is 2x slower on the view
        for start in range(0, n, rows):
            block = slice(start, start + rows)
            scores = queries[group, block, :] @ keys
            _softmax_average(scores, extended[group], shift[group], out[group, block, :])


def _symmetric_average(
    queries: np.ndarray, flat: np.ndarray, extended: np.ndarray, shift: np.ndarray, out: np.ndarray
) -> None:
    """``attention_average`` of a batch whose weights ``w_ij = exp(s_ij)`` are symmetric (G = G^T, no path shifted),
    into ``out``.

    Tile k holds the rows [k r, (k + 1) r) (r = ``SYMMETRIC_TILE``) and their weights on the keys from k r on only:
    the tile's rows take them as usual, and the rows after the tile take the same weights transposed as their
    weights on the tile's keys (w_ji = w_ij). That is n^2 / 2 + n r / 2 exponentials and scores instead of n^2
    (5/8 at n = 256), and the same products. ``shift`` is unused (all False)."""
    n, dim = flat.shape[1:]
    tile = SYMMETRIC_TILE
    size = max(1, SCORE_BYTES // (8 * tile * n))  # paths a group: the first tile's weights fit the byte budget
    for first in range(0, flat.shape[0], size):
        group = slice(first, first + size)
        keys = np.ascontiguousarray(np.swapaxes(flat[group], -1, -2))
        values = extended[group]
        sums = np.zeros(values.shape)
        for start in range(0, n, tile):
            rows, rest = slice(start, start + tile), slice(start + tile, n)
            weights = np.exp(queries[group, rows, :] @ keys[:, :, start:])
            sums[:, rows] += weights @ values[:, start:]
            if start + tile < n:
                sums[:, rest] += np.swapaxes(weights[:, :, tile:], -1, -2) @ values[:, rows]
        np.divide(sums[..., :-1], sums[..., -1:], out=out[group])


def two_token_average(x: np.ndarray, beta: float, interaction: np.ndarray | None = None) -> np.ndarray:
    """``attention_average`` for two tokens in closed form, equal to it up to rounding (about 3 times faster).

    With ``s = x_1 + x_2``, ``e = x_2 - x_1`` and ``u_i = beta x_i^T G e`` (the score of row i on x_2 less its score
    on x_1), row i puts the weight ``expit(u_i)`` on x_2 and ``1 - expit(u_i)`` on x_1, so
    ``a_i = s/2 + (tanh(u_i / 2) / 2) e``. tanh is finite for every argument, so no
    shift is needed at any beta, and |tanh| <= 1 keeps a_i a convex combination of the two tokens.
    """
    x1, x2 = x[..., 0, :], x[..., 1, :]
    e = x2 - x1
    if interaction is None:
        u1, u2 = beta * np.vecdot(x1, e), beta * np.vecdot(x2, e)
    else:
        g_e = e @ (beta * interaction).T
        u1, u2 = np.vecdot(x1, g_e), np.vecdot(x2, g_e)
    out = np.empty_like(x)
    np.multiply(0.5, x1 + x2, out=out[..., 0, :])
    out[..., 1, :] = out[..., 0, :]
    out[..., 0, :] += (0.5 * np.tanh(0.5 * u1))[..., None] * e
    out[..., 1, :] += (0.5 * np.tanh(0.5 * u2))[..., None] * e
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
    """Token-wise ``y / |y|`` (RMS normalisation to unit radius); ``vecdot`` is about 3 times faster than
    ``np.linalg.norm`` over the last axis of a batch of short vectors."""
    return y / np.sqrt(np.vecdot(y, y))[..., None]
