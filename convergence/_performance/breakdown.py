"""Where a study's time goes: its quick profile run in process while a sampling thread reads its stack.

Every ~5 ms a background thread looks at the running thread's innermost Python frame and charges the wall time
since its previous look to that frame's category; numpy's own Python wrappers are transparent (the time goes to the
suite's function that called them). Weighting each look by the time elapsed since the last one keeps the shares
right when a C function holds the GIL and delays the sampler: the delay is charged to the frame that made the
call. Unlike a deterministic profiler, this does not slow Python-level code (sympy, mpmath) relative to numpy's
kernels, so the shares are shares of wall time.

Categories (``_RULES``, first match on ``file:function`` wins):

* ``sampling``   drawing random numbers (``models.noise``, ``paths.brownian``, the frame draws);
* ``attention``  softmax attention and the interaction energy (``models.attention``, ``experiments.energy``);
* ``statistics`` estimators, bootstrap, medians and quantiles (``convergence._statistics``, ``experiments.exponents``,
  numpy's sort/partition/quantile wrappers);
* ``symbolic``   sympy, mpmath, python-flint and ``verify`` (derivations, certified numbers, quadrature);
* ``layer maps`` the models' layers, integrators, fields and the coupled runner;
* ``other``      the studies' own code, reports, imports and the rest.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from types import FrameType

from .._studies import STUDIES

CATEGORIES = ("sampling", "attention", "statistics", "symbolic", "layer maps", "other")
_RULES = (  # (category, substrings of "file:function"), first match wins
    ("sampling", ("convergence/_models/noise.py", "convergence/_paths/brownian.py", "overlap_chain.py:standard")),
    ("attention", ("convergence/_models/attention.py", "convergence/_experiments/energy.py:interaction_energy")),
    ("symbolic", ("/sympy/", "/mpmath/", "flint", "/verify/")),
    (
        "statistics",
        ("convergence/_statistics/", "convergence/_experiments/exponents.py", "quantile", "median", "percentile"),
    ),
    (
        "layer maps",
        (
            "convergence/_models/",
            "convergence/_paths/integrators.py",
            "convergence/_paths/coupling.py",
            "convergence/_experiments/local",
            "convergence/_experiments/width",
            "convergence/_experiments/strong_low_rank.py",
            "linalg",
        ),
    ),
)


def categorise(where: str) -> str:
    """The category of a Python function named ``file:function``."""
    for category, needles in _RULES:
        if any(needle in where for needle in needles):
            return category
    return "other"


_STDLIB = sysconfig.get_paths()["stdlib"]


def _transparent(filename: str) -> bool:
    """numpy's own Python wrappers and the standard library (abc, functools, random, importlib, ...): their time
    belongs to whoever called them (sympy spends part of its time in such helpers)."""
    return (
        "/numpy/" in filename
        or filename.startswith("<frozen")
        or (filename.startswith(_STDLIB) and "site-packages" not in filename)
    )


def frame_category(frame: FrameType | None) -> str:
    """The category of the innermost frame, passing through numpy's wrappers and the standard library to their
    caller."""
    while frame is not None:
        code = frame.f_code
        category = categorise(f"{code.co_filename}:{code.co_name}")
        if category != "other" or not _transparent(code.co_filename):
            return category
        frame = frame.f_back
    return "other"


def sampled_breakdown(run: Callable[[], object], interval: float = 0.005) -> dict[str, float]:
    """Wall seconds per category of ``run()`` (module docstring): each look at the running thread's stack is
    charged the time since the previous look."""
    target, stop = threading.get_ident(), threading.Event()
    totals = dict.fromkeys(CATEGORIES, 0.0)

    def sample() -> None:
        last = time.perf_counter()
        while not stop.wait(interval):
            now = time.perf_counter()
            totals[frame_category(sys._current_frames().get(target))] += now - last
            last = now

    sampler = threading.Thread(target=sample, name="breakdown-sampler", daemon=True)
    sampler.start()
    try:
        run()
    finally:
        stop.set()
        sampler.join()
    return totals


def study_breakdowns(names: list[str], progress: Callable[[str], None] = lambda name: None) -> dict[str, dict]:
    """Category wall seconds and shares for each study's quick profile (in process, seed 0)."""
    out = {}
    for name in names:
        progress(f"breakdown: {name}")
        seconds = sampled_breakdown(lambda name=name: STUDIES[name].run("quick", 0))
        total = sum(seconds.values()) or 1.0
        out[name] = {"seconds": seconds, "shares": {k: v / total for k, v in seconds.items()}, "total_s": total}
    return out
