"""Headline results: the checks a study names as its headlines, read back from its JSON report into one table of
``index.md`` (``write_index``), so that no headline number is ever copied by hand.

A headline row shows a check's configuration, expected value, estimate with its interval (at the check's own
confidence), resolution / target and verdict; a check run at many configurations can instead be summarised in one
row (how many, their verdicts, the range of estimate - expected and of the resolution)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

from .._statistics import confidence_label
from .format import number, resolution_text, verdict_tally


@dataclass(frozen=True)
class Headline:
    """The checks named ``check`` whose configuration holds every (key, value) of ``where`` (all of them when
    ``where`` is empty): one row each, or one row for all when ``summary``. Build with ``headline``."""

    check: str
    where: tuple[tuple[str, object], ...] = ()
    summary: bool = False

    def matches(self, check: Mapping) -> bool:
        config = check.get("config", {})
        return check["name"] == self.check and all(config.get(key) == value for key, value in self.where)


def headline(check: str, *, summary: bool = False, **where: object) -> Headline:
    """``headline("strong_order", n=2, d=4)``: the check ``strong_order`` at n = 2, d = 4."""
    return Headline(check, tuple(where.items()), summary)


def _config(check: Mapping) -> str:
    return ", ".join(f"{key}={value}" for key, value in check.get("config", {}).items())


def _check_row(study: str, check: Mapping) -> str:
    kind = "" if check.get("claim", True) else " (finding)"
    estimate = number(check["estimate"])
    if check.get("ci"):
        lo, hi = check["ci"]
        estimate += f" [{number(lo)}, {number(hi)}] ({confidence_label(check['confidence'])})"
    return (
        f"| {study} | `{check['name']}`{kind} | {_config(check)} | {number(check['expected'])} | {estimate} | "
        f"{resolution_text(SimpleNamespace(**check))} | **{check['verdict']}** |"
    )


def _summary_row(study: str, name: str, checks: list[Mapping]) -> str:
    verdicts = [c["verdict"] for c in checks]
    tally = verdict_tally(verdicts)
    gaps = [c["estimate"] - c["expected"] for c in checks if c["estimate"] is not None]  # None: NaN in the JSON
    gap_text = f"from {number(min(gaps), 3)} to {number(max(gaps), 3)}" if gaps else "not estimated"
    resolutions = [c["resolution"] for c in checks if c.get("resolution") is not None]
    spread = f"{number(min(resolutions), 2)} .. {number(max(resolutions), 2)}" if resolutions else "-"
    return (
        f"| {study} | `{name}` | {len(checks)} configurations | - | estimate - expected {gap_text} | {spread} | "
        f"{tally} |"
    )


def headline_lines(studies: Sequence[Mapping], headlines: Mapping[str, Sequence[Headline]]) -> list[str]:
    """The "Headline results" section of ``index.md``: for each study report (parsed JSON) its ``headlines``, in
    their order; a headline that matches no check of the report is left out (``unmatched`` finds those)."""
    rows = []
    for data in studies:
        for line in headlines.get(data["study"], ()):
            checks = [c for c in data["checks"] if line.matches(c)]
            if line.summary and checks:
                rows.append(_summary_row(data["study"], line.check, checks))
            else:
                rows += [_check_row(data["study"], c) for c in checks]
    if not rows:
        return []
    return [
        "## Headline results",
        "",
        "Each study's headline checks, read from its report: estimate with its interval at the check's confidence "
        "(the study's Bonferroni level), resolution (the smallest departure rejected with probability 90%; as a "
        "relative error in parentheses where the check has one) and target (the largest departure it may miss).",
        "",
        "| study | check | configuration | expected | estimate [interval] | resolution / target | verdict |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def unmatched(studies: Sequence[Mapping], headlines: Mapping[str, Sequence[Headline]]) -> list[str]:
    """The headlines of the given study reports that match none of their checks (a renamed check or configuration)."""
    return [
        f"{data['study']}: {line}"
        for data in studies
        for line in headlines.get(data["study"], ())
        if not any(line.matches(c) for c in data["checks"])
    ]


__all__ = ["Headline", "headline", "headline_lines", "unmatched"]
