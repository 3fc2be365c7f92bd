"""Plain-data results of a study: what the report writer needs, JSON-serialisable, model-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .._statistics import Check, OrderFit, combine_verdicts


@dataclass(frozen=True)
class Series:
    """One error curve against the step: per-level values with interval and flags, and its fitted line
    ``log error = intercept + order log h``."""

    label: str
    steps: list[float]
    values: list[float]
    ci_lo: list[float]
    ci_hi: list[float]
    order: float
    intercept: float
    flags: list[list[str]]

    @classmethod
    def from_fit(cls, label: str, fit: OrderFit, flags: list[list[str]] | None = None) -> Series:
        """The curve of an ``OrderFit``: RMS error per level with its interval and fitted line."""
        return cls(
            label=label,
            steps=fit.steps.tolist(),
            values=fit.error.tolist(),
            ci_lo=fit.error_ci[:, 0].tolist(),
            ci_hi=fit.error_ci[:, 1].tolist(),
            order=fit.order,
            intercept=fit.intercept,
            flags=flags if flags is not None else [[] for _ in fit.steps],
        )


@dataclass(frozen=True)
class Panel:
    """A log-log convergence plot: several series and the slope the theory expects."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    reference_order: float


@dataclass(frozen=True)
class Curve:
    """A line (``style="line"``, with a band when ``y_lo``/``y_hi`` are given) or points with error bars
    (``style="points"``)."""

    label: str
    x: list[float]
    y: list[float]
    y_lo: list[float] | None = None
    y_hi: list[float] | None = None
    style: str = "line"
    color: str | None = None  # curves that share a colour belong together (e.g. theory and simulation)
    linestyle: str | None = None  # a line's dash pattern (matplotlib's: "-", "--", ":")


@dataclass(frozen=True)
class Plot:
    """A linear-axes plot of curves, with labelled vertical markers (e.g. a critical value)."""

    title: str
    xlabel: str
    ylabel: str
    curves: list[Curve]
    markers: list[tuple[float, str]] = field(default_factory=list)
    logx: bool = False
    logy: bool = False


@dataclass(frozen=True)
class Heatmap:
    """Values on a grid: ``values[i][j]`` at row ``rows[i]`` and column ``columns[j]`` (e.g. N x L)."""

    title: str
    row_label: str
    column_label: str
    rows: list[float]
    columns: list[float]
    values: list[list[float]]


@dataclass(frozen=True)
class CellMap:
    """Values on cells whose row coordinates differ by column: ``values[j][i]`` at column ``columns[j]`` and row
    ``rows[j][i]`` (e.g. the betas tried at each dimension d, around that d's beta_c). ``scale`` "unit" colours
    [0, 1] (a probability), "signed" a symmetric range around 0 (a difference in standard errors); ``curves`` are
    drawn over the cells in the same coordinates (e.g. beta_c(d))."""

    title: str
    column_label: str
    row_label: str
    columns: list[float]
    rows: list[list[float]]
    values: list[list[float]]
    scale: str = "unit"
    curves: list[Curve] = field(default_factory=list)


@dataclass
class StudyResult:
    study: str
    profile: str
    seed: int
    params: dict
    checks: list[Check]
    panels: list[Panel] = field(default_factory=list)
    # "" -> <study>.png, key -> <study>-<key>.png; panels per row of each figure (default 2)
    plots: dict[str, list[Plot | Heatmap | CellMap]] = field(default_factory=dict)
    plot_columns: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    cpu_s: float = 0.0  # CPU seconds of the study: its own thread and the dask blocks run for it
    serial_cpu_s: float = 0.0  # of which its own thread's (work that no worker takes over)
    ref_s: float | None = None  # the machine's reference kernel (runtime.reference), CPU s: costs in ref units
    versions: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return combine_verdicts([check.verdict for check in self.checks if check.claim])

    @property
    def family_wise_rate(self) -> float:
        """Bonferroni bound on the probability that the study fails when every claim holds: the sum of its claim
        checks' false-failure rates (checks whose verdict is exact or certified should declare 0)."""
        return float(sum(check.false_failure_rate for check in self.checks if check.claim))

    def to_dict(self) -> dict:
        return {
            "study": self.study,
            "profile": self.profile,
            "seed": self.seed,
            "verdict": self.verdict,
            "family_wise_false_failure_rate": self.family_wise_rate,
            "elapsed_s": self.elapsed_s,
            "cpu_s": self.cpu_s,
            "serial_cpu_s": self.serial_cpu_s,
            "ref_s": self.ref_s,
            "params": self.params,
            "versions": self.versions,
            "checks": [check.to_dict() for check in self.checks],
            "panels": [asdict(panel) for panel in self.panels],
            "plots": {name: [asdict(plot) for plot in plots] for name, plots in self.plots.items()},
            "notes": self.notes,
        }
