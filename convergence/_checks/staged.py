"""How a public check samples: looks at ``first``, 2 ``first``, ... paths up to a budget, or one look of a fixed
size (``convergence._statistics.sequential`` spends the error rates across them); the deeper ladders a check climbs
when its ladder is too coarse to decide, each one more look of the design; and the data drawn so far, extended by
the next seeded blocks at each look. ``Staging`` is the set-up every public check shares."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from verify._common import check_int

from .._experiments import (
    wants_deeper,
)
from .._paths import PathStreams
from .._runtime import SEED_BLOCK, STREAM_KEYS, concatenate_blocks
from .._statistics import (
    DETECTION_POWER,
    FAMILY_ALPHA,
    Check,
    Looks,
    decide_in_stages,
)

USER_KEY = STREAM_KEYS["user checks"]  # the first entry of every user check's stream key


def _looks_for(
    fixed: int | None,
    first: int,
    budget: int,
    block: int,
    names: tuple[str, str, str] = ("paths", "first", "budget"),
    minimum: int = 2,
) -> Looks:
    """Staged looks ``first``, 2 ``first``, ... up to ``budget`` (rounded up to a whole look unit), or one look at a
    ``fixed`` size. The unit (``Looks.unit``, the compute block of the run) is ``block``, or the largest divisor of
    it that ``first`` is a multiple of, so ``first`` is honoured as given; it must be a multiple of ``SEED_BLOCK``
    (numbers are seeded per seed block: a look cannot stop inside one). ``names``: the caller's names of the three
    parameters (for its error messages)."""
    if fixed is not None:
        return Looks(check_int(names[0], fixed, minimum=minimum), fixed)
    first = check_int(names[1], first, minimum=max(minimum, SEED_BLOCK))
    if first % SEED_BLOCK:
        raise ValueError(
            f"{names[1]} must be a multiple of {SEED_BLOCK} (paths are seeded in blocks of {SEED_BLOCK}: a look "
            f"extends whole blocks), got {first}; pass {names[0]}={first} for one look of exactly that size"
        )
    return Looks(first, check_int(names[2], budget, minimum=first), math.gcd(first, block))


def _spent(check: Check, factor: float) -> Check:
    """A claim check with its false-failure rate multiplied by ``factor`` (the looks it was spent over); a finding
    keeps its own."""
    return replace(check, false_failure_rate=min(1.0, factor * check.false_failure_rate)) if check.claim else check


def _deeper_ladders(depths: tuple[int, ...], max_depth: int | None) -> list[tuple[int, ...]]:
    """The ladders a strong check deepens to: ``depths`` with the deepest doubled, again and again, up to
    ``max_depth`` (default 4 x the deepest)."""
    deepest = check_int("depths", depths[-1], minimum=1)
    limit = 4 * deepest if max_depth is None else check_int("max_depth", max_depth, minimum=deepest)
    ladders, current = [], depths
    while 2 * current[-1] <= limit:
        current = (*current, 2 * current[-1])
        ladders.append(current)
    return ladders


def _decide_deepening(
    look: Callable[[int, float, float], list[Check]], looks: Looks, ladders: list[tuple[int, ...]], drawn: Drawn
) -> tuple[list[Check], int]:
    """Staged looks on the ladder asked for (``drawn.depths``), then, while some check says a deeper ladder would
    decide and none fails (``wants_deeper``), each deeper ladder of ``ladders`` in turn. Every deeper ladder
    is one more look of the group-sequential design: with K staged looks and D deeper ladders each look is at level
    alpha / (K + D) and power 1 - beta / (K + D), so a true claim fails at most alpha and an effect at the target
    passes at most beta whichever look stops. A deeper ladder's paths do the work of the last look on the ladder
    asked for (within the budget). Returns the checks and the paths of the look that decided."""
    total = looks.count + len(ladders)
    share = looks.count / total  # the staged looks' share of the rates; each deeper ladder has 1 / total
    checks, stopped = decide_in_stages(look, looks, FAMILY_ALPHA * share, 1.0 - (1.0 - DETECTION_POWER) * share)
    checks = [_spent(c, total / looks.count) for c in checks]
    asked, last_look = drawn.depths, stopped
    for number, deeper in enumerate(ladders, start=looks.count + 1):
        if not wants_deeper(checks):
            break
        stopped = max(looks.unit, last_look * asked[-1] // deeper[-1] // looks.unit * looks.unit)
        drawn.restart(deeper)
        checks = [
            _spent(
                replace(c, note=f"{c.note}; deepened to depths {deeper} on {stopped} paths (look {number} of {total})"),
                total,
            )
            for c in look(stopped, FAMILY_ALPHA / total, 1.0 - (1.0 - DETECTION_POWER) / total)
        ]
    return checks, stopped


def _deeper_stages(looks: Looks, ladders: list[tuple[int, ...]]) -> str:
    """The deeper ladders' part of a deepening check's description of its looks."""
    total = looks.count + len(ladders)
    return (
        f"; with up to {len(ladders)} deeper ladders, {total} looks in all, each at level {FAMILY_ALPHA:g}/{total} and "
        f"power 1 - {1 - DETECTION_POWER:g}/{total}"
        if ladders
        else ""
    )


def probe_streams(seed: int, key: tuple[int, ...]):
    """The streams of the first seed block of a check's paths (its initial states, to ask a claim where it starts)."""
    return PathStreams(seed, 0, SEED_BLOCK, key)


class Drawn:
    """A staged check's data so far: ``size`` paths on the ladder ``depths``, extended at each look by the next seeded
    blocks; ``restart`` moves it to a deeper ladder, whose paths are drawn anew (a finer grid, the same seed)."""

    def __init__(self, depths: tuple[int, ...] = (), extended: Callable | None = None) -> None:
        self.data, self.size, self.depths = None, 0, depths
        self._extended = extended or (lambda data, more: concatenate_blocks([data, more]))

    def restart(self, depths: tuple[int, ...]) -> None:
        self.data, self.size, self.depths = None, 0, depths

    def extend(self, more, size: int):
        """The data of paths 0 .. ``size`` - 1: these followed by ``more`` (paths ``self.size`` .. ``size`` - 1)."""
        self.data = more if self.data is None else self._extended(self.data, more)
        self.size = size
        return self.data


@dataclass
class Staging:
    """A check's sampling plan and its data so far: ``looks`` (staged, or one look), the compute ``block`` of a
    one-look run, ``ladders`` (the deeper ladders it may climb; None for a check that never deepens) and ``drawn``."""

    looks: Looks
    block: int
    ladders: list[tuple[int, ...]] | None
    drawn: Drawn

    @classmethod
    def plan(
        cls,
        fixed: int | None,
        first: int,
        budget: int,
        block: int,
        *,
        depths: tuple[int, ...] | None = None,
        max_depth: int | None = None,
        names: tuple[str, str, str] = ("paths", "first", "budget"),
        minimum: int = 2,
        extended: Callable | None = None,
    ) -> Staging:
        """``_looks_for(fixed, first, budget, block, names, minimum)``; with ``depths``, a check that deepens from that
        ladder up to ``max_depth`` (``_deeper_ladders``); ``extended``: how drawn data grow (default: blocks
        concatenated)."""
        ladders = None if depths is None else _deeper_ladders(depths, max_depth)
        looks = _looks_for(fixed, first, budget, block, names, minimum)
        drawn = Drawn(depths or (), extended)
        return cls(looks, block, ladders, drawn)

    @property
    def compute_block(self) -> int:
        """The paths one computation sees at once: the looks' unit (every look a whole number of blocks), or ``block``
        for one look of a fixed size."""
        return self.looks.unit if self.looks.unit > 1 else self.block

    def decide(
        self, look: Callable[[int, float, float], list[Check]], family_alpha: float = FAMILY_ALPHA
    ) -> tuple[list[Check], int]:
        """The checks of the look that decided and its paths: staged looks (``decide_in_stages``, at the family-wise
        rate ``family_alpha``), then the deeper ladders of a deepening check (``_decide_deepening``, at 1%)."""
        if self.ladders is None:
            return decide_in_stages(look, self.looks, family_alpha)
        return _decide_deepening(look, self.looks, self.ladders, self.drawn)

    def params(self, **own) -> dict:
        """A report's parameters: the check's ``own``, then its looks and the description of its stages."""
        stages = self.looks.describe() + _deeper_stages(self.looks, self.ladders or [])
        return {**own, "looks": list(self.looks.sizes), "stages": stages}
