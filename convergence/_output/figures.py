"""The reports' figures, drawn with matplotlib's Agg backend: convergence panels (log-log, with the reference order),
plots of curves, heatmaps and cell maps, laid out in columns and returned as PNG bytes."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from verify._common import atomic_write

from .results import CellMap, Heatmap, Panel, Plot, StudyResult


def _draw_panel(ax, panel: Panel) -> None:
    for series in panel.series:
        steps = series.steps
        line = ax.loglog(steps, series.values, "o", label=f"{series.label} (order {series.order:.3f})")[0]
        ax.fill_between(steps, series.ci_lo, series.ci_hi, color=line.get_color(), alpha=0.2)
        fitted = [math.exp(series.intercept) * h**series.order for h in steps]
        ax.loglog(steps, fitted, "-", color=line.get_color(), lw=1)
    if panel.series:
        # Reference slope triangle below the first series.
        steps, values = panel.series[0].steps, panel.series[0].values
        h0, h1 = steps[-1], steps[-3] if len(steps) >= 3 else steps[0]
        y0 = values[-1] * 0.5
        y1 = y0 * (h1 / h0) ** panel.reference_order
        ax.plot([h0, h1, h1, h0], [y0, y0, y1, y0], "k-", lw=0.8)
        ax.text(h1 * 1.05, (y0 * y1) ** 0.5, f"{panel.reference_order:g}", fontsize=8, va="center")
    ax.set_title(panel.title, fontsize=9)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")


def _draw_plot(ax, plot: Plot) -> None:
    bottoms: dict[float, float] = {}
    for curve in plot.curves:
        if curve.style == "stacked":
            base = [bottoms.get(x, 0.0) for x in curve.x]
            width = 0.8 * (min(b - a for a, b in zip(curve.x, curve.x[1:])) if len(curve.x) > 1 else 1.0)
            ax.bar(curve.x, curve.y, width=width, bottom=base, label=curve.label)
            for x, y in zip(curve.x, curve.y):
                bottoms[x] = bottoms.get(x, 0.0) + y
        elif curve.style == "points":
            err = None
            if curve.y_lo is not None:
                # A percentile interval need not contain the point estimate (e.g. a median): bars start at it.
                err = [
                    [max(y - lo, 0.0) for y, lo in zip(curve.y, curve.y_lo)],
                    [max(hi - y, 0.0) for y, hi in zip(curve.y, curve.y_hi)],
                ]
            ax.errorbar(curve.x, curve.y, yerr=err, fmt="o", ms=4, capsize=2, label=curve.label, color=curve.color)
        else:
            line = ax.plot(curve.x, curve.y, curve.linestyle or "-", lw=1.2, label=curve.label, color=curve.color)[0]
            if curve.y_lo is not None:
                ax.fill_between(curve.x, curve.y_lo, curve.y_hi, color=line.get_color(), alpha=0.15, lw=0)
    for x, label in plot.markers:
        ax.axvline(x, color="k", ls="--", lw=0.8)
        ax.text(x, ax.get_ylim()[1], f" {label}", fontsize=7, va="top")
    ax.set_xscale("log" if plot.logx else "linear")
    ax.set_yscale("log" if plot.logy else "linear")
    ax.set_title(plot.title, fontsize=9)
    ax.set_xlabel(plot.xlabel)
    ax.set_ylabel(plot.ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)


def _draw_heatmap(ax, heatmap: Heatmap) -> None:
    values = np.asarray(heatmap.values, dtype=np.float64)
    limit = float(np.nanmax(np.abs(values))) or 1.0
    image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, origin="lower", aspect="auto")
    ax.set_xticks(range(len(heatmap.columns)), [f"{c:g}" for c in heatmap.columns])
    ax.set_yticks(range(len(heatmap.rows)), [f"{r:g}" for r in heatmap.rows])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            ax.text(j, i, f"{values[i, j]:.2g}", ha="center", va="center", fontsize=6)
    ax.set_xlabel(heatmap.column_label)
    ax.set_ylabel(heatmap.row_label)
    ax.set_title(heatmap.title, fontsize=8)
    plt.colorbar(image, ax=ax, fraction=0.046)


def _cell_edges(centres: np.ndarray) -> np.ndarray:
    """Cell boundaries halfway between sorted centres, the outer cells as wide as their neighbours."""
    if centres.size == 1:
        return np.array([centres[0] - 0.5, centres[0] + 0.5])
    middle = 0.5 * (centres[1:] + centres[:-1])
    return np.concatenate([[2 * centres[0] - middle[0]], middle, [2 * centres[-1] - middle[-1]]])


def _draw_cell_map(ax, cell_map: CellMap) -> None:
    finite = [abs(v) for column in cell_map.values for v in column if math.isfinite(v)]
    if cell_map.scale == "unit":
        cmap, vmin, vmax = "viridis", 0.0, 1.0
    else:
        limit = max(3.0, *finite)  # +-3 at least: a difference of one or two standard errors stays pale
        cmap, vmin, vmax = "RdBu_r", -limit, limit
    image = None
    for j, (rows, values) in enumerate(zip(cell_map.rows, cell_map.values)):
        order = np.argsort(rows)
        centres, cells = np.asarray(rows, dtype=np.float64)[order], np.asarray(values, dtype=np.float64)[order]
        edges = _cell_edges(centres)
        image = ax.pcolormesh(
            [j - 0.5, j + 0.5], edges, cells[:, None], cmap=cmap, vmin=vmin, vmax=vmax, edgecolors="w", linewidth=0.5
        )
        for y, v in zip(centres, cells):
            dark = v < 0.5 if cell_map.scale == "unit" else abs(v) > 0.6 * vmax  # viridis is dark low, RdBu at its ends
            ax.text(j, y, f"{v:.2g}", ha="center", va="center", fontsize=5.5, color="w" if dark else "k")
    positions = np.arange(len(cell_map.columns), dtype=np.float64)
    for curve in cell_map.curves:
        ax.plot(np.interp(curve.x, cell_map.columns, positions), curve.y, "-", color="r", lw=1.2, label=curve.label)
    ax.set_xticks(positions, [f"{c:g}" for c in cell_map.columns])
    ax.set_xlim(-0.5, len(cell_map.columns) - 0.5)
    ax.set_xlabel(cell_map.column_label)
    ax.set_ylabel(cell_map.row_label)
    ax.set_title(cell_map.title, fontsize=8)
    if cell_map.curves:
        ax.legend(fontsize=6, loc="upper left")
    if image is not None:
        plt.colorbar(image, ax=ax, fraction=0.046)


def figure_png(items: list, title: str, columns: int = 2) -> bytes:
    """A grid of panels (``Panel``, ``Plot``, ``Heatmap`` or ``CellMap``, ``columns`` per row) as PNG bytes."""
    cols = min(columns, max(1, len(items)))
    rows = max(1, math.ceil(len(items) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    for ax, item in zip(axes.flat, items):
        draw = {Panel: _draw_panel, Heatmap: _draw_heatmap, CellMap: _draw_cell_map}.get(type(item), _draw_plot)
        draw(ax, item)
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=110)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def plot_figure(items: list, title: str, path: Path) -> None:
    """``figure_png`` written to ``path``."""
    atomic_write(path, figure_png(items, title))


def panels_png(result: StudyResult, key: str = "") -> bytes:
    """A grid of panels: log-log convergence panels (error against step, interval band, fitted line,
    slope triangle) for the main figure, then the study's other plots under ``key``."""
    items = (list(result.panels) if key == "" else []) + list(result.plots.get(key, []))
    title = f"{result.study} ({result.profile}): {result.verdict}" + (f" - {key}" if key else "")
    return figure_png(items, title, result.plot_columns.get(key, 2))
