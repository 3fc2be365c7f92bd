"""Plain per-path, per-token loop implementations of the layer maps: the oracle for the vectorised code.

Written straight from docs/models.md section 1 with Python loops and math.exp, sharing no code with convergence.
"""

from __future__ import annotations

import math

import numpy as np


def fedorov_layer_loop(x, dw, h, beta, interaction=None, mean_value=None):
    paths, n, d = x.shape
    g = np.eye(d) if interaction is None else interaction
    out = np.empty_like(x)
    for p in range(paths):
        for i in range(n):
            scores = [beta * float(x[p, i] @ g @ x[p, j]) for j in range(n)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            a = sum(w / total * x[p, j] for j, w in enumerate(weights))
            y = x[p, i] + dw[p] @ a
            if mean_value is not None:
                y = y + h * (mean_value @ a)
            out[p, i] = y / math.sqrt(float(y @ y))
    return out


def hybrid_layer_loop(x, db, h, beta, eps):
    paths, n, d = x.shape
    out = np.empty_like(x)
    for p in range(paths):
        for i in range(n):
            u = sum(math.exp(beta * float(x[p, i] @ x[p, j])) * x[p, j] for j in range(n)) / n
            y = x[p, i] + h * u + eps * db[p] * u
            out[p, i] = y / math.sqrt(float(y @ y))
    return out
