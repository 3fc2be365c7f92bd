"""What both packages use: argument checks (``validation``), the verdict of a check (``verdicts``), atomic file
writes (``files``), the versions a result was produced with (``versions``), thread-safe working precision of
mpmath and python-flint (``precision``) and the one way a random stream is made (``seeds``). The lowest layer of the
project.
"""

from __future__ import annotations

from .files import (
    JOURNAL,
    FolderLocked,
    atomic_write,
    atomic_write_set,
    deferred_signals,
    exclusive_folder,
    file_stem,
    recover_folder,
)
from .precision import DOUBLE, holding_precision, working_bits, working_digits
from .seeds import random_stream, seed_words
from .validation import (
    check_choice,
    check_int,
    check_ladder,
    check_matrix,
    check_real,
    check_tokens,
)
from .verdicts import Verdict
from .versions import package_versions

__all__ = [
    "DOUBLE",
    "FolderLocked",
    "JOURNAL",
    "Verdict",
    "atomic_write",
    "atomic_write_set",
    "check_choice",
    "check_int",
    "check_ladder",
    "check_matrix",
    "check_real",
    "check_tokens",
    "deferred_signals",
    "exclusive_folder",
    "file_stem",
    "holding_precision",
    "package_versions",
    "random_stream",
    "recover_folder",
    "seed_words",
    "working_bits",
    "working_digits",
]
