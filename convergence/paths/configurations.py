"""Token configurations: two-token initial states and overlaps, and classes of final configurations.

With n tokens and tolerance delta on the overlaps G_ij = <x_i, x_j>:
  one cluster         every G_ij > 1 - delta
  balanced antipodal  two groups, G_ij > 1 - delta within and < -1 + delta across, equal sizes
  unbalanced antipodal  the same with unequal sizes
  other               anything else (several clusters, not yet converged, ...)
"""

from __future__ import annotations

import numpy as np


def fixed_overlap(rho0: float):
    """Initial state: tokens e_1 and rho0 e_1 + sqrt(1 - rho0^2) e_2 on every path (two tokens)."""

    def initial(streams, tokens, dim):
        x = np.zeros((streams.paths, tokens, dim))
        x[:, 0, 0] = 1.0
        x[:, 1, 0], x[:, 1, 1] = rho0, np.sqrt(1 - rho0**2)
        return x

    return initial


def overlap(x: np.ndarray) -> np.ndarray:
    """rho = <x_0, x_1> per path."""
    return np.sum(x[:, 0] * x[:, 1], axis=-1)


CLASSES = ("one cluster", "balanced antipodal", "unbalanced antipodal", "other")


def classify(x: np.ndarray, delta: float = 0.01) -> np.ndarray:
    """Class index into ``CLASSES`` for each path of tokens (paths, n, d)."""
    gram = x @ np.swapaxes(x, -1, -2)
    side = gram[:, 0, :] > 0  # which tokens sit with token 0
    same = side[:, :, None] == side[:, None, :]
    aligned = np.where(same, gram > 1 - delta, gram < -1 + delta).all(axis=(-1, -2))
    group = side.sum(axis=1)
    n = x.shape[1]
    out = np.full(x.shape[0], 3)
    out[aligned & (group == n)] = 0
    two = aligned & (group < n)
    out[two & (2 * group == n)] = 1
    out[two & (2 * group != n)] = 2
    return out


def class_fractions(x: np.ndarray, delta: float = 0.01) -> dict[str, float]:
    counts = np.bincount(classify(x, delta), minlength=len(CLASSES))
    return {name: float(c) / x.shape[0] for name, c in zip(CLASSES, counts)}
