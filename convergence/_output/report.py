"""Reports a reader can open without running anything: JSON, Markdown and a log-log plot per study,
and ``index.md`` listing every study's verdict.

Files are written atomically (to a temporary name, then renamed), so an interrupted run never leaves
a half-written report behind.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from verify._common import atomic_write, atomic_write_set

from .._runtime.reference import in_reference_units
from .._statistics import NO_TARGET_TEXT, Check, confidence_label, json_safe
from .format import VERDICT_ORDER, number, resolution_text, verdict_tally
from .headlines import Headline, headline_lines
from .results import CellMap, Heatmap, Panel, Plot, StudyResult


def json_default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def to_json(result: StudyResult) -> str:
    """The study as strict JSON: non-finite numbers are written as null."""
    return json.dumps(json_safe(result.to_dict()), indent=2, default=json_default, allow_nan=False) + "\n"


def to_markdown(result: StudyResult, image: str | None = None, extra_images: list[str] = ()) -> str:
    """The study's report: verdict, parameters, checks, per-level tables and notes."""
    lines = [
        f"# {result.study}",
        "",
        f"**Verdict: {result.verdict}**  (profile `{result.profile}`, seed {result.seed}, "
        f"{result.elapsed_s:.1f} s wall, {result.cpu_s:.1f} s CPU)",
        "",
        f"Family-wise false-failure rate when every claim holds: at most {result.family_wise_rate:.3g} "
        f"(the sum of the false-failure rates of its {sum(c.claim for c in result.checks)} claim checks).",
        "",
    ]
    for name in ([image] if image else []) + list(extra_images):
        lines += [f"![{name}]({name})", ""]
    lines += _checks_table(result.checks)
    for panel in result.panels:
        lines += ["", f"## {panel.title}", "", *_panel_tables(panel)]
    lines += ["## Parameters", "", "```json", json.dumps(result.params, indent=2, default=json_default), "```", ""]
    if result.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in result.notes] + [""]
    versions = ", ".join(f"{k} {v}" for k, v in result.versions.items())
    lines += [f"Versions: {versions}.", ""]
    return "\n".join(lines)


def _checks_table(checks: list[Check]) -> list[str]:
    """The report's "Checks" section: what a finding and a resolution are (where any appear), then one row a check."""
    lines = ["## Checks", ""]
    if any(not c.claim for c in checks):
        lines += [
            "Checks marked (finding) test conjectures the sources do not make; they are reported "
            "with their verdicts and do not enter the study's verdict.",
            "",
        ]
    if any(c.resolution is not None for c in checks):
        lines += [
            "Resolution: the smallest departure from the expected value that the check rejects with probability "
            "90% at this run's sample size, in the check's units (as a relative coefficient error in "
            "parentheses where the check has one); target: the largest departure the check may miss, in the "
            "same units. A statistical claim check passes only when its resolution is at most its target.",
            "",
        ]
    lines += [
        "| check | configuration | expected | estimate | interval | allowance | resolution / target | verdict | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for check in checks:
        config = ", ".join(f"{k}={v}" for k, v in check.config.items())
        lo, hi = check.ci
        kind = "" if check.claim else " (finding)"
        lines.append(
            f"| `{check.name}`{kind} | {config} | {number(check.expected)} | {number(check.estimate)} | "
            f"[{number(lo)}, {number(hi)}] ({confidence_label(check.confidence)}) | {number(check.allowance, 3)} | "
            f"{resolution_text(check)} | **{check.verdict}** | {check.note} |"
        )
    return lines


def _panel_tables(panel: Panel) -> list[str]:
    """One table a series: its fitted order, then each level's error, interval and flags."""
    lines = []
    for series in panel.series:
        lines += [
            f"{series.label}: fitted order {number(series.order)}",
            "",
            "| step h | error | interval | flags |",
            "|---|---|---|---|",
        ]
        for h, value, lo, hi, flags in zip(series.steps, series.values, series.ci_lo, series.ci_hi, series.flags):
            lines.append(
                f"| {number(h)} | {number(value)} | [{number(lo)}, {number(hi)}] | {', '.join(flags) or '-'} |"
            )
        lines.append("")
    return lines


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


def write_study(result: StudyResult, out: Path) -> dict[str, Path]:
    """Write ``study_files`` into ``out`` as one set (``atomic_write_set``); return their paths by kind."""
    files, paths = study_files(result, out)
    atomic_write_set(files)
    return paths


def study_files(result: StudyResult, out: Path) -> tuple[dict[Path, bytes], dict[str, Path]]:
    """The bytes of ``<study>.json``, ``<study>.md`` and ``<study>.png`` (and ``<study>-<key>.png`` per plot group)
    in ``out``, and their paths by kind. No ``<study>.png`` when the result has nothing to draw there (a figure would
    hold only its title)."""
    out = Path(out)
    drawn = bool(result.panels or result.plots.get(""))
    paths = {kind: out / f"{result.study}.{kind}" for kind in ("json", "md", "png") if drawn or kind != "png"}
    files = {paths["png"]: panels_png(result)} if drawn else {}
    for key in result.plots:
        if key:
            paths[key] = out / f"{result.study}-{key}.png"
            files[paths[key]] = panels_png(result, key)
    extra = [paths[key].name for key in result.plots if key]
    files[paths["json"]] = to_json(result).encode()
    files[paths["md"]] = to_markdown(result, image=paths["png"].name if drawn else None, extra_images=extra).encode()
    return files, paths


RUN_FILE = "run.json"
INDEX_FILE = "index.md"


def run_json(run: dict) -> bytes:
    """``run.json``: how the last ``run`` / ``report`` in a folder ran (studies, wall time, workers, concurrency)."""
    return (json.dumps(run, indent=2) + "\n").encode()


def write_run(out: Path, run: dict) -> Path:
    """Write ``run_json`` to ``out / run.json`` (atomically) and return its path."""
    path = Path(out) / RUN_FILE
    atomic_write(path, run_json(run))
    return path


def _read(out: Path, name: str, pending: Mapping[str, bytes]) -> str:
    """The text of ``out / name`` as it will be once ``pending`` (file name -> bytes about to be written) is."""
    return pending[name].decode() if name in pending else (out / name).read_text()


def _run_line(out: Path, pending: Mapping[str, bytes]) -> list[str]:
    try:
        run = json.loads(_read(out, RUN_FILE, pending))
        command = run["command"] + ("" if run["command"] == "report" else " " + " ".join(run["studies"]))
        return [
            f"Last run (`{command}`, profile {run['profile']}, {len(run['studies'])} studies, "
            f"{run['concurrent_studies']} at a time on {run['workers']} {run['scheduler']} worker(s) of "
            f"{run['cores']} cores): **{run['wall_s']:.0f} s wall** from start to the last report.",
            "",
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _target_lines(studies: list[dict]) -> list[str]:
    """Per study and kind of statistical claim check: how many, their targets and their largest resolution."""
    rows = []
    for data in studies:
        kinds: dict[str, list[dict]] = {}
        for check in data["checks"]:
            if check.get("claim", True) and check.get("false_failure_rate"):
                kinds.setdefault(check["name"], []).append(check)
        for name, checks in kinds.items():
            targets = [c.get("target") for c in checks]
            stated = [t for t in targets if isinstance(t, (int, float))]
            needless = targets.count(NO_TARGET_TEXT)
            worst = [
                c["resolution"] / t
                for c, t in zip(checks, targets)
                if c.get("resolution") is not None and t in stated and t
            ]
            parts = (
                []
                if not stated
                else [
                    number(min(stated), 3)
                    if min(stated) == max(stated)
                    else f"{number(min(stated), 3)} .. {number(max(stated), 3)}"
                ]
            )
            parts += [f"{needless} {NO_TARGET_TEXT}"] if needless else []
            missing = len(targets) - len(stated) - needless
            parts += [f"{missing} not stated"] if missing else []
            target = "; ".join(parts)
            rows.append(
                f"| {data['study']} | `{name}` | {len(checks)} | {target} | {number(max(worst), 3) if worst else '-'} |"
            )
    if not rows:
        return []
    return [
        "## Targets",
        "",
        "Every statistical claim check states its target (the largest departure it may miss, in its own units) "
        "and passes only when its resolution is at most that target; generated from the reports' JSON.",
        "",
        "| study | check | claim checks | target | largest resolution / target |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


REPORT_NUMBERS = ("elapsed_s", "cpu_s", "serial_cpu_s", "ref_s", "family_wise_false_failure_rate")


def report_problem(data: object, study: str | None = None) -> str | None:
    """Why ``data`` (a parsed ``<study>.json``) is not a study report this tool wrote, in a few words; None when it
    is one (of ``study``, when given)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object" if data is not None else "not JSON"
    missing = [key for key in ("study", "profile", "verdict", "checks") if key not in data]
    if missing:
        return f"no {', '.join(missing)}"
    if study is not None and data["study"] != study:
        return f"the report of {data['study']!r}"
    if not isinstance(data["checks"], list) or not isinstance(data["profile"], str):
        return "checks not a list or profile not a string"
    wrong = [
        key
        for key in REPORT_NUMBERS
        if key in data
        and data[key] is not None
        and (isinstance(data[key], bool) or not isinstance(data[key], (int, float)))
    ]
    return f"{', '.join(wrong)} not a number" if wrong else None


def index_markdown(
    out: Path, headlines: Mapping[str, Sequence[Headline]] | None = None, pending: Mapping[str, bytes] | None = None
) -> str:
    """The text of ``index.md``: every study whose JSON is in ``out`` (or in ``pending``, the files by name about to be
    written there with the index), with its verdict, profile, time and CPU; the ``headlines`` of each study
    (``convergence._studies.HEADLINES``: study name -> its headline checks); the targets per kind of check."""
    out, pending = Path(out), dict(pending or {})
    rows, wall_total, cpu_total, studies = [], 0.0, 0.0, []
    ref_total, ref_count = 0.0, 0
    names = {path.name for path in out.glob("*.json")} | {name for name in pending if name.endswith(".json")}
    for name in sorted(names):
        try:
            data = json.loads(_read(out, name, pending))
        except (OSError, ValueError):
            continue
        if report_problem(data) is not None:
            continue
        studies.append(data)
        row, ref_units = _index_row(data)
        rows.append(row)
        wall_total += data.get("elapsed_s", 0.0)
        cpu_total += data.get("cpu_s") or 0.0
        if ref_units is not None:
            ref_total, ref_count = ref_total + ref_units, ref_count + 1
    lines = [
        "# Verification reports",
        "",
        "Family-wise rate: the Bonferroni bound on the probability that the study fails when every claim holds.",
        "",
        "Time: wall seconds of the study, from its start to its result (studies run side by side share the "
        "workers, so a study's time includes waiting for them); CPU: seconds of CPU charged to the study (its "
        "own thread and every block the dask workers ran for it; a computation that two studies of one run share, "
        "such as the mean-field recordings of chaos and power, is charged to the study that computes it); CPU (ref): "
        "the same in units of the machine's reference kernel, the CPU seconds one core takes to draw 10^9 "
        "standard normals with numpy's default generator, measured in the same run "
        "('-' for a report from before it).",
        "",
        *_run_line(out, pending),
        "| study | verdict | profile | seed | time (s) | CPU (s) | CPU (ref) | family-wise rate | checks |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Sum over studies: {wall_total:.0f} s wall, {cpu_total:.0f} s CPU"
        + (f"; {ref_total:.0f} ref over the {ref_count} studies that state it." if ref_count else "."),
        "",
        *headline_lines(studies, headlines or {}),
        *_target_lines(studies),
        *_symbolic_lines(out, pending),
    ]
    return "\n".join(lines)


def _index_row(data: dict) -> tuple[str, float | None]:
    """A study's row of the index (verdict, profile, seed, times, family-wise rate, tallies), and its CPU in ref
    units (None when its report does not state it)."""
    claims = [c["verdict"] for c in data["checks"] if c.get("claim", True)]
    findings = [c["verdict"] for c in data["checks"] if not c.get("claim", True)]
    alphabetical = sorted(VERDICT_ORDER)
    summary = verdict_tally(claims, alphabetical)
    if findings:
        summary += "; findings: " + verdict_tally(findings, alphabetical)
    rate = data.get("family_wise_false_failure_rate")
    rate_text = "not stated (older report)" if rate is None else f"{rate:.3g}"
    cpu = data.get("cpu_s")
    cpu_text = "-" if cpu is None else f"{cpu:.1f}"
    ref_units = None if cpu is None else in_reference_units(cpu, data.get("ref_s"))
    ref_text = "-" if ref_units is None else f"{ref_units:.1f}"
    row = (
        f"| [{data['study']}]({data['study']}.md) | **{data['verdict']}** | {data.get('profile', '?')} | "
        f"{data.get('seed', '?')} | {data.get('elapsed_s', 0):.1f} | {cpu_text} | {ref_text} | {rate_text} | "
        f"{summary} |"
    )
    return row, ref_units


def _symbolic_lines(out: Path, pending: Mapping[str, bytes]) -> list[str]:
    """The symbolic derivations' status line, where ``symbolic.json`` is (or is about to be) in ``out``."""
    if "symbolic.json" not in pending and not (out / "symbolic.json").exists():
        return []
    try:
        data = json.loads(_read(out, "symbolic.json", pending))
        return [
            f"Symbolic derivations (`python -m verify`): [**{data['status']}**](symbolic.md), "
            f"{len(data['derivations'])} derivations, {data['elapsed_s']:.0f} s.",
            "",
        ]
    except (OSError, json.JSONDecodeError, KeyError):
        return ["Symbolic derivations: `symbolic.json` is unreadable.", ""]


def write_index(out: Path, headlines: Mapping[str, Sequence[Headline]] | None = None) -> Path:
    """Write ``index_markdown`` to ``out / index.md`` (atomically) and return its path."""
    index = Path(out) / INDEX_FILE
    atomic_write(index, index_markdown(out, headlines).encode())
    return index
