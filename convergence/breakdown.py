"""Where a study's time goes: its quick profile run in process under ``cProfile``, time sorted into categories.

Categories, by the innermost profiled function that is charged for the time (its own time, ``tottime``; numpy's
C functions are charged to the suite's function that called them through their caller's entry):

* ``sampling``   drawing random numbers (``convergence.noise``, ``convergence.brownian``, numpy's generators);
* ``attention``  softmax attention and the interaction energy (``convergence.attention``, ``convergence.energy``);
* ``statistics`` estimators, bootstrap, medians and quantiles (``convergence.estimators`` and the analysis
  modules' own time, numpy's sort/partition/quantile);
* ``symbolic``   sympy, mpmath, python-flint and ``verify`` (derivations, certified numbers, quadrature);
* ``layer maps`` everything else inside the blocks of paths (the models' layers, integrators, fields);
* ``other``      reports, plots, imports and the rest.

The shares are of the profiled run's total (profiling slows Python-level code more than numpy kernels, so they
are indicative, not exact wall-time fractions).
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

CATEGORIES = ("sampling", "attention", "statistics", "symbolic", "layer maps", "other")
_RULES = (  # (category, substrings of "file:function"), first match wins
    ("sampling", ("convergence/noise.py", "convergence/brownian.py", "overlap_chain.py:standard", "random",
                  "'standard_normal'", "'integers'", "'chisquare'", "'uniform'")),
    ("attention", ("convergence/attention.py", "convergence/energy.py:interaction_energy")),
    ("symbolic", ("/sympy/", "/mpmath/", "flint", "/verify/")),
    ("statistics", ("convergence/estimators.py", "convergence/exponents.py", "convergence/frechet.py",
                    "'partition'", "'sort'", "quantile", "median", "percentile")),
    ("layer maps", ("convergence/fedorov.py", "convergence/agazzi.py", "convergence/mlp_field.py",
                    "convergence/hybrid.py", "convergence/reduced.py", "convergence/integrators.py",
                    "convergence/ito_drift.py", "convergence/coupling.py", "convergence/quadratic_form.py",
                    "convergence/latent_diffusion.py", "convergence/local.py", "convergence/width",
                    "convergence/overlap_chain.py", "convergence/low_rank.py", "linalg")),
)


def categorise(where: str) -> str:
    """The category of a profiled function named ``file:line(function)`` (``{built-in ...}`` for C functions)."""
    for category, needles in _RULES:
        if any(needle in where for needle in needles):
            return category
    return "other"


def _transparent(filename: str) -> bool:
    """numpy's own Python wrappers and C functions: their time belongs to whoever called them."""
    return filename == "~" or "/numpy/" in filename


def profile_breakdown(run: Callable[[], object]) -> dict[str, float]:
    """Seconds per category of ``run()`` under cProfile. The own time of numpy's wrappers and of C functions is
    charged to the categories of their callers, in proportion to the time each caller spent in them, up to the
    first caller that is not numpy (so a kernel counts where the suite uses it). Generators' draws (Cython methods,
    invisible to cProfile) are already in their Python caller's own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run()
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler).stats  # {func: (cc, nc, tottime, cumtime, callers)}
    memo: dict[tuple, dict[str, float]] = {}

    def weights(func: tuple, seen: frozenset = frozenset()) -> dict[str, float]:
        filename, _, name = func
        own = categorise(f"{filename}:{name}")
        if own != "other" or not _transparent(filename) or func in seen:
            return {own: 1.0}
        if func in memo:
            return memo[func]
        callers = stats.get(func, (0, 0, 0.0, 0.0, {}))[4]
        total = sum(edge[3] for edge in callers.values())
        if not callers or total <= 0:
            return {own: 1.0}
        mix: dict[str, float] = {}
        for caller, edge in callers.items():
            for category, share in weights(caller, seen | {func}).items():
                mix[category] = mix.get(category, 0.0) + share * edge[3] / total
        memo[func] = mix
        return mix

    totals = dict.fromkeys(CATEGORIES, 0.0)
    for func, (_, _, tottime, _, _) in stats.items():
        for category, share in weights(func).items():
            totals[category] += tottime * share
    return totals


def study_breakdowns(names: list[str], progress: Callable[[str], None] = lambda name: None) -> dict[str, dict]:
    """Category seconds and shares for each study's quick profile (in process, seed 0)."""
    from .studies import STUDIES

    out = {}
    for name in names:
        progress(f"breakdown: {name}")
        seconds = profile_breakdown(lambda name=name: STUDIES[name].run("quick", 0))
        total = sum(seconds.values()) or 1.0
        out[name] = {"seconds": seconds, "shares": {k: v / total for k, v in seconds.items()}, "total_s": total}
    return out
