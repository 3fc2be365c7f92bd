"""A derivation as a record a report can print: its statement, its results and its checks, each ``verified`` or
``failed`` (nothing is skipped); and the rational point values and kernel the generator checks evaluate at."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .._calculus import (
    sigma,
)
from .._models import (
    beta,
    eps,
    m,
    v_sign,
)

VERIFIED, FAILED = "verified", "failed"


@dataclass
class Derivation:
    name: str
    statement: str
    results: dict[str, object] = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "status": VERIFIED if ok else FAILED, "detail": detail})

    @property
    def status(self) -> str:
        return VERIFIED if self.checks and all(c["status"] == VERIFIED for c in self.checks) else FAILED


POINT_VALUES = {
    beta: sp.Rational(7, 10),
    sigma: sp.Rational(6, 5),
    eps: sp.Rational(3, 4),
    v_sign: 1,
    m: sp.Rational(1, 2),
}


KERNEL = (sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 4))
