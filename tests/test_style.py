"""The tree is formatted and linted by ruff as configured in pyproject.toml (line length 120; pyflakes, pycodestyle,
import order): ``ruff format . && ruff check --fix .`` makes it so. Its modules and functions stay small enough to
read whole: no source file over ``MAX_FILE_LINES`` lines and no function over ``MAX_FUNCTION_LINES`` lines of code
(its docstring aside), unless ``LONG_WITH_REASON`` names it with the reason."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
# "path" or "path:function" -> why it is longer (none today: a newcomer's first reading of a long one starts here)
LONG_WITH_REASON: dict[str, str] = {}


def sources() -> list[Path]:
    return sorted(p for package in ("convergence", "verify") for p in (ROOT / package).rglob("*.py"))


def code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines from the function's first statement after its docstring to its end (its signature and docstring
    aside; nested functions count in the function that holds them)."""
    body = function.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(body) == 1:
            return 0
        first = body[1]
    return function.end_lineno - first.lineno + 1


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff_finds_nothing(command):
    run = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]


def test_no_file_or_function_is_long_without_a_stated_reason():
    long = []
    for path in sources():
        name = str(path.relative_to(ROOT))
        text = path.read_text()
        if text.count("\n") > MAX_FILE_LINES and name not in LONG_WITH_REASON:
            long.append(f"{name}: {text.count(chr(10))} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and code_lines(node) > MAX_FUNCTION_LINES:
                if f"{name}:{node.name}" not in LONG_WITH_REASON:
                    long.append(f"{name}:{node.name}: {code_lines(node)} code lines (at most {MAX_FUNCTION_LINES})")
    assert not long, "split these, or name each in LONG_WITH_REASON with its reason:\n" + "\n".join(long)


def test_every_stated_reason_names_something_still_long():
    """An exemption outlives its reason silently otherwise."""
    for key, reason in LONG_WITH_REASON.items():
        name, _, function = key.partition(":")
        path = ROOT / name
        assert path.exists() and reason.strip(), f"{key}: no such file, or no reason"
        text = path.read_text()
        if not function:
            assert text.count("\n") > MAX_FILE_LINES, f"{name} is no longer long: drop it from LONG_WITH_REASON"
            continue
        lengths = [
            code_lines(n)
            for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
        ]
        assert lengths and max(lengths) > MAX_FUNCTION_LINES, f"{key} is no longer long: drop it from LONG_WITH_REASON"


def test_the_length_rule_sees_a_long_function():
    """The rule can fail: a function of 61 statements after its docstring is long, one of 60 is not."""

    def function(statements: int) -> ast.FunctionDef:
        body = "\n".join(f"    x{i} = {i}" for i in range(statements))
        return ast.parse(f'def f():\n    """doc\n    more"""\n{body}\n').body[0]

    assert code_lines(function(61)) == 61 > MAX_FUNCTION_LINES >= code_lines(function(60)) == 60
