"""Laws of the common noise of one layer.

A layer's noise is one random object shared by every token (common noise). Its increment over a
step h has mean 0 and covariance ``scale^2 h`` per entry. For Gaussian entries the increments over
consecutive steps are those of a Brownian motion, so coarse increments are exact block sums of fine
ones (the pathwise coupling of MATH.md section 1); Rademacher and uniform entries (bounded, as the
theorem assumes) have the same first two moments but no such coupling: they are for weak studies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify.common import check_choice, check_int, check_real

ENTRY_LAWS = ("gaussian", "rademacher", "uniform")


def psd_factor(covariance: np.ndarray, symmetric: bool = False) -> np.ndarray:
    """F with F F^T = ``covariance`` for a batch of symmetric PSD matrices (..., n, n), from the symmetric eigen-
    decomposition V diag(lambda) V^T with negative rounding eigenvalues clipped to 0: F = V diag(sqrt(lambda)), or the
    symmetric root V diag(sqrt(lambda)) V^T when ``symmetric``. Valid for singular matrices (merged tokens), where
    plain Cholesky fails. The suite's one factor of a covariance."""
    values, vectors = np.linalg.eigh(covariance)
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]
    return factor @ np.swapaxes(vectors, -1, -2) if symmetric else factor


def standard_entries(rng: np.random.Generator, shape: tuple[int, ...], law: str,
                     out: np.ndarray | None = None) -> np.ndarray:
    """I.i.d. entries with mean 0 and variance 1 of the given law, as float64 (into ``out`` when given:
    a C-contiguous float64 array of ``shape``; the numbers are the same either way).

    gaussian: N(0, 1); rademacher: +-1 with probability 1/2; uniform: U[-sqrt(3), sqrt(3)].
    """
    check_choice("law", law, ENTRY_LAWS)
    if law == "gaussian":
        return rng.standard_normal(shape) if out is None else rng.standard_normal(out=out)
    if law == "rademacher":
        values = 2.0 * rng.integers(0, 2, size=shape).astype(np.float64) - 1.0
    else:
        values = rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), size=shape)
    if out is None:
        return values
    out[...] = values
    return out


@dataclass(frozen=True)
class CommonNoise:
    """The law of one layer's common noise: an array of ``shape`` with i.i.d. entries.

    The increment over a step ``h`` is ``scale * sqrt(h) * E`` with ``E`` of the given entry law
    (mean 0, variance 1). ``shape`` is ``(d, d)`` for a matrix noise (model F: the increment is
    ``sqrt(h) V_k``, i.e. ``W_{t_{k+1}} - W_{t_k}``) and ``()`` for a scalar noise (hybrid model).
    """

    shape: tuple[int, ...]
    scale: float = 1.0
    law: str = "gaussian"
    nested: bool = True  # False when the array packs per-layer draws that are not Brownian increments

    laws = ENTRY_LAWS  # the laws this kind of noise can have (a subclass with its own sampler names its own)

    def __post_init__(self) -> None:
        for axis, size in enumerate(self.shape):
            check_int(f"shape[{axis}]", size, minimum=1)
        check_real("scale", self.scale, minimum=0.0)
        check_choice("law", self.law, self.laws)

    @property
    def brownian(self) -> bool:
        """True when increments are Gaussian, hence can be coupled to one Brownian path at every depth."""
        return self.law == "gaussian" and self.nested

    def standard(self, rng: np.random.Generator, shape: tuple[int, ...], out: np.ndarray | None = None,
                 state: dict | None = None) -> np.ndarray:
        """Draws of ``shape`` (leading axes, then ``self.shape``) before scaling by ``scale sqrt(h)``. ``state`` is
        a dict that lives as long as ``rng``'s stream (one per seed block), for noises that keep auxiliary streams
        across chunks of steps."""
        return standard_entries(rng, shape, self.law, out=out)

    def increments(self, rng: np.random.Generator, steps: int, h: float) -> np.ndarray:
        """``steps`` consecutive increments over steps of length ``h``: shape (steps, *shape)."""
        return (self.scale * np.sqrt(h)) * self.standard(rng, (steps, *self.shape))


def matrix_noise(dim: int, sigma: float, law: str = "gaussian") -> CommonNoise:
    """A d x d matrix noise with entry variance ``sigma^2`` per unit time (model F's value matrices)."""
    return CommonNoise(shape=(check_int("dim", dim, minimum=2),) * 2, scale=sigma, law=law)


def scalar_noise(scale: float = 1.0, law: str = "gaussian") -> CommonNoise:
    """A scalar noise with variance ``scale^2`` per unit time (the hybrid model's xi_k)."""
    return CommonNoise(shape=(), scale=scale, law=law)
