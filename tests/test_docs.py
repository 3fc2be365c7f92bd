"""The documentation: the site builds (mkdocs, strict: every page in the nav, every API reference resolves), every
relative link in the README and the docs points to a file of the repository, every Python example in the README and
the docs runs as written, the README fits on one screen, its results table is the committed reports' (``python
-m tests.test_docs`` rewrites it and reports/index.md), reports/index.md is the committed reports' (headline checks
included), and no page copies a measured estimate by hand."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_site_builds_strictly(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "check_local_consistency" in api and "one_step_limit" in api and "paths_needed" in api


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_links_stay_inside_the_repository_and_resolve(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        resolved = (page.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name}: link {target} leaves the repository"
        assert resolved.exists(), f"{page.name}: link {target} does not resolve"


def test_no_page_points_outside_the_repository():
    sources = [p for package in ("convergence", "verify", "tests") for p in sorted((ROOT / package).rglob("*.py"))]
    for page in [ROOT / "README.md", *PAGES, *sorted((ROOT / "reports").glob("*.md")), *sources]:
        if page.name != "test_docs.py":
            assert "../shared" not in page.read_text() and "MATH.md" not in page.read_text(), page.name


ANNOTATED_VERDICT = re.compile(r"^print\(.*\.verdict\)\s+# (pass|fail|inconclusive)\b(?! /)", re.M)
EXTRA = re.compile(r"^\s*(?:import|from) (torch)\b", re.M)  # an optional extra's package, imported by a block


SAVED_AS = re.compile(r"^# (\w+\.py)\n")  # a block the reader saves under that name (its first line says which)
OUTPUT = re.compile(r"\s*```text\n(.*?)^```", re.S | re.M)  # a text block right after a python block: its output
STANDALONE = {"tutorial.md"}  # pages whose blocks each run alone (in a fresh namespace), not as one session


def _blocks(text: str) -> list[tuple[str, str | None]]:
    """Each python block of a page with the output shown right after it (None when no text block follows)."""
    found = []
    for match in PYTHON_BLOCK.finditer(text):
        shown = OUTPUT.match(text, match.end())
        found.append((match.group(1), None if shown is None else shown.group(1).strip()))
    return found


def _run_saved_test(name: str, folder: Path, shown: str | None, where: str) -> None:
    """Run a saved test file with pytest as the reader would; its summary line must start with the shown output."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, f"{where}: pytest {name} failed:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    summary = run.stdout.strip().splitlines()[-1]
    if shown is not None:
        assert summary.strip("= ").startswith(shown), f"{where}: pytest printed {summary!r}, the page shows {shown!r}"


@pytest.mark.parametrize(
    "page", [p for p in [ROOT / "README.md", *PAGES] if PYTHON_BLOCK.search(p.read_text())], ids=lambda p: p.name
)
def test_every_python_example_runs(page, tmp_path, monkeypatch):
    """Every python block runs as written, in order, in an empty folder (files it writes land there): a block whose
    first line is ``# name.py`` is saved there (a ``test_*.py`` one is run by pytest); the output shown in a text
    block right after a block is what it prints; an annotated ``print(x.verdict)  # pass`` prints that verdict."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the saved modules import each other, as in the reader's folder
    saved: list[str] = []
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, (block, shown) in enumerate(_blocks(page.read_text()), start=1):
        where = f"{page.name}, python block {number}"
        for package in EXTRA.findall(block):
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{where} (and the blocks after it) needs the {package} extra")
        file = SAVED_AS.match(block)
        if file is not None:
            (tmp_path / file.group(1)).write_text(block)
            saved.append(file.group(1).removesuffix(".py"))
            if file.group(1).startswith("test_"):
                _run_saved_test(file.group(1), tmp_path, shown, where)
                continue
        if page.name in STANDALONE:
            namespace = {"__name__": f"docs_{page.stem}_{number}"}
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(block, where, "exec", dont_inherit=True), namespace)  # noqa: S102  (the docs' own examples)
        if shown is not None and file is None:
            assert printed.getvalue().strip() == shown, f"{where}: printed {printed.getvalue()!r}, shows {shown!r}"
        # a printed verdict annotated with one (print(...verdict)  # pass) must be that verdict
        claimed = [m.group(1) for m in ANNOTATED_VERDICT.finditer(block)]
        verdicts = [line for line in printed.getvalue().splitlines() if line in ("pass", "fail", "inconclusive")]
        if claimed:
            assert verdicts == claimed, f"{where}: printed {verdicts}, annotated {claimed}"
    for module in saved:
        monkeypatch.delitem(sys.modules, module, raising=False)


def test_the_tutorial_teaches_in_short_steps_that_end_with_the_plugin():
    """4 to 6 numbered steps, each with at most two code blocks and the output it prints; the last uses the pytest
    plugin; no block writes into the working folder's reports (outputs go to a temporary folder)."""
    text = (ROOT / "docs" / "tutorial.md").read_text()
    steps = re.split(r"^## \d+\. ", text, flags=re.M)[1:]
    assert 4 <= len(steps) <= 6, f"the tutorial has {len(steps)} numbered steps"
    for step in steps:
        blocks = _blocks(step.split("\n## ")[0])
        assert 1 <= len(blocks) <= 2, step.splitlines()[0]
    assert "depth_limits" in steps[-1].split("\n## ")[0]
    assert all(shown is not None or SAVED_AS.match(block) for block, shown in _blocks(text)), "a step shows no output"
    assert "reports/" not in text


def test_the_api_reference_renders_the_public_names_and_only_them():
    """docs/api.md has one ``:::`` directive per name of ``convergence.__all__`` and ``verify.__all__``, under its
    public path, and nothing else but the pytest plugin's fixture: no private module, no helper that is not exported
    (the ``__all__`` lists are the one definition of the public surface)."""
    import convergence
    import verify

    directives = re.findall(r"^::: (\S+)", (ROOT / "docs" / "api.md").read_text(), re.M)
    public = {f"{package.__name__}.{name}" for package in (convergence, verify) for name in package.__all__}
    plugin = {"convergence.pytest_plugin.DepthLimits"}
    assert len(directives) == len(set(directives)), "docs/api.md renders a name twice"
    assert not public - set(directives), f"docs/api.md does not document {sorted(public - set(directives))}"
    assert not set(directives) - public - plugin, f"docs/api.md renders non-public {sorted(set(directives) - public)}"


def test_every_field_of_a_report_is_in_the_report_format_reference():
    page = (ROOT / "docs" / "report-format.md").read_text()
    report = json.loads((ROOT / "reports" / "strong-fedorov.json").read_text())
    run = json.loads((ROOT / "reports" / "run.json").read_text())
    fields = {*report, *report["checks"][0], *run}
    missing = sorted(f for f in fields if f"`{f}`" not in page)
    assert not missing, f"docs/report-format.md does not describe {missing}"


RESULTS_START = "<!-- results: generated from reports/*.json by `python -m tests.test_docs` -->"
RESULTS_END = "<!-- end of results -->"
README_LIMIT = 6500  # bytes: one screen, with the generated table


def results_markdown() -> str:
    """The README's results table: every study of ``convergence._studies.STUDIES`` with a committed report, its
    summary, verdict, claim checks and CPU seconds, from ``reports/<study>.json``."""
    from convergence._output import verdict_tally
    from convergence._studies import STUDIES

    rows = [RESULTS_START, "| study | what it checks | verdict | claim checks | CPU s |", "|---|---|---|---|---|"]
    for name, study in STUDIES.items():
        path = ROOT / "reports" / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        tally = verdict_tally(c["verdict"] for c in data["checks"] if c.get("claim", True))
        rows.append(
            f"| [{name}](reports/{name}.md) | {study.summary} | **{data['verdict']}** ({data['profile']}) | "
            f"{tally} | {data.get('cpu_s') or 0:.0f} |"
        )
    return "\n".join([*rows, RESULTS_END])


COST_START, COST_END = "<!-- cost: python -m tests.test_docs -->", "<!-- /cost -->"


def cost_sentence() -> str:
    """The README's cost of the first command, from the committed reports: the quick report's CPU (the sum over studies
    of each one's median seed, ``reports/quick-profiles.json``) and the full profiles' (the report command's studies,
    ``reports/<study>.json``), in ref units (one core's CPU seconds to draw 10^9 standard normals)."""
    from convergence._studies import STUDIES

    reports = ROOT / "reports"
    quick = json.loads((reports / "quick-profiles.json").read_text())["params"].get("quick_report_cpu_ref")
    full = [json.loads((reports / f"{name}.json").read_text()) for name, study in STUDIES.items() if study.in_report]
    full_ref = sum(r["cpu_s"] / r["ref_s"] for r in full)
    assert all(r["profile"] == "full" for r in full), "the README's full cost needs every study's full report"
    quick_text = "is unmeasured" if quick is None else f"costs {quick:.0f} ref at the median seed"
    ref = "(1 ref: 10^9 normals, one core)"
    return f"{COST_START}The quick report {quick_text}, the full {full_ref:.0f} ref {ref}.{COST_END}"


BENCH_START, BENCH_END = "<!-- bench: python -m tests.test_docs -->", "<!-- /bench -->"


def bench_markdown() -> str:
    """docs/cli.md's summary of the committed ``reports/performance.json``: the samplers' speeds and ratios, the peers,
    the strong ladder's low-rank coupling, the cost-curve exponents and the user checks' costs."""
    bench = json.loads((ROOT / "reports" / "performance.json").read_text())
    rates, ratios, curves = bench["rates"], bench["ratios"], bench["cost_curves"]
    exponents = ", ".join(f"{c['label']} {c['exponent']:.2f} ({c['expected']:g})" for c in curves.values())
    users = ", ".join(f"{r['check']} {r['claim']} {r['ref']:.2g}" for r in bench.get("user_checks", []))
    lines = [
        f"- the full-matrix layer map: {rates['layer_full']['path_steps_per_s']:,.0f} path-steps/s, "
        f"{ratios['layer_full_time_over_draw_time']:.2f} times the time of drawing its normals alone; the reduced "
        f"sampler {ratios['reduced_over_full']:.2g} times faster; the vectorised sampler "
        f"{ratios['layer_full_over_per_path_loop']:.2g} times faster than a plain per-path loop;",
        f"- two dask worker processes {ratios['euler_2_processes_over_1']:.2f} times faster than one;",
        f"- against diffrax and torchsde on the same SDE: the reduced Euler in two processes "
        f"{ratios['euler_reduced_2_processes_over_diffrax']:.2g} and "
        f"{ratios['euler_reduced_2_processes_over_torchsde']:.2g} "
        f"times faster at d = 16 ({ratios['euler_reduced_2_processes_over_diffrax_d64']:.2g} and "
        f"{ratios['euler_reduced_2_processes_over_diffrax_d128']:.2g} times diffrax at d = 64 and 128); with the full "
        f"d x d matrix {ratios['euler_2_processes_over_diffrax']:.2g} and "
        f"{ratios['euler_2_processes_over_torchsde']:.2g} "
        "times;",
        f"- the strong ladder's exact low-rank coupling against the full-matrix one: "
        f"{ratios['strong_low_rank_over_full_d16']:.2g}, {ratios['strong_low_rank_over_full_d64']:.2g} and "
        f"{ratios['strong_low_rank_over_full_d128']:.2g} times faster at d = 16, 64 and 128;",
        f"- cost-curve exponents, time ~ size^p (expected): {exponents};",
        f"- a user's own checks at their defaults (model F, n = 2, d = 16), ref units per run: {users}.",
    ]
    return "\n".join([BENCH_START, *lines, BENCH_END])


def _docs_with_bench(page: str) -> str:
    start, end = page.index(BENCH_START), page.index(BENCH_END) + len(BENCH_END)
    return page[:start] + bench_markdown() + page[end:]


def test_the_cli_pages_bench_numbers_are_the_committed_report():
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == _docs_with_bench(page), "docs/cli.md's bench numbers are stale: run python -m tests.test_docs"


def _readme_with_results(readme: str) -> str:
    start, end = readme.index(RESULTS_START), readme.index(RESULTS_END) + len(RESULTS_END)
    readme = readme[:start] + results_markdown() + readme[end:]
    start, end = readme.index(COST_START), readme.index(COST_END) + len(COST_END)
    return readme[:start] + cost_sentence() + readme[end:]


def test_the_readme_results_are_the_committed_reports():
    readme = (ROOT / "README.md").read_text()
    assert readme == _readme_with_results(readme), "README results are stale: run python -m tests.test_docs"


def test_the_readme_fits_on_one_screen():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, more than {README_LIMIT}: move the detail into docs/"


ESTIMATE_AND_INTERVAL = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)? \[-?\d+(?:\.\d+)?(?:e-?\d+)?, ")


def _committed_reports() -> list[dict]:
    reports = [json.loads(path.read_text()) for path in sorted((ROOT / "reports").glob("*.json"))]
    return [r for r in reports if isinstance(r, dict) and "checks" in r]


def test_the_committed_index_is_the_committed_reports():
    """reports/index.md (verdicts, times, headline checks, targets) is what the report command writes from the
    committed reports' JSON: a report rerun without its index, or a hand edit, fails here."""
    from convergence._output import index_markdown
    from convergence._studies import HEADLINES

    committed = (ROOT / "reports" / "index.md").read_text()
    assert committed == index_markdown(ROOT / "reports", HEADLINES), (
        "reports/index.md is stale: python -m tests.test_docs"
    )


def test_every_headline_names_a_check_of_its_committed_report():
    from convergence._output import unmatched
    from convergence._studies import HEADLINES

    assert not unmatched(_committed_reports(), HEADLINES)
    assert "## Headline results" in (ROOT / "reports" / "index.md").read_text()


def test_a_headline_that_matches_nothing_is_found():
    from convergence._output import headline, unmatched

    report = {"study": "s", "checks": [{"name": "strong_order", "config": {"n": 2, "d": 4}}]}
    assert not unmatched([report], {"s": (headline("strong_order", n=2),)})
    assert unmatched([report], {"s": (headline("strong_order", n=8),)})
    assert unmatched([report], {"s": (headline("weak_order"),)})


def test_the_docs_copy_no_measured_estimate():
    """Measured numbers live in the generated reports: no docs page or the README quotes an "estimate [low, high]"."""
    for page in [ROOT / "README.md", *PAGES]:
        quoted = ESTIMATE_AND_INTERVAL.findall(page.read_text())
        assert not quoted, f"{page.name} copies measured estimates by hand: {quoted[:3]}; link reports/index.md"


if __name__ == "__main__":  # rewrite the README's results table and reports/index.md from reports/*.json
    from convergence._output import write_index
    from convergence._studies import HEADLINES

    readme_path = ROOT / "README.md"
    readme_path.write_text(_readme_with_results(readme_path.read_text()))
    cli_path = ROOT / "docs" / "cli.md"
    cli_path.write_text(_docs_with_bench(cli_path.read_text()))
    write_index(ROOT / "reports", HEADLINES)
