"""``Outcome``: what a public check returns: its checks (``pass``, ``fail`` or ``inconclusive``: too noisy to decide,
never a pass), the per-level panels and fitted orders (``Outcome.table()``), sample-size planning from the run as a
pilot (``Outcome.paths_needed``), and ``write(out)``, the Markdown/JSON/PNG report the suite's studies write."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from verify._common import check_real, file_stem

from .._output import Panel, Plot, StudyResult, write_study
from .._runtime import cpu_meter
from .._statistics import (
    FAIL,
    PASS,
    Check,
    all_finite,
    combine_verdicts,
    confidence_label,
    paths_for_effect,
)


@dataclass
class Outcome:
    """The result of a user check: checks, convergence panels and the overall verdict."""

    title: str
    checks: list[Check]
    panels: list[Panel] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    seed: int = 0
    plots: list[Plot] = field(default_factory=list)  # other figures (the local check's per-state estimates)
    elapsed_s: float = 0.0  # wall seconds of the check
    cpu_s: float = 0.0  # CPU seconds: this thread's and every block a dask worker ran for it

    @property
    def verdict(self) -> str:
        """The verdict of the claims (findings, e.g. whether a near miss is seen, are reported beside it)."""
        return combine_verdicts([check.verdict for check in self.checks if check.claim])

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def sample_size(self) -> int:
        """The paths (local consistency: samples per state and step) this outcome was measured on."""
        return int(self.params.get("paths", self.params.get("samples", 0)))

    def paths_needed(self, effect: float) -> dict[str, int | None]:
        """Sample-size planning from this run as a pilot: for each claim check, the paths (``sample_size`` units) at
        which it would reject a departure of ``effect`` from its expected value with probability 90% at its level
        (``statistics.paths_for_effect``: the measured interval's standard error scaled as paths^-1/2, and the
        check's bias span: twice the allowance where it bounds a bias, as in its resolution). ``effect``
        is in the check's own units, those its resolution is printed in (order units for orders; a relative
        coefficient error for the local checks' scales). None where no number of paths can: the effect lies within
        the check's bias allowance, or the check has no interval (the local checks' vector rows). The allowance is
        held fixed; where it holds standard errors of its own (the weak checks' discretisation biases) more paths
        shrink it too, so the plan is conservative there. Keys: the check's name and configuration."""
        effect = check_real("effect", effect, minimum=0.0, strict_minimum=True)
        return {
            _check_label(check): paths_for_effect(
                check.ci, check.allowance, check.confidence, self.sample_size, effect, bias_span=check.bias_span
            )
            for check in self.checks
            if check.claim
        }

    def table(self) -> str:
        """Plain-text summary: every level of every panel, each check's estimate, interval and verdict."""
        lines = [f"{self.title}: {self.verdict}"] + (
            [f"  sampled in stages: {self.params['stages']}"] if "stages" in self.params else []
        )
        for panel in self.panels:
            for series in panel.series:
                lines.append(f"  {series.label} (fitted order {series.order:.3f})")
                lines.append(f"    {'step h':>12} {'value':>12} {'interval':>27}")
                for h, v, lo, hi in zip(series.steps, series.values, series.ci_lo, series.ci_hi):
                    lines.append(f"    {h:12.5g} {v:12.5g}   [{lo:11.5g}, {hi:11.5g}]")
        for check in self.checks:
            if check.verdict != FAIL and not all_finite(check.estimate, *check.ci):  # nothing was estimated
                numbers = f"not estimated, expected {check.expected:.4g} +- {check.allowance:.3g}"
            else:
                numbers = (
                    f"estimate {check.estimate:.4g}, expected {check.expected:.4g} +- {check.allowance:.3g}, "
                    f"{confidence_label(check.confidence)} interval [{check.ci[0]:.4g}, {check.ci[1]:.4g}]"
                )
            resolved = check.resolution is not None and all_finite(check.resolution)
            lines.append(
                f"  {_check_label(check)}: {numbers} -> {check.verdict.upper()}"
                + (f", resolution {check.resolution:.3g}" if resolved else "")
                + f"  ({check.note})"
            )
        return "\n".join(lines)

    def write(self, out: str | Path) -> dict[str, Path]:
        """Write ``<out>/<stem>.{json,md,png}`` like the suite's studies (stem: the title with every character
        other than letters, digits, '.', '_' and '-' replaced by '-', so a title never names a folder)."""
        result = StudyResult(
            study=file_stem(self.title),
            profile="user",
            seed=self.seed,
            params=self.params,
            checks=self.checks,
            panels=self.panels,
            plots={"": list(self.plots)} if self.plots else {},
            elapsed_s=round(self.elapsed_s, 3),
            cpu_s=round(self.cpu_s, 3),
        )
        return write_study(result, Path(out))


def timed(check: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """``check`` with its outcome's wall and CPU seconds recorded (``runtime.cpu_meter``; the signature kept)."""

    @functools.wraps(check)
    def run(*args, **options) -> Outcome:
        start = time.perf_counter()
        with cpu_meter() as cpu:
            outcome = check(*args, **options)
            seconds = cpu.split()[0]
        return replace(outcome, elapsed_s=time.perf_counter() - start, cpu_s=seconds)

    return run


def _check_label(check: Check) -> str:
    """A check's name with the configuration that tells it apart (state, observable), e.g.
    ``drift_scale [state=uniform]``."""
    where = ", ".join(f"{k}={v}" for k, v in check.config.items() if k not in ("map", "sde", "first", "second"))
    return f"{check.name} [{where}]" if where else check.name


def nonfinite_checks(names: list[str], message: str, config: dict) -> list[Check]:
    """Every check of a look whose data hold NaN or infinity: ``fail``, with the message naming where."""
    nan = float("nan")
    return [Check(name, 0.0, nan, (nan, nan), FAIL, config, note=message) for name in names]
