"""The tree is formatted and linted by ruff as configured in pyproject.toml (line length 120; pyflakes, pycodestyle,
import order): ``ruff format . && ruff check --fix .`` makes it so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff_finds_nothing(command):
    run = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
