"""The layering of the two packages, read from the source (no import is executed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, at any depth of the file (imports inside functions too)."""
    package = list(path.relative_to(ROOT).with_suffix("").parts)
    package = package[:-1]  # the package holding the module (an __init__ is its own package's member too)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources("verify"), ids=lambda p: str(p.relative_to(ROOT)))
def test_verify_never_imports_convergence(path):
    offending = sorted(m for m in imported_modules(path) if m == "convergence" or m.startswith("convergence."))
    assert not offending, f"{path.relative_to(ROOT)} imports {offending}: verify is the lower package"


@pytest.mark.parametrize("path", [p for pkg in ("convergence", "verify") for p in sources(pkg) if p.name == "__init__.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_loads_names_lazily(path):
    """A module-level ``__getattr__`` in a package is how an import cycle is dodged: there must be none."""
    tree = ast.parse(path.read_text())
    assert not any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)


def test_the_import_scanner_sees_relative_and_nested_imports(tmp_path, monkeypatch):
    """The check above can fail: a function-level relative import of convergence from verify is found."""
    fake = ROOT / "verify" / "_scanner_probe.py"
    text = "def f():\n    from convergence.models.fedorov import FedorovModel\n    from . import algebra\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == fake else Path.read_bytes(self).decode())
    found = imported_modules(fake)
    assert "convergence.models.fedorov" in found and "verify.algebra" in found


# convergence's subpackages, lowest first: a module imports only from its own subpackage and the ones before it;
# the user's entry points (api, cli, pytest_plugin, __init__, __main__) sit on top.
LAYERS = ("runtime", "statistics", "output", "models", "paths", "references", "experiments", "studies", "performance")


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "convergence":
        return -1
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def test_every_convergence_module_lives_in_a_layer_or_is_an_entry_point():
    top = {p.name for p in (ROOT / "convergence").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "api.py", "cli.py", "pytest_plugin.py"}
    assert {p.name for p in (ROOT / "convergence").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


@pytest.mark.parametrize("path", sources("convergence"), ids=lambda p: str(p.relative_to(ROOT)))
def test_convergence_imports_only_downward(path):
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    own = layer_of(module)
    upward = sorted(m for m in imported_modules(path) if layer_of(m) > own)
    assert not upward, f"{module} (layer {own}) imports higher layers: {upward}"
