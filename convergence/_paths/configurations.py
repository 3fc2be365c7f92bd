"""Token configurations: initial states (a fixed configuration on every path, a user's seeded sampler, two tokens at a
given overlap; ``brownian.uniform_sphere`` for i.i.d. uniform tokens), overlaps, and classes of final configurations.

An initial state is a function ``initial(streams, tokens, dim) -> (paths, tokens, d)`` drawing from the paths' own
initial-state streams (``brownian.PathStreams``), so it depends only on the seed and the paths' absolute indices.

With n tokens and tolerance delta on the overlaps G_ij = <x_i, x_j>:
  one cluster         every G_ij > 1 - delta
  balanced antipodal  two groups, G_ij > 1 - delta within and < -1 + delta across, equal sizes
  unbalanced antipodal  the same with unequal sizes
  other               anything else (several clusters, not yet converged, ...)
"""

from __future__ import annotations

import numpy as np


def _on_sphere(name: str, x: np.ndarray, tokens: int, dim: int, unit: bool = True) -> np.ndarray:
    if x.shape[-2:] != (tokens, dim):
        raise ValueError(f"{name} must give tokens of shape (..., {tokens}, {dim}) for this map, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} gave a non-finite token")
    if not unit:
        return x
    radius = np.linalg.norm(x, axis=-1)
    if np.max(np.abs(radius - 1.0)) > 1e-9:
        raise ValueError(
            f"{name} must give unit tokens (on the sphere), got norms from {radius.min():.6g} to "
            f"{radius.max():.6g}; pass unit=False for a map that lives elsewhere"
        )
    return x


def fixed_state(tokens: np.ndarray, unit: bool = True):
    """Initial state: the configuration ``tokens`` (n, d) on every path; unit rows unless ``unit=False`` (a map on
    R^d, or on a sphere of another radius)."""
    state = np.array(tokens, dtype=float)
    if state.ndim != 2:
        raise ValueError(f"tokens must be an array (n, d), got shape {state.shape}")
    _on_sphere("tokens", state, *state.shape, unit)

    def initial(streams, n, dim):
        return np.broadcast_to(_on_sphere("fixed_state", state, n, dim, unit), (streams.paths, n, dim)).copy()

    return initial


def sampled_state(sample, unit: bool = True):
    """Initial state from a user's sampler ``sample(rng, paths, tokens, dim) -> (paths, tokens, d)`` of unit tokens,
    called with each seed block's own generator (so the states depend only on the seed and the paths' indices).
    ``unit=False`` accepts tokens of any finite norm (a map whose state space is not the unit sphere, e.g. a
    LayerNorm's sphere of radius sqrt(d) in the plane orthogonal to (1, ..., 1))."""
    if not callable(sample):
        raise TypeError(f"sample must be callable (rng, paths, tokens, dim) -> array, got {type(sample).__name__}")

    def initial(streams, tokens, dim):
        def draw(rng, paths):
            x = np.asarray(sample(rng, paths, tokens, dim), dtype=float)
            if x.shape != (paths, tokens, dim):
                raise ValueError(
                    f"sample must return shape (paths, tokens, dim) = {(paths, tokens, dim)}, got {x.shape}"
                )
            return _on_sphere("sample", x, tokens, dim, unit)

        return streams.initial(draw)

    return initial


def path_states(states: np.ndarray, unit: bool = True):
    """Initial state: path i starts from ``states[i]`` (paths, n, d), e.g. the final states of an earlier run,
    continued under fresh noise (the chain is Markov). The block of paths ``start .. stop-1`` takes those rows, so
    no number depends on the block size."""
    state = np.array(states, dtype=float)
    if state.ndim != 3:
        raise ValueError(f"states must be an array (paths, n, d), got shape {state.shape}")
    _on_sphere("states", state, *state.shape[1:], unit)

    def initial(streams, n, dim):
        rows = state[streams.start : streams.start + streams.paths]
        if rows.shape != (streams.paths, n, dim):
            raise ValueError(
                f"states hold {state.shape[0]} paths of shape {state.shape[1:]}, but paths {streams.start}.."
                f"{streams.start + streams.paths - 1} of shape ({n}, {dim}) were asked for"
            )
        return rows.copy()

    return initial


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
