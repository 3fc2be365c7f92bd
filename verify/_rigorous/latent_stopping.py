"""Rigorous evaluation of the latent diffusion stopping problem (formulas derived in
``verify._models.latent_variances``).

Conventions (docs/models.md section 4 leaves them open; these are ours, stated in every report):

* Backward time ``t`` in [0, T]; ``t = T`` is the full run, forward time ``u = T - t`` remains.
* ``start="forward"`` (default): the backward run starts from the sampler's own Gaussian at time T, i.e.
  ``N(0, tau2(T))`` per coordinate with ``tau2`` built from the variances the score uses (the exact law of Z_T for
  the exact score). ``start="standard"``: from N(0, I).
* Latent dimension d keeps coordinates 1..d (the largest variances); the decoded sample is zero beyond d.
* Switching times ``t_1 <= ... <= t_D`` and ``t_{D+1} = T``: coordinate j lowers the distance exactly for
  ``t > t_j`` (exact score, forward start), so the optimal latent dimension is d on ``(t_d, t_{d+1})``.

Every formula takes a context ``ctx``: ``mpmath.mp`` for numbers, ``BALLS`` (``balls``, python-flint's arb) for
enclosures over a box of times (certified signs: a sign is asserted only when a whole box has it; undecided gives
None), and ``FLOATS`` for numpy float64 arrays of times (uncapped scores): one call per scan or plot.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import flint
import mpmath
import numpy as np

from .._common import working_bits, working_digits
from .balls import BALLS


class FloatContext:
    """The context ``FLOATS``: the closed forms on numpy float64 arrays of times, evaluated at all of them in one call
    (scans for sign changes, plots). Rounded like ``mpmath.mp`` at its default 53 bits, up to an ulp of numpy's
    exp and sqrt; nothing is certified (``BALLS`` is), and capped scores (a branch per time) need ``mpmath.mp``."""

    mpf = staticmethod(lambda x: np.float64(x) if np.ndim(x) == 0 else np.asarray(x, dtype=np.float64))
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sqrt = staticmethod(np.sqrt)


FLOATS = FloatContext()

STARTS = ("forward", "standard")


def _variances(name: str, values: Sequence[float], decreasing: bool) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if not out:
        raise ValueError(f"{name} must hold at least one variance")
    if not all(math.isfinite(v) and v >= 0 for v in out):
        raise ValueError(f"{name} must be finite and >= 0, got {out}")
    if decreasing and any(b > a for a, b in zip(out, out[1:])):
        raise ValueError(f"{name} must be given in decreasing order (largest first), got {out}")
    return out


@dataclass(frozen=True)
class LatentSetting:
    """Data variances ``s_j^2`` (decreasing), horizon T, the score's variances (None: exact score), the cap C of
    the score coefficient (None: no cap; C > 1) and the start law of the backward run."""

    variances: tuple[float, ...]
    horizon: float = 2.0
    variances_hat: tuple[float, ...] | None = None
    cap: float | None = None
    start: str = "forward"

    def __post_init__(self) -> None:
        object.__setattr__(self, "variances", _variances("variances", self.variances, decreasing=True))
        if not (math.isfinite(self.horizon) and self.horizon > 0):
            raise ValueError(f"T must be finite and > 0, got {self.horizon!r}")
        if self.variances_hat is not None:
            hat = _variances("variances_hat", self.variances_hat, decreasing=False)
            if len(hat) != len(self.variances):
                raise ValueError(f"variances_hat must have {len(self.variances)} entries, got {len(hat)}")
            object.__setattr__(self, "variances_hat", hat)
        if self.cap is not None and not (math.isfinite(self.cap) and self.cap > 1):
            raise ValueError(f"cap C must be finite and > 1, got {self.cap!r}")
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {self.start!r}")

    @property
    def dim(self) -> int:
        return len(self.variances)

    def model_variance(self, j: int) -> float:
        """The variance the score of coordinate j (0-based) is built from."""
        return self.variances[j] if self.variances_hat is None else self.variances_hat[j]

    def check_dimension(self, d: int) -> int:
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= self.dim:
            raise ValueError(f"latent dimension d must be an integer in [0, {self.dim}], got {d!r}")
        return d

    def check_time(self, t) -> None:
        if not 0 <= float(t) <= self.horizon:
            raise ValueError(f"backward time t must be in [0, T = {self.horizon}], got {t!r}")


def model_variance_path(ctx, q, u):
    """``tau2(u) = 1 + e^{-2u} (q - 1)``: the score model's variance at forward time u."""
    return 1 + ctx.exp(-2 * u) * (q - 1)


def _uncapped(ctx, q, t, horizon, start_variance):
    tau_now, tau_start = model_variance_path(ctx, q, horizon - t), model_variance_path(ctx, q, horizon)
    return tau_now + (start_variance - tau_start) * (tau_now / tau_start) ** 2 * ctx.exp(-2 * t)


def cap_release_time(ctx, q: float, cap: float, horizon: float):
    """Backward time from which the cap binds (``1/tau2 > C``), or None if it never does on [0, T]; in the mpmath
    context ``ctx``."""
    if q >= 1 / cap:
        return None
    u_star = ctx.log((1 - q) / (1 - 1 / ctx.mpf(cap))) / 2
    return max(ctx.mpf(0), horizon - u_star)


def decoded_variance(ctx, setting: LatentSetting, j: int, t):
    """The variance of latent coordinate j (0-based) at backward time t (closed forms of ``latent_diffusion``)."""
    q = ctx.mpf(setting.model_variance(j))
    horizon = ctx.mpf(setting.horizon)
    start = model_variance_path(ctx, q, horizon) if setting.start == "forward" else ctx.mpf(1)
    if setting.cap is None or setting.model_variance(j) >= 1 / setting.cap:  # the cap never binds
        return _uncapped(ctx, q, t, horizon, start)
    if not isinstance(ctx, mpmath.ctx_mp.MPContext):
        raise ValueError(f"capped variances are evaluated in an mpmath context (mpmath.mp, DOUBLE), got {ctx!r}")
    release = cap_release_time(ctx, setting.model_variance(j), setting.cap, setting.horizon)
    if t <= release:
        return _uncapped(ctx, q, t, horizon, start)
    held = _uncapped(ctx, q, release, horizon, start)
    rest = 1 / (2 * ctx.mpf(setting.cap) - 1)
    return rest + (held - rest) * ctx.exp(-2 * (2 * setting.cap - 1) * (t - release))


def _variance_rate(ctx, setting: LatentSetting, j: int, t):
    """``dv/dt`` of the uncapped closed form, differentiated term by term (finite at t = T even when tau2(0) = 0,
    where the ODE's ``2 (1 - 2/tau2) v + 2`` is 0/0): with ``tau' = d tau2(T - t)/dt = 2 e^{-2u} (q - 1)``,
    ``v' = tau' + (v0 - tau2(T)) / tau2(T)^2 (2 tau2 tau' - 2 tau2^2) e^{-2t}``."""
    q, horizon = ctx.mpf(setting.model_variance(j)), ctx.mpf(setting.horizon)
    tau_now, tau_start = model_variance_path(ctx, q, horizon - t), model_variance_path(ctx, q, horizon)
    start = tau_start if setting.start == "forward" else ctx.mpf(1)
    slope = 2 * ctx.exp(-2 * (horizon - t)) * (q - 1)
    return slope + (start - tau_start) / tau_start**2 * (2 * tau_now * slope - 2 * tau_now**2) * ctx.exp(-2 * t)


def coordinate_gain(ctx, setting: LatentSetting, j: int, t):
    """Change of the squared distance when coordinate j joins: ``(sqrt(v) - s)^2 - s^2 = v - 2 s sqrt(v)``."""
    v = decoded_variance(ctx, setting, j, t)
    return v - 2 * ctx.sqrt(ctx.mpf(setting.variances[j])) * ctx.sqrt(v)


def distance(ctx, setting: LatentSetting, t, d: int):
    """Squared W2 distance ``sum_{j<=d} (sqrt(v_j) - s_j)^2 + sum_{j>d} s_j^2``."""
    total = ctx.mpf(0)
    for j, s2 in enumerate(setting.variances):
        root_s = ctx.sqrt(ctx.mpf(s2))
        total += (ctx.sqrt(decoded_variance(ctx, setting, j, t)) - root_s) ** 2 if j < d else ctx.mpf(s2)
    return total


def distance_derivative_terms(ctx, setting: LatentSetting, t, count: int) -> list:
    """The first ``count`` terms ``(1 - s_j / sqrt(v_j)) dv_j/dt`` of the distance's derivative (uncapped scores; a
    zero-variance coordinate, s_j = 0, contributes ``dv_j/dt``)."""
    if setting.cap is not None:
        raise ValueError("the derivative is written for uncapped scores")
    terms = []
    for j in range(count):
        v = decoded_variance(ctx, setting, j, t)
        rate = _variance_rate(ctx, setting, j, t)
        s2 = setting.variances[j]
        terms.append(rate if s2 == 0 else (1 - ctx.sqrt(ctx.mpf(s2)) / ctx.sqrt(v)) * rate)
    return terms


def _sum_terms(ctx, terms: Sequence):
    total = ctx.mpf(0)
    for term in terms:
        total += term
    return total


def distance_derivative(ctx, setting: LatentSetting, t, d: int):
    """``d/dt`` of the squared distance: ``sum_{j<=d} (1 - s_j / sqrt(v_j)) dv_j/dt`` (uncapped scores)."""
    return _sum_terms(ctx, distance_derivative_terms(ctx, setting, t, d))


class DerivativesByDimension:
    """``distance_derivative`` of one setting for every latent dimension, each coordinate's term evaluated once
    per point or box: ``slope(d)`` is the function ``(ctx, t) -> d/dt W2^2`` of dimension d. The certificates of
    the dimensions bisect the same dyadic boxes of [0, T], so the terms they share are computed once; the sums
    are the ones ``distance_derivative`` forms, enclosure for enclosure."""

    def __init__(self, setting: LatentSetting):
        self.setting = setting
        self._terms: dict = {}

    @staticmethod
    def _key(ctx, t) -> tuple:
        if ctx is BALLS:
            return "balls", flint.ctx.prec, BALLS.key(BALLS.mpf(t))
        return id(ctx), ctx.prec, t._mpf_ if hasattr(t, "_mpf_") else t

    def slope(self, d: int) -> Callable:
        self.setting.check_dimension(d)

        def derivative(ctx, t):
            key = self._key(ctx, t)
            if key not in self._terms:
                self._terms[key] = distance_derivative_terms(ctx, self.setting, t, self.setting.dim)
            return _sum_terms(ctx, self._terms[key][:d])

        return derivative


def ldm_distance(variances, t, d, T=2.0, variances_hat=None, cap=None, start="forward", dps: int = 30) -> mpmath.mpf:
    """Squared Wasserstein-2 distance between the decoded sample law at backward time t and the data law.

    Exact score when ``variances_hat`` is None, plug-in score (built from ``variances_hat``) otherwise; ``cap``
    caps the score coefficient at C (the constrained score-matching minimiser). Conventions: module docstring.
    """
    setting = LatentSetting(tuple(variances), T, None if variances_hat is None else tuple(variances_hat), cap, start)
    setting.check_dimension(d)
    setting.check_time(t)
    with working_digits(dps):
        return +distance(mpmath.mp, setting, mpmath.mpf(t), d)


def helpful_from(s2: float, horizon: float) -> mpmath.mpf:
    """``t_j = max(0, T - log((1 - s2) / (1 - 4 s2)) / 2)`` for ``s2 < 1/4``, 0 otherwise (exact score, forward)."""
    if s2 >= 0.25:
        return mpmath.mpf(0)
    s2 = mpmath.mpf(s2)
    return max(mpmath.mpf(0), horizon - mpmath.log((1 - s2) / (1 - 4 * s2)) / 2)


def ldm_switching_times(variances, T=2.0, dps: int = 30) -> list[mpmath.mpf]:
    """``[t_1, ..., t_D, t_{D+1} = T]``: latent dimension d is optimal on ``(t_d, t_{d+1})`` (exact score,
    backward run from the law of Z_T). Non-decreasing because the data variances are."""
    setting = LatentSetting(tuple(variances), T)
    with working_digits(dps):
        return [helpful_from(s2, setting.horizon) for s2 in setting.variances] + [mpmath.mpf(setting.horizon)]


def optimal_dimension(setting: LatentSetting, t, ctx=None):
    """The latent dimension with the smallest distance at backward time t (the smallest one on ties), in the mpmath
    context ``ctx`` (default: 53 bits in a context of its own); with ``ctx = FLOATS`` and an array of times, the
    dimensions at every time (an integer array, float64 distances)."""
    if ctx is FLOATS:
        times = np.asarray(t, dtype=np.float64)
        values = [np.broadcast_to(distance(FLOATS, setting, times, d), times.shape) for d in range(setting.dim + 1)]
        return np.argmin(np.stack(values), axis=0)  # the first minimum: the smallest d on ties
    ctx = mpmath.MPContext() if ctx is None else ctx
    values = [distance(ctx, setting, ctx.mpf(t), d) for d in range(setting.dim + 1)]
    return min(range(len(values)), key=lambda d: (values[d], d))


def bracketed_root(f: Callable, lo, hi, ctx) -> mpmath.mpf:
    """A root of ``f`` in [lo, hi], given f(lo) < 0 < f(hi): mpmath's Anderson-Bjorck iteration in the context
    ``ctx``, or bisection to its working precision where that stops short of mpmath's tolerance or leaves the bracket
    (a derivative that is flat to rounding near its root, as the distance's is for some plug-in variances)."""
    try:
        root = ctx.findroot(f, (lo, hi), solver="anderson")
        if lo <= root <= hi:
            return root
    except ValueError:
        pass
    lo, hi = ctx.mpf(lo), ctx.mpf(hi)
    for _ in range(ctx.prec + 8):
        middle = (lo + hi) / 2
        if middle in (lo, hi):
            break
        lo, hi = (middle, hi) if f(middle) < 0 else (lo, middle)
    return (lo + hi) / 2


def optimal_stopping_time(setting: LatentSetting, d: int, grid: int = 400) -> tuple[mpmath.mpf, mpmath.mpf]:
    """``(t*, W2^2(t*))`` minimising the distance over [0, T] for fixed d: the endpoints and every root of the
    derivative in a cell where it changes sign from - to +. Cells: a uniform grid of ``grid`` cells plus
    remaining times T - t = 10^-12 .. 10^-1 (a tiny variance turns within 1e-10 of the end); capped scores: the
    grid points themselves. The derivative's signs at the cell ends come from one ``FLOATS`` call; roots and
    distances are evaluated with mpmath at 53 bits in a context of its own (findroot raises its precision while it
    works, and ``mpmath.mp``'s is process-wide: studies run in threads)."""
    setting.check_dimension(d)
    ctx = mpmath.MPContext()
    horizon = ctx.mpf(setting.horizon)
    near_end = [horizon - ctx.mpf(10) ** (-k / 4) for k in range(4, 49)]
    ts = sorted({horizon * k / grid for k in range(grid + 1)} | set(near_end))
    candidates = [ctx.mpf(0), horizon]
    if setting.cap is None:
        f = lambda x: distance_derivative(ctx, setting, x, d)
        slopes = distance_derivative(FLOATS, setting, np.array([float(x) for x in ts]), d)
        for k in range(len(ts) - 1):
            if slopes[k] < 0 < slopes[k + 1]:
                candidates.append(bracketed_root(f, ts[k], ts[k + 1], ctx))
    else:
        candidates += ts
    values = [distance(ctx, setting, x, d) for x in candidates]
    best = min(range(len(values)), key=lambda k: (values[k], -candidates[k]))
    return candidates[best], values[best]


def certify_sign(
    function: Callable, lo, hi, sign: int, depth: int = 64, bits: int = 136, budget: int = 20_000, strict: bool = True
) -> bool | None:
    """True when ``sign * function(box) > 0`` is proved on every box of a bisection of [lo, hi] (ball arithmetic,
    ``function(BALLS, box)`` at ``bits`` of precision); False when the opposite sign is proved at a point; None when
    undecided (a box narrower than 2^-depth of the interval, or more than ``budget`` evaluations).
    ``strict=False`` proves ``sign * function >= 0`` instead (a term that is identically 0 passes)."""
    with working_bits(bits):
        boxes = deque([(BALLS.mpf(lo), BALLS.mpf(hi), 0)])  # breadth first: a counterexample is found early
        while boxes:
            a, b, level = boxes.popleft()
            budget -= 1
            value = sign * function(BALLS, BALLS.box(a, b))
            if ((value > 0) if strict else (value >= 0)) is True:
                continue
            middle = (a + b) / 2  # exact for float ends at depth 64 (a rounded midpoint's ball still covers)
            if (sign * function(BALLS, middle) < 0) is True:
                return False
            if level >= depth or budget <= 0:
                return None
            boxes.extend([(a, middle, level + 1), (middle, b, level + 1)])
    return True


def plugin_criterion(setting: LatentSetting, d: int, ctx=mpmath.mp):
    """The paper's criterion ``sum_{j<=d} (1 - s_j / sigma_hat_j)(1 - sigma_hat_j^2)`` (zero-variance coordinates,
    s_j = sigma_hat_j = 0, count +1): the distance is non-increasing on [0, T] iff it is >= 0 (forward start; the
    derivation ``latent_diffusion`` in symbolic.md shows f_d'(0) equals it and f_d is convex). ``ctx=BALLS``
    gives an enclosure."""
    total = ctx.mpf(0)
    for j in range(setting.check_dimension(d)):
        q, s2 = setting.model_variance(j), setting.variances[j]
        if q == 0 and s2 == 0:
            total += 1
            continue
        total += (1 - ctx.sqrt(ctx.mpf(s2)) / ctx.sqrt(ctx.mpf(q))) * (1 - ctx.mpf(q))
    return total


def monotone_criterion(setting: LatentSetting, d: int) -> list[bool]:
    """Per coordinate j <= d: ``(sigma_hat_j - s_j)(sigma_hat_j^2 - 1) <= 0`` (sigma_hat_j between s_j and 1), the
    exact condition for coordinate j's term to be non-increasing on [0, T] (forward start). Exact float compares."""
    out = []
    for j in range(setting.check_dimension(d)):
        q, s2 = setting.model_variance(j), setting.variances[j]
        out.append((q >= s2 and q <= 1) or (q <= s2 and q >= 1))
    return out
