"""The verdict of a check: pass, fail, or inconclusive when the data cannot decide (never a silent pass).

A ``StrEnum``: a verdict equals, prints and serialises as its value (``Verdict.PASS == "pass"``, JSON ``"pass"``).
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"

    @classmethod
    def of(cls, decided: bool | None) -> Verdict:
        """``PASS`` for True, ``FAIL`` for False, ``INCONCLUSIVE`` for None (an undecided interval comparison)."""
        return cls.INCONCLUSIVE if decided is None else (cls.PASS if decided else cls.FAIL)

    @classmethod
    def combine(cls, verdicts) -> Verdict:
        """Fail if any fails, inconclusive if any is (or there is none), pass otherwise."""
        verdicts = list(verdicts)
        if not verdicts:
            return cls.INCONCLUSIVE
        if cls.FAIL in verdicts:
            return cls.FAIL
        return cls.INCONCLUSIVE if cls.INCONCLUSIVE in verdicts else cls.PASS
