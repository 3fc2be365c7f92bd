"""Small helpers shared by the tests."""

import numpy as np


def random_tokens(rng: np.random.Generator, paths: int, tokens: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((paths, tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
