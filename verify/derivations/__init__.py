"""Every derivation with its checks (``catalogue``), the Monte Carlo cross-check of each generator against a
discrete layer written here from MATH.md (``crosscheck``) and ``reports/symbolic.{md,json}`` (``symbolic_report``).
"""

from __future__ import annotations

from .catalogue import ALL, latent_diffusion
from .symbolic_report import write

__all__ = [
    "ALL", "latent_diffusion", "write",
]
