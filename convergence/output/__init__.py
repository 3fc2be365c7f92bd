"""Plain-data study results (``results``) and the reports written from them: JSON, Markdown, plots and the index
(``report``).
"""

from __future__ import annotations

from .report import (
    json_default,
    plot_figure,
    to_json,
    to_markdown,
    write_index,
    write_run,
    write_study,
)
from .results import CellMap, Curve, Heatmap, Panel, Plot, Series, StudyResult

__all__ = [
    "CellMap",
    "Curve",
    "Heatmap",
    "Panel",
    "Plot",
    "Series",
    "StudyResult",
    "json_default",
    "plot_figure",
    "to_json",
    "to_markdown",
    "write_index",
    "write_run",
    "write_study",
]
