"""The states a local check is judged at: named configurations of n tokens on the unit sphere (uniform, merged,
antipodal, near merged), each drawn from a stream keyed by its name."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from .._runtime import random_stream

State = Callable[[np.random.Generator, int, int], np.ndarray]


def uniform_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """I.i.d. uniform tokens on the sphere: (tokens, d)."""
    x = rng.standard_normal((tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def merged_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Every token at one uniform point (the collapsed state)."""
    return np.repeat(uniform_state(rng, 1, dim), tokens, axis=0)


def antipodal_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Tokens alternately at a uniform point e and at -e (the antipodal state)."""
    e = uniform_state(rng, 1, dim)[0]
    return np.where((np.arange(tokens) % 2 == 0)[:, None], e, -e)


def near_merged_state(rng: np.random.Generator, tokens: int, dim: int) -> np.ndarray:
    """Tokens within about 1e-3 of one point (the Gram matrix is nearly singular)."""
    x = merged_state(rng, tokens, dim) + 1e-3 * rng.standard_normal((tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


STATES: dict[str, State] = {
    "uniform": uniform_state,
    "merged": merged_state,
    "antipodal": antipodal_state,
    "near merged": near_merged_state,
}


def name_key(name: str) -> int:
    """A state's stream key from its name (32 bits of its SHA-256), so a named state and its samples are the same
    whatever list it appears in, and at whatever place."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def states_for(tokens: int, dim: int, names: Sequence[str], seed: int, key: Sequence[int]) -> dict[str, np.ndarray]:
    """The named states of ``STATES`` for a map with ``tokens`` tokens in dimension ``dim`` (seeded)."""
    out = {}
    for name in names:
        if name not in STATES:
            raise ValueError(f"states must be names in {sorted(STATES)}, got {name!r}")
        rng = random_stream(seed, (*key, name_key(name), 2))
        out[name] = STATES[name](rng, tokens, dim)
    return out
