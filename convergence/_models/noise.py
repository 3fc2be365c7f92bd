"""Laws of the common noise of one layer.

A layer's noise is one random object shared by every token (common noise). Its increment over a
step h has mean 0 and covariance ``scale^2 h`` per entry. For Gaussian entries the increments over
consecutive steps are those of a Brownian motion, so coarse increments are exact block sums of fine
ones (the pathwise coupling of docs/models.md section 1); Rademacher and uniform entries (bounded, as the
theorem assumes) have the same first two moments but no such coupling: they are for weak studies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from verify._common import check_choice, check_int, check_real

ENTRY_LAWS = ("gaussian", "rademacher", "uniform")


FACTOR_FORMS = ("eigen", "symmetric", "lower", "pivoted")


def psd_factor(covariance: np.ndarray, form: str = "eigen") -> np.ndarray:
    """F with F F^T = ``covariance`` for a batch of symmetric PSD matrices (..., n, n). The suite's one factor of a
    covariance; every form is exact in law and valid for singular matrices (merged tokens).

    ``form``:
      eigen      V diag(sqrt(lambda)) from the symmetric eigendecomposition V diag(lambda) V^T, negative rounding
                 eigenvalues clipped to 0.
      symmetric  the symmetric root V diag(sqrt(lambda)) V^T: continuous in the matrix, also where it is singular.
      lower      the Cholesky factor L (lower triangular, positive diagonal; LAPACK ``dpotrf``): continuous where
                 the matrix is positive definite, and nested: the factor of the leading k x k block is the leading
                 block of L. About 20 times cheaper than ``symmetric`` at n = 16. A matrix ``dpotrf`` rejects
                 (singular to rounding) is factored column by column with its non-positive pivots' columns set
                 to 0, alone, so that every matrix's factor is the same in any batch.
      pivoted    the pivoted Cholesky factor F = P L with P^T C P = L L^T (LAPACK ``dpstrf``, stopping at the
                 numerical rank): about 60 times cheaper than ``symmetric`` at n = 64, but not continuous in the
                 matrix (the pivot order jumps), so only for sampling in law, never for pathwise couplings."""
    check_choice("form", form, FACTOR_FORMS)
    covariance = np.asarray(covariance, dtype=np.float64)
    first = covariance.reshape(-1, *covariance.shape[-2:])[:1]
    if covariance.ndim > 2 and np.array_equal(covariance, np.broadcast_to(first, covariance.shape)):
        # one matrix repeated (every sample at one state, as in the local checks): factored once, the same numbers
        return np.broadcast_to(psd_factor(first[0], form), covariance.shape).copy()
    if form == "lower":
        return _lower_cholesky(covariance)
    if form == "pivoted":
        return _pivoted_cholesky(covariance)
    values, vectors = np.linalg.eigh(covariance)
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]
    return factor @ np.swapaxes(vectors, -1, -2) if form == "symmetric" else factor


def _lower_cholesky(covariance: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:  # some matrix is singular to rounding: each alone (LAPACK's numbers for the rest)
        pass
    n = covariance.shape[-1]
    flat = covariance.reshape(-1, n, n)
    out = np.empty_like(flat)
    for i, matrix in enumerate(flat):
        try:
            out[i] = np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError:
            out[i] = _semidefinite_cholesky(matrix)
    return out.reshape(covariance.shape)


def _semidefinite_cholesky(matrix: np.ndarray) -> np.ndarray:
    """L L^T = ``matrix`` (PSD, n x n) by left-looking columns; a non-positive pivot (a direction the matrix does not
    have, to rounding) gives a zero column. Not finite in, not finite out."""
    if not np.all(np.isfinite(matrix)):
        return np.full_like(matrix, np.nan)
    n = matrix.shape[-1]
    lower = np.zeros_like(matrix)
    for j in range(n):
        row = lower[j, :j]
        pivot = matrix[j, j] - row @ row
        if pivot > 0.0:
            lower[j, j] = np.sqrt(pivot)
            lower[j + 1 :, j] = (matrix[j + 1 :, j] - lower[j + 1 :, :j] @ row) / lower[j, j]
    return lower


def _pivoted_cholesky(covariance: np.ndarray) -> np.ndarray:
    n = covariance.shape[-1]
    flat = covariance.reshape(-1, n, n)
    lowers, rows, ranks = np.empty_like(flat), np.empty(flat.shape[:2], dtype=np.intp), np.empty(len(flat), np.intp)
    for i, matrix in enumerate(flat):  # LAPACK one matrix at a time; the rest on the whole batch
        lowers[i], pivots, ranks[i], info = lapack.dpstrf(matrix, lower=1)
        if info < 0:
            raise ValueError(f"dpstrf rejected its argument {-info}")
        rows[i] = pivots[:n] - 1
    # the lower triangle, without the columns beyond the numerical rank
    lowers = np.where(np.arange(n)[None, None, :] < ranks[:, None, None], np.tril(lowers), 0.0)
    out = np.empty_like(flat)
    out[np.arange(len(flat))[:, None], rows] = lowers
    return out.reshape(covariance.shape)


def standard_entries(
    rng: np.random.Generator, shape: tuple[int, ...], law: str, out: np.ndarray | None = None
) -> np.ndarray:
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

    def standard(
        self, rng: np.random.Generator, shape: tuple[int, ...], out: np.ndarray | None = None, state: dict | None = None
    ) -> np.ndarray:
        """Draws of ``shape`` (leading axes, then ``self.shape``) before scaling by ``scale sqrt(h)``. ``state`` is
        a dict that lives as long as ``rng``'s stream (one per seed block), for noises that keep auxiliary streams
        across chunks of steps."""
        return standard_entries(rng, shape, self.law, out=out)

    def increments(self, rng: np.random.Generator, steps: int, h: float) -> np.ndarray:
        """``steps`` consecutive increments over steps of length ``h``: shape (steps, *shape)."""
        return (self.scale * np.sqrt(h)) * self.standard(rng, (steps, *self.shape))


@dataclass(frozen=True)
class JointNoise(CommonNoise):
    """Several independent noises of one layer (two value matrices, attention noise plus an MLP field, per-token
    plus common), packed into one flat array so that the machinery (seeded streams, block sums over nested grids,
    couplings) treats them as one noise: ``shape = (total size,)``, ``scale = 1``.

    When every part is plain Gaussian the packed entries are one normal draw (row-major, as for a single noise);
    otherwise each step draws each part in turn for all the paths of the seed block. Either way a chunk of steps
    continues each stream exactly, whatever the chunk length or the grouping of paths.
    ``split(dw)`` gives the parts back, shaped (paths, *part.shape) and scaled by each part's ``scale``: a layer
    map or an SDE driven by a joint noise receives them as a tuple or, when built from a mapping, a dict.
    """

    parts: tuple[tuple[object, CommonNoise], ...] = ()  # (the key the step sees, the part)
    mapping: bool = False

    laws = ENTRY_LAWS + ("mixed",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.parts:
            raise ValueError("a joint noise needs at least one part")
        for name, part in self.parts:
            if not isinstance(part, CommonNoise) or isinstance(part, JointNoise):
                raise TypeError(
                    f"noise part {name!r} must be a single CommonNoise (matrix_noise, field_noise, "
                    f"scalar_noise, per_token_noise), got {type(part).__name__}"
                )

    def _sizes(self) -> list[int]:
        return [int(np.prod(part.shape, dtype=int)) for _, part in self.parts]

    def standard(
        self, rng: np.random.Generator, shape: tuple[int, ...], out: np.ndarray | None = None, state: dict | None = None
    ) -> np.ndarray:
        lead, sizes = shape[:-1], self._sizes()
        if out is None:
            out = np.empty(shape)
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
        if all(part.law == "gaussian" and type(part).standard is CommonNoise.standard for _, part in self.parts):
            return rng.standard_normal(out=out)  # i.i.d. normals throughout: one draw, row-major
        state = {} if state is None else state
        steps = out.reshape(-1, *lead[1:], shape[-1]) if lead else out[None]
        for row in steps:  # step by step, so that chunks of steps continue the stream exactly
            start = 0
            for (name, part), size in zip(self.parts, sizes):
                draws = part.standard(rng, (*row.shape[:-1], *part.shape), state=state.setdefault(name, {}))
                row[..., start : start + size] = draws.reshape(*row.shape[:-1], size)
                start += size
        return out

    def split(self, dw: np.ndarray) -> tuple[np.ndarray, ...] | dict[str, np.ndarray]:
        """The parts of a packed increment (paths, total), each (paths, *part.shape) times its ``scale``."""
        lead, start, out = dw.shape[:-1], 0, []
        for (_, part), size in zip(self.parts, self._sizes()):
            out.append(part.scale * dw[..., start : start + size].reshape(*lead, *part.shape))
            start += size
        return {name: v for (name, _), v in zip(self.parts, out)} if self.mapping else tuple(out)


def joint_noise(parts) -> JointNoise:
    """Several independent noises of one layer (``JointNoise``), from a tuple of noises or a mapping name ->
    noise; the step receives ``dw`` in the same structure."""
    mapping = isinstance(parts, dict)
    items = tuple(parts.items()) if mapping else tuple(enumerate(parts))
    laws = {part.law for _, part in items if isinstance(part, CommonNoise)}
    law = laws.pop() if len(laws) == 1 else "mixed"
    nested = all(getattr(part, "nested", False) for _, part in items)
    size = sum(int(np.prod(getattr(part, "shape", ()), dtype=int)) for _, part in items)
    return JointNoise(shape=(max(size, 1),), scale=1.0, law=law, nested=nested, parts=items, mapping=mapping)


def matrix_noise(dim: int, sigma: float, law: str = "gaussian") -> CommonNoise:
    """A d x d matrix noise with entry variance ``sigma^2`` per unit time (model F's value matrices)."""
    return CommonNoise(shape=(check_int("dim", dim, minimum=2),) * 2, scale=sigma, law=law)


def scalar_noise(scale: float = 1.0, law: str = "gaussian") -> CommonNoise:
    """A scalar noise with variance ``scale^2`` per unit time (the hybrid model's xi_k)."""
    return CommonNoise(shape=(), scale=scale, law=law)
