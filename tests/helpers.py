"""Small helpers shared by the tests."""

import numpy as np


def assert_equal_to_rounding(actual: np.ndarray, desired: np.ndarray) -> None:
    """Equal to rounding (relative 1e-12): what the suite promises across compute-block sizes, where numpy may sum a
    path's numbers in another order for another batch (``convergence._runtime.blocks``)."""
    np.testing.assert_allclose(actual, desired, rtol=1e-12, atol=1e-15)


def random_tokens(rng: np.random.Generator, paths: int, tokens: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((paths, tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
