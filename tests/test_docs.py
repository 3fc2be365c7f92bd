"""The documentation: the site builds (mkdocs, strict: every page in the nav, every API reference resolves), every
relative link in the README and the docs points to a file of the repository, and every Python example in the docs
runs as written."""

from __future__ import annotations

import importlib.util
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
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
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
    for page in [ROOT / "README.md", *PAGES]:
        assert "../shared" not in page.read_text() and "MATH.md" not in page.read_text(), page.name


EXTRA = re.compile(r"^\s*(?:import|from) (torch)\b", re.M)  # an optional extra's package, imported by a block


@pytest.mark.parametrize("page", [p for p in PAGES if PYTHON_BLOCK.search(p.read_text())], ids=lambda p: p.name)
def test_every_python_example_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(PYTHON_BLOCK.findall(page.read_text()), start=1):
        for package in EXTRA.findall(block):
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{page.name}, python block {number} (and the blocks after it) needs the {package} extra")
        code = compile(block, f"{page.name}, python block {number}", "exec")
        exec(code, namespace)  # noqa: S102  (the docs' own examples)
