"""Reports a reader can open without running anything: JSON, Markdown and the figures (``figures``) per study, and
``index.md`` listing every study's verdict; and a study's earlier report read back (``earlier_report``, with the
shortest wall time it allows, ``previous_wall``, by which a run orders its studies).

Files are written atomically (to a temporary name, then renamed), so an interrupted run never leaves a half-written
report behind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from verify._common import atomic_write, atomic_write_set

from .._runtime import Exit, Fault
from .._runtime.reference import in_reference_units
from .._statistics import NO_TARGET_TEXT, Check, confidence_label, json_safe
from .figures import panels_png
from .format import VERDICT_ORDER, number, resolution_text, verdict_tally
from .headlines import Headline, headline_lines
from .results import Panel, StudyResult


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


def earlier_report(out: Path, name: str) -> dict | None:
    """The study's earlier report in ``out`` (None when there is none); a ``Fault`` (exit 2) when the file there is
    not a report this tool wrote, rather than a guess from it."""
    path = Path(out) / f"{name}.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise Fault(Exit.BAD_INPUT, f"{path} cannot be read ({error.strerror}): move it or pass --out") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    problem = report_problem(data, name)
    if problem:
        raise Fault(Exit.BAD_INPUT, f"{path} is not a report written by this tool ({problem}): move it or pass --out")
    return data


def previous_wall(data: dict | None, profile: str, cores: int) -> float:
    """The shortest wall time the study's last report ``data`` of ``profile`` allows on ``cores``: its serial CPU
    seconds plus the rest spread over the cores (a report without its serial CPU: its wall time; no report: 0)."""
    if data is None or data.get("profile") != profile:
        return 0.0
    if "serial_cpu_s" not in data:
        return float(data.get("elapsed_s", 0.0))
    cpu = float(data.get("cpu_s", 0.0))
    serial = min(cpu, float(data["serial_cpu_s"]))
    return serial + (cpu - serial) / cores


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
