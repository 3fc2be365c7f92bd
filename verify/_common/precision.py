"""Working precision of mpmath and python-flint for a block, one thread at a time.

Both libraries keep their precision process-wide (``mpmath.mp.prec``, ``flint.ctx.prec``), and the studies run side by
side in threads. Two threads in plain ``mpmath.workdps`` blocks interleave badly: the one that leaves first restores
its saved precision under the other, which then computes at the wrong precision to the end of its block. The blocks
below hold one process-wide re-entrant lock instead, so two such blocks never interleave; blocks nest within a
thread, and another thread's block waits. sympy sets mpmath's precision itself (``nsimplify`` sets ``mp.dps``;
substituting floats into cosh and the like, ``float()`` of an exact form and evalf enter ``mpmath.workprec``, down
to 2 bits in sign queries): such sympy work at study time, and verify's public derivations from a user's step
(``one_step_limit``, ``check_limit``), run under ``holding_precision``, which holds the same lock. A computation at
mpmath's default precision outside any block can still see a block's precision; closed forms evaluated for float
results take ``DOUBLE`` as their context instead of ``mpmath.mp``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import flint
import mpmath

_LOCK = threading.RLock()

# mpmath at its default 53 bits in a context of its own, which no block changes: a closed form written against a
# context (``ctx.exp``, ``ctx.mpf``, ...) gives the same number with ``ctx = DOUBLE`` whatever another thread's block
# does to ``mpmath.mp``'s precision. For arithmetic and elementary functions only: findroot, quad and the like raise
# their context's precision while they work, so they take a fresh ``mpmath.MPContext()`` per call.
DOUBLE = mpmath.MPContext()


@contextmanager
def holding_precision() -> Iterator[None]:
    """Hold the precision lock for a block (or, as ``@holding_precision()``, a function) that changes mpmath's
    precision by itself, as sympy's ``nsimplify``, evalf and float substitution into cosh & co. do: no other
    thread's precision block runs meanwhile, nor does this block run inside another thread's."""
    with _LOCK:
        yield


@contextmanager
def working_digits(dps: int) -> Iterator[None]:
    """``mpmath.workdps(dps)`` for the block, holding the precision lock."""
    with holding_precision(), mpmath.workdps(dps):
        yield


@contextmanager
def working_bits(bits: int) -> Iterator[None]:
    """python-flint's working precision ``bits`` for the block, holding the precision lock."""
    with holding_precision():
        saved = flint.ctx.prec
        flint.ctx.prec = bits
        try:
            yield
        finally:
            flint.ctx.prec = saved
