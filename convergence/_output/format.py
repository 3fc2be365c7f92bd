"""How reports print numbers: significant digits, and a check's resolution beside its target."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._statistics import NO_TARGET, NO_TARGET_TEXT


def number(value: float | None, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits; "n/a" for None, NaN or infinity."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}g}"


def resolution_text(check) -> str:
    """ "resolution (relative % rel.) / target" of a check (any object with ``resolution``, ``relative_resolution``
    and ``target``): "-" without a resolution, "none needed" for a target the interval does not need."""
    target = (
        ""
        if check.target is None
        else f" / {NO_TARGET_TEXT}"
        if check.target in (NO_TARGET, NO_TARGET_TEXT)  # NO_TARGET_TEXT: as a report's JSON holds it
        else f" / {number(check.target, 3)}"
    )
    if check.resolution is None:
        return "-" + target
    relative = "" if check.relative_resolution is None else f" ({number(100 * check.relative_resolution, 2)}% rel.)"
    return number(check.resolution, 3) + relative + target


__all__ = ["number", "resolution_text"]


VERDICT_ORDER = ("pass", "fail", "inconclusive")


def verdict_tally(verdicts: Sequence[str], order: Sequence[str] = VERDICT_ORDER) -> str:
    """How many of ``verdicts`` are each verdict, in ``order``, those that occur: e.g. '3 pass, 1 fail'."""
    verdicts = list(verdicts)
    return ", ".join(f"{verdicts.count(v)} {v}" for v in order if verdicts.count(v))
