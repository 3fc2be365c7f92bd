"""The versions a result was produced with (stamped on every report of both packages)."""

from __future__ import annotations

import platform
from importlib import metadata

PACKAGES = ("depth-limits", "numpy", "scipy", "sympy", "mpmath", "matplotlib")


def package_versions() -> dict:
    """Versions of Python and of the packages that produced a result."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
