"""Plain-data study results (``results``) and the reports written from them: JSON, Markdown and the index
(``report``), their figures (``figures``), how they print numbers (``format``), and the index's table of each study's
headline checks (``headlines``).
"""

from __future__ import annotations

from .figures import plot_figure
from .format import verdict_tally
from .headlines import Headline, headline, unmatched
from .report import (
    INDEX_FILE,
    RUN_FILE,
    earlier_report,
    index_markdown,
    json_default,
    previous_wall,
    report_problem,
    run_json,
    study_files,
    to_json,
    to_markdown,
    write_index,
    write_run,
    write_study,
)
from .results import CellMap, Curve, Heatmap, Panel, Plot, Series, StudyResult

__all__ = [
    "INDEX_FILE",
    "RUN_FILE",
    "CellMap",
    "Curve",
    "Headline",
    "Heatmap",
    "Panel",
    "Plot",
    "Series",
    "StudyResult",
    "earlier_report",
    "headline",
    "index_markdown",
    "json_default",
    "plot_figure",
    "previous_wall",
    "report_problem",
    "run_json",
    "study_files",
    "to_json",
    "to_markdown",
    "unmatched",
    "verdict_tally",
    "write_index",
    "write_run",
    "write_study",
]
