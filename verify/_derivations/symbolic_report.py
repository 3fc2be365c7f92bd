"""``reports/symbolic.md`` and ``reports/symbolic.json``: each derivation with the status of its checks."""

from __future__ import annotations

import json
from pathlib import Path

import sympy as sp

from .._common import atomic_write_set, package_versions
from .derivation import Derivation


def _plain(value):
    if isinstance(value, sp.Basic):
        return {"text": sp.sstr(value), "latex": sp.latex(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_json(derivations: list[Derivation], elapsed_s: float) -> str:
    data = {
        "elapsed_s": elapsed_s,
        "status": "verified" if all(d.status == "verified" for d in derivations) else "failed",
        "versions": package_versions(),
        "derivations": [
            {
                "name": d.name,
                "statement": d.statement,
                "status": d.status,
                "results": _plain(d.results),
                "checks": d.checks,
            }
            for d in derivations
        ],
    }
    return json.dumps(data, indent=2, default=str) + "\n"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.8g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return str(value)


def _result_lines(name: str, value) -> list[str]:
    if isinstance(value, sp.Basic):
        return [f"- {name}: $${sp.latex(value)}$$"]
    if isinstance(value, dict) and value and all(isinstance(v, sp.Basic) for v in value.values()):
        return [f"- {name}:"] + [f"  - {k}: $${sp.latex(v)}$$" for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        keys = list(value[0])
        lines = [f"- {name}:", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        return lines + ["| " + " | ".join(_cell(row.get(k)) for k in keys) + " |" for row in value] + [""]
    if isinstance(value, list):
        return [f"- {name}: {len(value)} rows (see symbolic.json)"]
    return [f"- {name}: {value}"]


def to_markdown(derivations: list[Derivation], elapsed_s: float) -> str:
    status = "verified" if all(d.status == "verified" for d in derivations) else "failed"
    lines = [
        "# Symbolic derivations",
        "",
        f"**Status: {status}** ({elapsed_s:.1f} s)",
        "",
        "| derivation | status | checks |",
        "|---|---|---|",
    ]
    for der in derivations:
        passed = sum(c["status"] == "verified" for c in der.checks)
        lines.append(f"| [{der.name}](#{der.name}) | **{der.status}** | {passed}/{len(der.checks)} |")
    for der in derivations:
        lines += ["", f"## {der.name}", "", der.statement, "", "### Results", ""]
        for name, value in der.results.items():
            lines += _result_lines(name, value)
        lines += ["", "### Checks", "", "| check | status | detail |", "|---|---|---|"]
        lines += [f"| {c['name']} | {c['status']} | {c['detail']} |" for c in der.checks]
    return "\n".join(lines) + "\n"


def write(derivations: list[Derivation], out: Path, elapsed_s: float) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "symbolic.json", "md": out / "symbolic.md"}
    json_text, markdown = to_json(derivations, elapsed_s), to_markdown(derivations, elapsed_s)
    atomic_write_set({paths["json"]: json_text.encode(), paths["md"]: markdown.encode()})
    return paths
