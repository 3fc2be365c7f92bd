"""The registry of studies: each module defines one study and its quick and full profiles."""

from __future__ import annotations

from .base import PROFILES, Study
from .strong_fedorov import STUDY as STRONG_FEDOROV

STUDIES: dict[str, Study] = {study.name: study for study in (STRONG_FEDOROV,)}

__all__ = ["PROFILES", "STUDIES", "Study"]
