"""``performance.md``: the bench's rates and ratios against their targets, the cost curves and where each study's
time goes (``python -m convergence bench``)."""

from __future__ import annotations

import json
from pathlib import Path

from verify._common import atomic_write

from .._output import json_default, plot_figure
from . import benchmark, breakdown
from .benchmark import TARGETS
from .breakdown import CATEGORIES
from .cost import cost_plots
from .user_checks import user_checks_markdown
from .variance import variance_markdown


def performance_markdown(result: dict) -> str:
    """``performance.md``: rates side by side, the ratios and whether each meets its target."""
    config = result["config"]
    ref = result.get("ref_s")  # None: a result from before the reference kernel
    lines = [
        "# Performance",
        "",
        benchmark.__doc__.strip().split("\n\n")[0],
        "",
        f"Machine: {result['machine']['cpus']} CPUs ({result['machine']['processor']}), Python "
        f"{result['machine']['python']}, numpy {result['machine']['numpy']}; best of {config['repeats']} runs "
        "after a warm-up. Generate with `python -m convergence bench`.",
        "",
        (
            f"Reference kernel, measured first in the same run: ref = {ref:.3g} CPU s (one core drawing 10^9 "
            "standard normals with numpy's default generator); each time is also "
            "given in ref units (seconds / ref), which machines of different speeds agree on."
            if ref
            else "No reference kernel in this result (it predates the reference kernel): no ref units."
        ),
        "",
        *_rates_table(result["rates"], ref),
        "",
        *_ratios_table(result["ratios"]),
    ]
    if result.get("cost_curves"):
        lines += ["", *_cost_curves_section(result["cost_curves"], ref)]
    if result.get("user_checks"):
        lines += ["", *user_checks_markdown(result["user_checks"])]
    if result.get("variance_reduction"):
        lines += ["", *variance_markdown(result["variance_reduction"])]
    if result.get("breakdown"):
        lines += ["", *_breakdown_section(result["breakdown"])]
    lines += ["", *result.get("notes", []), ""]
    return "\n".join(lines)


def _rates_table(rates: dict, ref: float | None) -> list[str]:
    lines = ["| measurement | seconds | ref units | path-steps per second |", "|---|---|---|---|"]
    for name, entry in rates.items():
        if entry is None:
            lines.append(f"| `{name}` | not installed | - | - |")
        else:
            seconds = entry["seconds"]
            units = f"{seconds / ref:.3g}" if ref else "-"
            lines.append(f"| `{name}` | {seconds:.3f} | {units} | {entry['path_steps_per_s']:.4g} |")
    return lines


def _ratios_table(ratios: dict) -> list[str]:
    lines = ["| ratio | measured | target | met |", "|---|---|---|---|"]
    for name, value in ratios.items():
        comparison, bound = TARGETS.get(name, ("", None))
        target = "-" if bound is None else f"{comparison} {bound:g}"
        if value is None:
            lines.append(f"| {name} | not measured (peer not installed) | {target} | - |")
            continue
        met = (
            "-"
            if bound is None
            else ("yes" if (value <= bound if comparison == "<=" else value >= bound) else "**no**")
        )
        lines.append(f"| {name} | {value:.3g} | {target} | {met} |")
    return lines


def _cost_curves_section(curves: dict, ref: float | None) -> list[str]:
    lines = [
        "## Cost curves",
        "",
        "Time against each size that grows, the others fixed; exponent: log-log slope "
        "over the upper three sizes (time ~ size^p). ![cost curves](performance-cost.png)",
        "",
        "| size | workload | sizes | seconds | ref units | fitted exponent | expected |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in curves.values():
        seconds = ", ".join(f"{t:.3g}" for t in entry["seconds"])
        units = ", ".join(f"{t / ref:.3g}" for t in entry["seconds"]) if ref else "-"
        lines.append(
            f"| {entry['label']} | {entry['workload']} | {', '.join(map(str, entry['sizes']))} | "
            f"{seconds} | {units} | {entry['exponent']:.2f} | {entry['expected']:g} |"
        )
    return lines


def _breakdown_section(studies: dict) -> list[str]:
    lines = [
        "## Where each study's time goes (quick profile, in process, stack sampled)",
        "",
        breakdown.__doc__.strip().split("\n\n")[1].replace("\n", " "),
        "",
        f"| study | wall s | {' | '.join(CATEGORIES)} |",
        "|---|---|" + "---|" * len(CATEGORIES),
    ]
    for name, entry in studies.items():
        shares = " | ".join(f"{entry['shares'][c]:.0%}" for c in CATEGORIES)
        lines.append(f"| {name} | {entry['total_s']:.0f} | {shares} |")
    return lines


def write_performance(result: dict, out: Path) -> dict[str, Path]:
    """Write ``performance.json``, ``performance.md`` and, when cost curves were measured,
    ``performance-cost.png`` to ``out`` (atomically)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "performance.json", "md": out / "performance.md"}
    if result.get("cost_curves"):
        paths["cost"] = out / "performance-cost.png"
        plot_figure(cost_plots(result["cost_curves"]), "cost curves: time against each size (log-log)", paths["cost"])
    atomic_write(paths["json"], (json.dumps(result, indent=2, default=json_default) + "\n").encode())
    atomic_write(paths["md"], performance_markdown(result).encode())
    return paths
