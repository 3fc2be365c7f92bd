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
    for page in [ROOT / "README.md", *PAGES, *sorted((ROOT / "reports").glob("*.md"))]:
        assert "../shared" not in page.read_text() and "MATH.md" not in page.read_text(), page.name


ANNOTATED_VERDICT = re.compile(r"^print\(.*\.verdict\)\s+# (pass|fail|inconclusive)\b(?! /)", re.M)
EXTRA = re.compile(r"^\s*(?:import|from) (torch)\b", re.M)  # an optional extra's package, imported by a block


@pytest.mark.parametrize(
    "page", [p for p in [ROOT / "README.md", *PAGES] if PYTHON_BLOCK.search(p.read_text())], ids=lambda p: p.name
)
def test_every_python_example_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(PYTHON_BLOCK.findall(page.read_text()), start=1):
        for package in EXTRA.findall(block):
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{page.name}, python block {number} (and the blocks after it) needs the {package} extra")
        code = compile(block, f"{page.name}, python block {number}", "exec")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(code, namespace)  # noqa: S102  (the docs' own examples)
        # a printed verdict annotated with one (print(...verdict)  # pass) must be that verdict
        claimed = [m.group(1) for m in ANNOTATED_VERDICT.finditer(block)]
        shown = [line for line in printed.getvalue().splitlines() if line in ("pass", "fail", "inconclusive")]
        if claimed:
            assert shown == claimed, f"{page.name}, python block {number}: printed {shown}, annotated {claimed}"


def test_every_exported_name_is_in_the_api_reference():
    """Each name of ``convergence.__all__`` and ``verify.__all__`` has its own ``:::`` directive in docs/api.md, or
    the module that defines it has one (whose members mkdocstrings lists)."""
    import convergence
    import verify

    directives = re.findall(r"^::: (\S+)", (ROOT / "docs" / "api.md").read_text(), re.M)
    for package in (convergence, verify):
        missing = [
            name
            for name in package.__all__
            if not any(
                d.endswith(f".{name}") or d == getattr(getattr(package, name), "__module__", None) for d in directives
            )
        ]
        assert not missing, f"docs/api.md does not document {package.__name__}'s {missing}"


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
    """The README's results table: every study of ``convergence.studies.STUDIES`` with a committed report, its
    summary, verdict, claim checks and CPU seconds, from ``reports/<study>.json``."""
    from convergence.output import verdict_tally
    from convergence.studies import STUDIES

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


def _readme_with_results(readme: str) -> str:
    start, end = readme.index(RESULTS_START), readme.index(RESULTS_END) + len(RESULTS_END)
    return readme[:start] + results_markdown() + readme[end:]


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
    from convergence.output import index_markdown
    from convergence.studies import HEADLINES

    committed = (ROOT / "reports" / "index.md").read_text()
    assert committed == index_markdown(ROOT / "reports", HEADLINES), (
        "reports/index.md is stale: python -m tests.test_docs"
    )


def test_every_headline_names_a_check_of_its_committed_report():
    from convergence.output import unmatched
    from convergence.studies import HEADLINES

    assert not unmatched(_committed_reports(), HEADLINES)
    assert "## Headline results" in (ROOT / "reports" / "index.md").read_text()


def test_a_headline_that_matches_nothing_is_found():
    from convergence.output import headline, unmatched

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
    from convergence.output import write_index
    from convergence.studies import HEADLINES

    readme_path = ROOT / "README.md"
    readme_path.write_text(_readme_with_results(readme_path.read_text()))
    write_index(ROOT / "reports", HEADLINES)
