"""Where work runs: blocks of paths, the unit of seeding and of work (``blocks``), the schedulers (in process or dask)
(``execution``) with the resumable block cache (``block_cache``), the explicit identity of a configuration that keys
it (``identity``), the results two studies of one run share (``sharing``), the reference kernel that costs are
measured in (``reference``), and why a run stopped, as its exit code and one sentence (``faults``). The lowest
layer: it imports nothing else from ``convergence``.
"""

from __future__ import annotations

from verify._common import random_stream, seed_words

from .block_cache import BlockCache, cache_secret
from .blocks import SEED_BLOCK, STREAM_KEYS, block_streams, compute_blocks
from .execution import (
    as_finished,
    available_cores,
    block_count,
    caching,
    check_scheduler,
    concatenate_blocks,
    concurrent_map,
    cpu_meter,
    default_scheduler,
    keep_freed_memory,
    lambdified,
    map_blocks,
    scheduler,
)
from .faults import Exit, Fault, as_fault, terminate_as_interrupt
from .identity import identity
from .reference import REFERENCE_NORMALS, in_reference_units, measure_reference, reference_seconds
from .sharing import shared_result

__all__ = [
    "REFERENCE_NORMALS",
    "SEED_BLOCK",
    "STREAM_KEYS",
    "BlockCache",
    "Exit",
    "Fault",
    "as_fault",
    "as_finished",
    "available_cores",
    "block_count",
    "block_streams",
    "cache_secret",
    "caching",
    "check_scheduler",
    "compute_blocks",
    "concatenate_blocks",
    "concurrent_map",
    "cpu_meter",
    "default_scheduler",
    "identity",
    "in_reference_units",
    "keep_freed_memory",
    "lambdified",
    "map_blocks",
    "measure_reference",
    "random_stream",
    "reference_seconds",
    "scheduler",
    "seed_words",
    "shared_result",
    "terminate_as_interrupt",
]
