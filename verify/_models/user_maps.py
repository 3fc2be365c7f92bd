"""A user's layer map, expanded symbolically: the limit SDE one step defines, checked against a claim.

The user writes one layer as a sympy function ``step(xs, dw, h)``, with the numeric side's conventions
(``convergence.layer_map``): ``xs`` the tokens (a list of n column vectors of d real symbols), ``dw`` the
layer's noise increment, ``scale sqrt(h) z`` with ``z`` standard (mean 0, variance 1) symbols of the
noise's shape, and ``h`` the step; it returns the n new token vectors. A layer with several independent
noises (two value matrices, attention noise plus an MLP field, per-token plus common) gets ``dw`` as a
tuple or a mapping in the structure its ``noise`` was given. With ``s = sqrt(h)``, Taylor's theorem at
s = 0 gives

    x_i' = x_i + s c1_i + s^2 c2_i + O(s^3),

and the moments E z = 0, E z_k z_l = [k = l] give the limit SDE of the layer map (Ito):

    drift_i = E c2_i,        covariance (i a, j b) = E c1_ia c1_jb,        E c1_i = 0 (required).

A claimed SDE ``dx = drift(x) dt + diffusion(x, dW)`` (``dW`` the noise's increment per unit time, scale
included, in the same structure) is consistent with the layer when its drift equals the derived one and its
diffusion has the derived covariance (the diffusion is determined up to a rotation of the noise, which does not
change the law). c1 is linear and c2 quadratic in z, so only these two moments enter: the result holds for any
entry law with mean 0 and variance 1.

Speed: the attention weights, norms and every other subexpression of the step that involves neither s nor z are
frozen into symbols first (``jets.Frozen``), and each node of what remains carries its jet through sums, products
and functions (``jets.Expansion``), so no derivative of a large expression is ever formed. A derivation is cached
per (step, tokens, dim, noise), so ``check_limit`` reuses ``one_step_limit``'s work, and numbers come from a
memoised walk of the expression DAG in mpmath (``evaluation.Evaluation``). The cache keys on the step function
itself: a step that reads global state changed since it was first expanded needs ``_derived.cache_clear()``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import mpmath
import sympy as sp
from tqdm.auto import tqdm

from .._calculus import token_symbols
from .._common import holding_precision, working_digits
from .evaluation import Evaluation, given_point, random_sphere_point
from .jets import Expansion, Frozen, s, unevaluated_product, unevaluated_sum

h = s**2
PROGRESS_DELAY = 2.0  # seconds before a derivation shows a progress bar
FLOAT_TOLERANCE = 1e-10  # when a claim or a map holds inexact floats, double precision bounds the agreement


@dataclass(frozen=True)
class NoisePart:
    """One independent noise of a layer: standard symbols ``z`` of ``shape`` scaled by ``scale``."""

    name: object  # the key the step sees (a dict key or a tuple index; "" for a single noise)
    shape: tuple[int, ...]
    scale: sp.Expr

    def symbols(self) -> list[sp.Symbol]:
        size = 1
        for n in self.shape:
            size *= n
        return [sp.Symbol(f"z{self.name}_{k}", real=True) for k in range(size)]

    def value(self, factor: sp.Expr) -> sp.Expr | sp.Matrix:
        """``scale factor z`` in the part's shape: a scalar for shape (), a column for (k,), a matrix for (a, b)."""
        z = [self.scale * factor * zk for zk in self.symbols()]
        if self.shape == ():
            return z[0]
        rows, cols = (self.shape[0], 1) if len(self.shape) == 1 else self.shape
        return sp.Matrix(rows, cols, z)


@dataclass(frozen=True)
class NoiseSpec:
    """A layer's noises: the parts and how the step receives them (``single``, ``tuple`` or ``mapping``)."""

    parts: tuple[NoisePart, ...]
    structure: str
    inexact: bool = False  # a scale arrived as a float: agreement is judged at double precision

    def symbols(self) -> list[sp.Symbol]:
        return [z for part in self.parts for z in part.symbols()]

    def value(self, factor: sp.Expr):
        """The increment handed to the user's functions: ``scale factor z`` per part, in the given structure."""
        values = [part.value(factor) for part in self.parts]
        if self.structure == "single":
            return values[0]
        if self.structure == "tuple":
            return tuple(values)
        return {part.name: v for part, v in zip(self.parts, values)}


def noise_spec(noise) -> NoiseSpec:
    """Read a layer's noise: an object with ``shape`` and ``scale`` (e.g. ``convergence.matrix_noise(d, sigma)``),
    a tuple of such objects, a mapping name -> object, or a joint noise with ``parts`` (``convergence.joint_noise``).
    Shapes of at most two axes. A float scale is read as the simplest exact number with that value
    (``sympy.nsimplify``: 0.5 as 1/2, 1/sqrt(3) as sqrt(3)/3), and ``check_limit`` then judges at double precision
    (``FLOAT_TOLERANCE``): nsimplify cannot always recover the number the float rounds."""
    parts = getattr(noise, "parts", None)
    if parts is not None:
        return noise_spec(dict(parts) if getattr(noise, "mapping", False) else tuple(p for _, p in parts))
    if isinstance(noise, Mapping):
        items, structure = list(noise.items()), "mapping"
    elif isinstance(noise, (tuple, list)):
        items, structure = list(enumerate(noise)), "tuple"
    else:
        items, structure = [("", noise)], "single"
    if not items:
        raise ValueError("noise must hold at least one noise, got an empty collection")
    specs = []
    for name, part in items:
        shape, scale = getattr(part, "shape", None), getattr(part, "scale", None)
        if shape is None or scale is None:
            raise TypeError(
                f"noise{f'[{name!r}]' if name else ''} must have a shape and a scale (e.g. "
                f"convergence.matrix_noise(d, sigma)), got {type(part).__name__}"
            )
        shape = tuple(int(n) for n in shape)
        if len(shape) > 2 or any(n < 1 for n in shape):
            raise ValueError(
                f"noise{f'[{name!r}]' if name else ''} shape must have at most two positive axes, got {shape}"
            )
        specs.append(NoisePart(name, shape, sp.nsimplify(scale) if isinstance(scale, float) else sp.sympify(scale)))
    inexact = any(isinstance(getattr(part, "scale", None), float) for _, part in items)
    return NoiseSpec(tuple(specs), structure, inexact)


@dataclass(frozen=True)
class StepLimit:
    """The derived limit of one step: per-token drift vectors, the noise loadings (column k is the order-s
        coefficient's derivative in z_k, so the diffusion covariance is ``loadings loadings^T``) and the mean of the
        order-s term and the step's change at h = 0, ``step(x, 0, 0) - x`` (both must be 0). Entries are written in the
    frozen symbols ``frozen_k``; ``definitions`` gives each in
        the token symbols ``tokens`` (``expand()`` substitutes them)."""

    tokens: list[sp.Matrix]
    drift: sp.Matrix
    loadings: sp.Matrix
    first_order_mean: sp.Matrix
    zeroth_order: sp.Matrix
    definitions: dict[sp.Symbol, sp.Expr]

    @property
    def covariance(self) -> sp.Matrix:
        return self.loadings * self.loadings.T

    def generator(self, f: sp.Expr) -> sp.Expr:
        """The Ito generator of the limit applied to ``f`` (an expression in the token symbols):
        L f = sum_r drift_r df/dx_r + 1/2 sum_{r,q} (J J^T)_{rq} d2f/dx_r dx_q, with J the loadings (all the layer's
        noises together). Written in the frozen symbols like the coefficients (``evaluate`` gives numbers)."""
        flat = [symbol for token in self.tokens for symbol in token]
        gradient = [f.diff(x) for x in flat]
        first = unevaluated_sum([unevaluated_product(self.drift[r], g) for r, g in enumerate(gradient) if g != 0])
        # 1/2 sum_k (J_k . grad)^2 f: the second-order part through each noise column
        second = []
        for k in range(self.loadings.cols):
            column = [self.loadings[r, k] for r in range(len(flat))]
            second += [
                unevaluated_product(sp.S.Half, column[r], column[q], gradient[r].diff(flat[q]))
                for r in range(len(flat))
                if column[r] is not sp.S.Zero and gradient[r] != 0
                for q in range(len(flat))
                if column[q] is not sp.S.Zero
            ]
        return unevaluated_sum([first, *second])

    def evaluate(self, expr: sp.Expr, tokens) -> float:
        """``expr`` (in the token and frozen symbols) at the state ``tokens`` shaped (n, d), at mpmath's precision."""
        return Evaluation(given_point(self.tokens, tokens), self.definitions)(expr)

    def expand(self) -> StepLimit:
        """The same limit with the frozen symbols substituted and every sum and product evaluated (large
        expressions for attention maps)."""
        subs = self.definitions
        return StepLimit(
            self.tokens,
            *(m.xreplace(subs).doit() for m in (self.drift, self.loadings, self.first_order_mean, self.zeroth_order)),
            {},
        )


def _stack(vectors: Sequence, what: str, tokens: int, dim: int) -> sp.Matrix:
    if len(vectors) != tokens:
        raise ValueError(f"{what} must return {tokens} token vectors, got {len(vectors)}")
    out = []
    for i, v in enumerate(vectors):
        v = sp.Matrix(v)
        if v.shape != (dim, 1):
            raise ValueError(f"{what} must return column vectors of shape ({dim}, 1); token {i} has {v.shape}")
        out.append(v)
    return sp.Matrix.vstack(*out)


@holding_precision()  # nsimplify of a float scale, and floats substituted into cosh & co., set mpmath's precision
def one_step_limit(step: Callable, tokens: int, dim: int, noise, progress: bool = True) -> StepLimit:
    """Expand ``step(xs, dw, h)`` to order h and take the noise's moments (module docstring); cached.

    Each node of the step's expression carries its jet (``Jet``: value, order-s mean, first-order loadings on
    the noise entries and the averaged order-h part), combined by the sum, product and Ito chain rules, so no
    derivative of a large expression is ever formed. A progress bar appears when the derivation takes longer
    than ``PROGRESS_DELAY`` seconds (``progress=False`` hides it).
    """
    return _derived(step, int(tokens), int(dim), noise_spec(noise), bool(progress))


@lru_cache(maxsize=64)
def _derived(step: Callable, tokens: int, dim: int, spec: NoiseSpec, progress: bool) -> StepLimit:
    xs = token_symbols(tokens, dim)
    noise = spec.symbols()
    frozen = Frozen({s, *noise})
    flat = _stack(step(xs, spec.value(sp.S.One), h), "step(xs, dw, h)", tokens, dim).applyfunc(frozen)
    expansion = Expansion(noise)
    jets = []
    for entry in tqdm(
        flat,
        desc=f"one_step_limit (n = {tokens}, d = {dim}, {len(noise)} noise entries)",
        delay=PROGRESS_DELAY,
        disable=not progress,
        leave=False,
    ):
        jets.append(expansion(entry))
    loadings = sp.zeros(flat.rows, len(noise))
    for r, jet in enumerate(jets):
        for k, c in jet.linear:
            loadings[r, k] = c
    x = _stack(xs, "tokens", tokens, dim)
    return StepLimit(
        xs,
        sp.Matrix([j.drift for j in jets]),
        loadings,
        sp.Matrix([j.mean for j in jets]),
        sp.Matrix(
            [unevaluated_sum([j.value, unevaluated_product(sp.S.NegativeOne, x[r])]) for r, j in enumerate(jets)]
        ),
        frozen.definitions,
    )


def claimed_loadings(diffusion: Callable, xs: list[sp.Matrix], noise, frozen: Frozen | None = None) -> sp.Matrix:
    """The loadings of a claimed diffusion ``diffusion(xs, dW) -> n vectors`` (linear in dW, the increment per
    unit time with the noise's scale): column k is its derivative in z_k (the first-order part of its jet).
    With ``frozen``, written in its symbols (the subexpressions free of the noise frozen); otherwise in the token
    symbols."""
    spec = noise_spec(noise)
    z = spec.symbols()
    freeze = Frozen(set(z)) if frozen is None else frozen
    flat = _stack(diffusion(xs, spec.value(sp.S.One)), "diffusion(xs, dw)", len(xs), xs[0].rows).applyfunc(freeze)
    expansion = Expansion(z)
    loadings = sp.zeros(flat.rows, len(z))
    for r, entry in enumerate(flat):
        for k, c in expansion(entry).linear:
            loadings[r, k] = c
    return freeze.back(loadings) if frozen is None else loadings


@dataclass(frozen=True)
class LimitComparison:
    """Derived against claimed coefficients: the largest absolute differences over the points, whether all are
    below ``tolerance``, and the entries that differ most at the worst point, derived and claimed side by side
    (``str(comparison)`` prints them)."""

    drift: float
    covariance: float
    first_order_mean: float
    tolerance: float
    rows: tuple[tuple[str, str, float, float], ...]  # (coefficient, entry, derived, claimed)
    zeroth_order: float = 0.0  # step(x, 0, 0) - x: a layer that moves tokens without noise has no such limit

    @property
    def consistent(self) -> bool:
        return max(self.drift, self.covariance, self.first_order_mean, self.zeroth_order) < self.tolerance

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __str__(self) -> str:
        verdict = "consistent" if self.consistent else "NOT consistent"
        lines = [
            f"one-step expansion against the claim: {verdict} (largest differences: drift {self.drift:.3g}, "
            f"covariance {self.covariance:.3g}, order-sqrt(h) mean {self.first_order_mean:.3g}, step at h = 0 "
            f"{self.zeroth_order:.3g}; tolerance "
            f"{self.tolerance:.0e})"
        ]
        if self.rows:
            lines.append(f"  {'coefficient':<17} {'entry':<16} {'derived':>14} {'claimed':>14} {'claimed/derived':>16}")
            for name, entry, derived, claimed in self.rows:
                ratio = f"{claimed / derived:16.6g}" if derived else f"{'-':>16}"
                lines.append(f"  {name:<17} {entry:<16} {derived:14.8g} {claimed:14.8g} {ratio}")
        return "\n".join(lines)


def _entry_label(name: str, index: tuple[int, int], tokens: list[sp.Matrix]) -> str:
    """``x1_2`` for drift entries, ``(x0_1, x2_3)`` for covariance entries."""
    flat = [symbol for token in tokens for symbol in token]
    return str(flat[index[0]]) if name != "covariance" else f"({flat[index[0]]}, {flat[index[1]]})"


@holding_precision()  # as one_step_limit: the claim's sympy work on floats sets mpmath's precision too
def check_limit(
    step: Callable,
    drift: Callable,
    diffusion: Callable,
    tokens: int,
    dim: int,
    noise,
    points: int | Sequence = 4,
    dps: int = 30,
    seed: int = 0,
    shown: int = 6,
) -> LimitComparison:
    """Derived against claimed coefficients at ``points`` random points of the unit sphere, ``dps`` digits; or at
    the given states (a sequence of (n, d) arrays) when the map lives elsewhere (e.g. a LayerNorm's sphere of
    radius sqrt(d) in the plane orthogonal to (1, ..., 1)): float states are judged at ``FLOAT_TOLERANCE``.

    ``drift(xs) -> n vectors`` and ``diffusion(xs, dW) -> n vectors`` (sympy; ``dW`` as in ``step`` but per unit
    time). Consistent when the largest differences of drift, covariance, first-order mean and the step's change at
    h = 0 are all below
    10^(5 - dps), or ``FLOAT_TOLERANCE`` when the map or the claim holds inexact floats; the ``shown`` entries that
    differ most at the worst point are kept, derived beside claimed. Covariances are formed from the loadings in numbers
    (J J^T at each point), never as symbolic products.
    """
    derived = one_step_limit(step, tokens, dim, noise)
    xs = derived.tokens
    frozen = Frozen(set(noise_spec(noise).symbols()), derived.definitions)  # the claim shares the derivation's
    claimed_drift = _stack(drift(xs), "drift(xs)", tokens, dim).applyfunc(frozen)
    claimed_j = claimed_loadings(diffusion, xs, noise, frozen)
    residuals = dict.fromkeys(("drift", "covariance", "first_order_mean", "zeroth_order"), mpmath.mpf(0))
    worst: dict[str, tuple] = {}
    generator = random.Random(seed)
    given = None if isinstance(points, int) else [given_point(xs, state) for state in points]
    with working_digits(dps):
        for index in range(points if given is None else len(given)):
            point = random_sphere_point(xs, generator) if given is None else given[index]
            value = Evaluation(point, frozen.definitions)
            drift_a, j_a, mean_a, zeroth_a, drift_b, j_b = (
                value.matrix(m)
                for m in (
                    derived.drift,
                    derived.loadings,
                    derived.first_order_mean,
                    derived.zeroth_order,
                    claimed_drift,
                    claimed_j,
                )
            )
            pairs = {
                "drift": (drift_a, drift_b),
                "covariance": (j_a * j_a.T, j_b * j_b.T),
                "first_order_mean": (mean_a, mpmath.zeros(mean_a.rows, 1)),
                "zeroth_order": (zeroth_a, mpmath.zeros(zeroth_a.rows, 1)),
            }
            for name, (a, b) in pairs.items():
                difference = max(abs(a[r, c] - b[r, c]) for r in range(a.rows) for c in range(a.cols))
                if difference >= residuals[name]:
                    residuals[name], worst[name] = difference, (a, b)
        tolerance = mpmath.mpf(10) ** (5 - dps)
    inexact = any(
        expr.has(sp.Float)
        for expr in (derived.drift, derived.loadings, claimed_drift, claimed_j, *frozen.definitions.values())
    )
    if inexact or given is not None or noise_spec(noise).inexact:
        tolerance = max(tolerance, mpmath.mpf(FLOAT_TOLERANCE))
    rows = []
    for name, (a, b) in worst.items():
        if residuals[name] < tolerance:
            continue
        entries = sorted(((abs(a[r, c] - b[r, c]), r, c) for r in range(a.rows) for c in range(a.cols)), reverse=True)
        rows += [(name, _entry_label(name, (r, c), xs), float(a[r, c]), float(b[r, c])) for _, r, c in entries[:shown]]
    return LimitComparison(
        float(residuals["drift"]),
        float(residuals["covariance"]),
        float(residuals["first_order_mean"]),
        float(tolerance),
        tuple(rows),
        float(residuals["zeroth_order"]),
    )
