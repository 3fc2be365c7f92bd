"""A derivation as a record a report can print: its statement, its results and its checks, each ``verified`` or
``failed`` (nothing is skipped)."""

from __future__ import annotations

from dataclasses import dataclass, field

VERIFIED, FAILED = "verified", "failed"


@dataclass
class Derivation:
    """One derivation: its ``name``, the ``statement`` it derives, its ``results`` (what a report prints) and its
    ``checks``, each verified or failed (``check``); it is verified when it has checks and every one is."""

    name: str
    statement: str
    results: dict[str, object] = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "status": VERIFIED if ok else FAILED, "detail": detail})

    @property
    def status(self) -> str:
        return VERIFIED if self.checks and all(c["status"] == VERIFIED for c in self.checks) else FAILED
