"""Sampling in stages until a check decides: a group-sequential design with Bonferroni looks.

A check is run at looks n_1 < n_2 < ... < n_K (samples or paths): n_1 the first look, each next one twice the
last, the last one the budget. Every look extends the same seeded samples (look k sees samples 0..n_k - 1, the very
numbers a one-look run of n_k samples would see), and is judged at level alpha / K with the resolution at power
1 - beta / K:

* ``fail`` as soon as a claim check's interval excludes its allowance band;
* ``pass`` as soon as every claim check passes (interval inside the allowance *and* resolution at most its target);
* otherwise the next look; ``inconclusive`` at the budget.

Whichever look stops, the false-failure rate of a true claim is at most sum_k alpha / K = alpha, and the chance of
passing an effect at least the target is at most sum_k beta / K = beta (a union bound over the looks: the looks are
positively correlated, so the rates are conservative). alpha is the check's family-wise rate (``FAMILY_ALPHA``),
beta = 1 - ``DETECTION_POWER``. Since the looks' sizes are a function of the design and the stopping rule a function
of the data, the result is a function of the seed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from verify._common import check_int

from .estimators import DETECTION_POWER, FAMILY_ALPHA, INCONCLUSIVE, Check, combine_verdicts


@dataclass(frozen=True)
class Looks:
    """Look sizes ``first``, 2 ``first``, 4 ``first``, ... and the ``budget``, every size rounded up to a multiple of
    ``unit`` (the samples one compute block holds: a look extends whole blocks, so the budget too is rounded up).
    ``first == budget`` is a one-look (fixed-size) run at the full level."""

    first: int
    budget: int
    unit: int = 1

    def __post_init__(self) -> None:
        check_int("unit", self.unit, minimum=1)
        check_int("first", self.first, minimum=1)
        check_int("budget", self.budget, minimum=self.first)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The looks' sample sizes, rounded up to whole units; the last is the budget (rounded up)."""
        budget = self._whole(self.budget)
        sizes, n = [], self._whole(self.first)
        while n < budget:
            sizes.append(n)
            n = self._whole(2 * n)
        return (*sizes, budget)

    @property
    def count(self) -> int:
        """K, the number of looks."""
        return len(self.sizes)

    def alpha(self, family_alpha: float = FAMILY_ALPHA) -> float:
        """Each look's family-wise false-failure rate: ``family_alpha`` / K."""
        return family_alpha / self.count

    def power(self, power: float = DETECTION_POWER) -> float:
        """Each look's detection power: 1 - (1 - ``power``) / K."""
        return 1.0 - (1.0 - power) / self.count

    def describe(self, family_alpha: float = FAMILY_ALPHA) -> str:
        """The design, as a report states it."""
        sizes, beta = self.sizes, 1 - DETECTION_POWER
        if len(sizes) == 1:
            return f"one look at {sizes[0]}, level {family_alpha:g}, power {DETECTION_POWER:g}"
        return (
            f"{len(sizes)} looks at {', '.join(map(str, sizes))}, each at level {family_alpha:g}/{len(sizes)} and "
            f"power 1 - {beta:g}/{len(sizes)}: false failure <= {family_alpha:g} and a miss of the target <= "
            f"{beta:g}, whichever look stops"
        )

    def label(self, stopped_at: int, power: float = DETECTION_POWER) -> str:
        """Which look a result comes from and the power its resolutions are stated at (``power`` shared by the
        looks), e.g. ``look 2 of 7 (8192); resolutions at power 0.986 (1 - 0.1/7)``."""
        where = f"look {self.sizes.index(stopped_at) + 1} of {self.count} ({stopped_at})"
        if self.count == 1:
            return where
        return f"{where}; resolutions at power {self.power(power):.3g} (1 - {1 - power:g}/{self.count})"

    def _whole(self, n: int) -> int:
        return self.unit * max(1, -(-n // self.unit))


Evaluate = Callable[[int, float, float], list[Check]]


def decide_in_stages(
    evaluate: Evaluate, looks: Looks, family_alpha: float = FAMILY_ALPHA, power: float = DETECTION_POWER
) -> tuple[list[Check], int]:
    """Run ``evaluate(n, look_alpha, look_power)`` at each look until its claim checks decide (module docstring).

    ``evaluate`` returns the checks at n samples, at the family-wise rate ``look_alpha`` and with resolutions at
    power ``look_power``. Returns the checks of the look that stopped, each claim check with its false-failure rate
    spent over all K looks (K times its rate at one look; a finding keeps its own, e.g. a near miss's chance of
    being missed), every note naming the look, and that look's sample size. ``family_alpha`` and ``power``: the rates
    these K looks share (less than the whole when a caller adds looks of its own, as the strong check's deeper
    ladders)."""
    for n in looks.sizes:
        checks = evaluate(n, looks.alpha(family_alpha), looks.power(power))
        if stopping_verdict(checks) != INCONCLUSIVE or not any(c.claim for c in checks):
            break  # decided, or nothing left to decide (e.g. an order not identifiable: more samples cannot help)
    spent = [
        replace(
            c,
            false_failure_rate=min(1.0, looks.count * c.false_failure_rate) if c.claim else c.false_failure_rate,
            note=f"{c.note}; {looks.label(n, power)}",
        )
        for c in checks
    ]
    return spent, n


def stopping_verdict(checks: list[Check]) -> str:
    """The verdict a look stops on: ``fail`` if any claim check fails, ``pass`` if all pass, else ``inconclusive``
    (go on)."""
    return combine_verdicts([check.verdict for check in checks if check.claim])


__all__ = ["Looks", "decide_in_stages", "stopping_verdict"]
