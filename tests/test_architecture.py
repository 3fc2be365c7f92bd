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


@pytest.mark.parametrize(
    "path",
    [p for pkg in ("convergence", "verify") for p in sources(pkg) if p.name == "__init__.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_package_loads_names_lazily(path):
    """A module-level ``__getattr__`` in a package is how an import cycle is dodged: there must be none."""
    tree = ast.parse(path.read_text())
    assert not any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)


def test_the_import_scanner_sees_relative_and_nested_imports(monkeypatch):
    """The checks here can fail: a function-level absolute import and a relative one are both found."""
    fake = ROOT / "verify" / "_calculus" / "_scanner_probe.py"
    text = "def f():\n    from convergence._paths import brownian\n    from .._common import files\n"
    monkeypatch.setattr(
        Path, "read_text", lambda self, *a, **k: text if self == fake else Path.read_bytes(self).decode()
    )
    found = imported_modules(fake)
    assert {"convergence._paths.brownian", "verify._common.files"} <= found


# convergence's subpackages, lowest first: a module imports only from its own subpackage and the ones before it;
# the entry points (__init__, __main__, _cli, pytest_plugin) sit on top. Every subpackage is private (``_``): the
# public names are ``convergence.__all__`` and ``verify.__all__`` (and the plugin module, pytest's entry point).
LAYERS = (
    "_runtime",
    "_statistics",
    "_output",
    "_models",
    "_paths",
    "_references",
    "_experiments",
    "_checks",
    "_studies",
    "_performance",
)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "convergence":
        return -1
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def test_every_convergence_module_lives_in_a_layer_or_is_an_entry_point():
    top = {p.name for p in (ROOT / "convergence").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "_cli.py", "pytest_plugin.py"}
    assert {p.name for p in (ROOT / "convergence").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


@pytest.mark.parametrize("path", sources("convergence"), ids=lambda p: str(p.relative_to(ROOT)))
def test_convergence_imports_only_downward(path):
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    own = layer_of(module)
    upward = sorted(m for m in imported_modules(path) if layer_of(m) > own)
    assert not upward, f"{module} (layer {own}) imports higher layers: {upward}"


STUDY_HELPERS = {
    "convergence._studies.base",
    "convergence._studies.over_seeds",
    "convergence._studies.calibration_cases",
}


@pytest.mark.parametrize("path", sources("convergence/_studies"), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_study_never_imports_another(path):
    """A study composes experiments and the designs they share (``convergence._experiments``); only the registry
    (the package's ``__init__``) names the studies."""
    if path.name == "__init__.py":
        return
    modules = {".".join(m.split(".")[:3]) for m in imported_modules(path) if m.startswith("convergence._studies.")}
    own = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    assert modules <= STUDY_HELPERS | {own}, f"{own} imports studies: {sorted(modules - STUDY_HELPERS)}"


VERIFY_LAYERS = ("_common", "_calculus", "_models", "_analysis", "_rigorous", "_derivations")


def verify_layer_of(module: str) -> int:
    parts = module.split(".")
    return VERIFY_LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in VERIFY_LAYERS else len(VERIFY_LAYERS)


def test_every_verify_module_lives_in_a_layer_or_is_an_entry_point():
    assert {p.name for p in (ROOT / "verify").glob("*.py")} == {"__init__.py", "__main__.py"}
    assert {p.name for p in (ROOT / "verify").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(VERIFY_LAYERS)


@pytest.mark.parametrize("path", sources("verify"), ids=lambda p: str(p.relative_to(ROOT)))
def test_verify_imports_only_downward(path):
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    own = verify_layer_of(module)
    upward = sorted(m for m in imported_modules(path) if m.startswith("verify.") and verify_layer_of(m) > own)
    assert not upward, f"{module} (layer {own}) imports higher layers: {upward}"


def test_no_module_name_is_shared_by_the_two_packages():
    """A name like ``report.py`` in both packages, with different roles, misleads a reader."""
    names = {
        pkg: {p.stem for p in sources(pkg) if p.stem not in ("__init__", "__main__")}
        for pkg in ("convergence", "verify")
    }
    assert not names["convergence"] & names["verify"]


LAYOUT_START, LAYOUT_END = (
    "<!-- layout: generated from the tree by `python -m tests.test_architecture` -->",
    "<!-- end of layout -->",
)


def _docstring(path: Path) -> str:
    return " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())


def layout_markdown() -> str:
    """docs/architecture.md's description of both packages: each subpackage's docstring, lowest layer first, then the
    entry points with the first sentence of theirs."""
    lines = [LAYOUT_START]
    for package, layers, role in (
        ("convergence", LAYERS, "the numerical side"),
        ("verify", VERIFY_LAYERS, "the symbolic and rigorous side"),
    ):
        lines.append(
            f"- `{package}/`: {role}; subpackages from the lowest layer up (a module imports only from its "
            "own subpackage and the ones listed before it):"
        )
        lines += [f"  - `{package}/{layer}/`: {_docstring(ROOT / package / layer / '__init__.py')}" for layer in layers]
        entry = sorted(p for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")
        described = "; ".join(f"`{p.name}` ({_docstring(p).split('. ')[0].rstrip('.')})" for p in entry)
        lines.append(f"  - entry points: {described}; `__init__.py` re-exports the public names.")
    lines.append(LAYOUT_END)
    return "\n".join(lines)


def test_the_readme_layout_is_the_tree():
    page = (ROOT / "docs" / "architecture.md").read_text()
    start, end = page.index(LAYOUT_START), page.index(LAYOUT_END) + len(LAYOUT_END)
    assert page[start:end] == layout_markdown(), (
        "docs/architecture.md's layout is stale: run python -m tests.test_architecture"
    )


def _registered_model_modules() -> set[str]:
    """The model modules the registry names (``from . import a, b`` in ``convergence/_models/registry.py``): the
    registry is their table of contents, so adding a model touches its module and the registry only."""
    tree = ast.parse((ROOT / "convergence" / "_models" / "registry.py").read_text())
    return {
        a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1 and not n.module for a in n.names
    }


def test_every_module_is_named_in_its_subpackage_docstring():
    """A subpackage's docstring is its table of contents (docs/architecture.md's layout is made of them); a model
    module may be named by the registry instead."""
    registered = _registered_model_modules()
    assert registered, "the registry names no model module"
    for package in ("convergence", "verify"):
        for init in (ROOT / package).glob("*/__init__.py"):
            doc = _docstring(init)
            named = registered if init.parent.name == "_models" else set()
            missing = [
                p.stem
                for p in init.parent.glob("*.py")
                if p.stem != "__init__" and f"``{p.stem}``" not in doc and p.stem not in named
            ]
            assert not missing, f"{init.parent.relative_to(ROOT)}'s docstring does not name {missing}"


if __name__ == "__main__":  # rewrite docs/architecture.md's layout from the tree
    readme_path = ROOT / "docs" / "architecture.md"
    readme = readme_path.read_text()
    start, end = readme.index(LAYOUT_START), readme.index(LAYOUT_END) + len(LAYOUT_END)
    readme_path.write_text(readme[:start] + layout_markdown() + readme[end:])


def _from_modules(path: Path) -> set[str]:
    """The modules ``path`` takes names from (``from a.b.c import x`` gives a.b.c), at any depth of the file."""
    return {
        node.module
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and not node.level and node.module
    }


@pytest.mark.parametrize(
    "path",
    [p for d in ("tests", "examples", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_tests_and_examples_use_the_public_names(path):
    """A subpackage's ``__init__`` is its API: code outside the packages takes names from it, not from its modules
    (a module object may be imported to monkeypatch it; the studies and the performance tools are applications,
    imported by module)."""
    internal = sorted(
        m
        for m in _from_modules(path)
        if len(m.split(".")) >= 3
        and m.split(".")[0] in ("convergence", "verify")
        and m.split(".")[1] not in ("_studies", "_performance")
    )
    assert not internal, f"{path.relative_to(ROOT)} takes names from internal modules {internal}"


@pytest.mark.parametrize("path", sources("convergence") + sources("verify"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_suite_imports_its_own_modules_at_the_top(path):
    """An import of the suite's own modules inside a function is how a cycle is hidden: imports of optional peers
    (jax, torch, dask) may be deferred, the suite's own may not."""
    package = path.relative_to(ROOT).parts[0]
    deferred = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (
                    inner.level or (inner.module or "").split(".")[0] in ("convergence", "verify")
                ):
                    deferred.append(f"line {inner.lineno}: from {'.' * inner.level}{inner.module or ''}")
                elif isinstance(inner, ast.Import) and any(
                    a.name.split(".")[0] in ("convergence", "verify") for a in inner.names
                ):
                    deferred.append(f"line {inner.lineno}: import")
    assert not deferred, (
        f"{package}: deferred imports of the suite's own modules in {path.relative_to(ROOT)}: {deferred}"
    )
