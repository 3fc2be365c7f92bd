"""Where blocks of paths are computed, and the cache that makes long runs resumable.

Every study splits its paths into compute blocks (``blocks.compute_blocks``) whose random numbers depend
only on the seed and the absolute index of the block, and calls ``map_blocks``, which runs its blocks, grouped
into tasks,

* in process (scheduler ``"sync"``, the default),
* on a local ``dask.distributed`` cluster of worker processes (``"processes"``), or
* on an existing dask scheduler (an address ``"tcp://host:port"``),

and returns the block results in block order. A block is what one computation sees at once, fixed by the
experiment's design (``blocks``); the execution only groups consecutive blocks into tasks (``task_paths``), so every
number is bit-identical whatever the scheduler, the number of workers or the task size.

Resumable runs: inside ``caching(directory, scope, resume)`` each finished task is written to the block cache and
read back instead of recomputed when intact and authentic (``block_cache``).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import ctypes.util
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from verify._common import check_int

from .block_cache import BlockCache, cache_secret
from .blocks import compute_blocks, tasks

SCHEDULERS = ("sync", "processes")  # or a scheduler address tcp://host:port
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest mmap threshold
TRIM_THRESHOLD = 2**30  # freed heap memory a worker keeps instead of returning it to the system (dask's: 64 KiB)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
BlockTask = Callable[[int, int, Callable[[int], None] | None], Any]


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform reports it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_scheduler() -> tuple[str, int]:
    """The command line's default: a local cluster of one worker process per available core, or in process
    on a single core (results are bit-identical either way)."""
    cores = available_cores()
    return ("processes", cores) if cores > 1 else ("sync", 1)


_REMOTE_CPU: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("remote_cpu", default=None)


@dataclass
class CpuClock:
    """CPU seconds used inside a ``cpu_meter`` block, split into this thread's own (serial) work and the blocks
    dask workers ran for it."""

    _thread_start: float
    _remote: list[float]

    def serial(self) -> float:
        """This thread's CPU seconds (in-process blocks included): work no worker can take over."""
        return time.thread_time() - self._thread_start

    def total(self) -> float:
        return self.split()[0]

    def split(self) -> tuple[float, float]:
        """(total, serial) from one reading of this thread's clock, so that serial <= total."""
        serial = self.serial()
        return serial + self._remote[0], serial


@contextlib.contextmanager
def cpu_meter() -> Iterator[CpuClock]:
    """Yield a ``CpuClock`` of the CPU seconds used so far inside the ``with``: this thread's (in-process blocks
    included) plus every block that dask workers ran for it (each measured on its worker). Exact under
    concurrency: two studies run side by side in two threads are each charged only their own work. Nested meters
    (a timed public check inside a study) each see their own; on leaving, the inner one's worker seconds are passed
    on to the enclosing meter (this thread's own seconds it reads from the same clock)."""
    outer = _REMOTE_CPU.get()
    remote = [0.0]
    token = _REMOTE_CPU.set(remote)
    try:
        yield CpuClock(time.thread_time(), remote)
    finally:
        _REMOTE_CPU.reset(token)
        if outer is not None:
            outer[0] += remote[0]


def as_finished(function: Callable[[Any], Any], items: Sequence[Any], threads: int) -> Iterator[tuple[int, Any]]:
    """Yield ``(index, function(items[index]))`` as calls finish, ``threads`` at a time, each in a daemon thread with a
    copy of the caller's context (its execution, cache and CPU meter). An error in a call is raised here; on an
    interrupt the caller leaves at once (daemon threads do not hold the process; finished blocks are in the cache).
    A thread's own CPU seconds (not its blocks', which their workers report) are charged to the caller's meter as
    remote work: they ran beside the caller, not in its thread."""
    check_int("threads", threads, minimum=1)
    todo, done = queue.SimpleQueue(), queue.SimpleQueue()
    for index in range(len(items)):
        todo.put(index)
    remote = _REMOTE_CPU.get()

    def worker() -> None:
        start = time.thread_time()
        try:
            while True:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((index, function(items[index]), None))
                except BaseException as error:  # handed to the caller's thread
                    done.put((index, None, error))
                    return
        finally:
            if remote is not None:
                remote[0] += time.thread_time() - start

    context = contextvars.copy_context()
    for _ in range(min(threads, len(items))):
        threading.Thread(target=context.copy().run, args=(worker,), daemon=True).start()
    for _ in items:
        index, result, error = done.get()
        if error is not None:
            raise error
        yield index, result


def concurrent_map(function: Callable[[Any], Any], items: Sequence[Any], threads: int = 64) -> list[Any]:
    """``[function(item) for item in items]``. When blocks run on dask workers the calls run in up to ``threads``
    threads (``as_finished``), so the blocks of many small runs are submitted together instead of one run's blocks
    waiting behind another's; in process they run one after the other. The results, in item order, are the same
    either way (a block's numbers depend only on its seed, key and paths)."""
    if current_execution().client is None:
        return [function(item) for item in items]
    results: list[Any] = [None] * len(items)
    for index, result in as_finished(function, items, threads):
        results[index] = result
    return results


def check_scheduler(scheduler: str) -> str:
    """``sync``, ``processes`` or a dask scheduler address (``tcp://``, ``tls://``, ``inproc://``)."""
    if not isinstance(scheduler, str) or not (
        scheduler in SCHEDULERS or scheduler.partition("://")[0] in ("tcp", "tls", "inproc", "ucx")
    ):
        raise ValueError(
            f"scheduler must be 'sync', 'processes' or a scheduler address like tcp://host:8786, got {scheduler!r}"
        )
    return scheduler


@dataclass
class Execution:
    """Where blocks run (a dask client, or in process when None), the optional block cache and the task size."""

    cache: BlockCache | None = None
    client: Any = None
    task_paths: int | None = None  # paths per task, in whole blocks (default one block; results do not depend on it)


_CURRENT: contextvars.ContextVar[Execution | None] = contextvars.ContextVar("execution", default=None)


def current_execution() -> Execution:
    """The execution set by the innermost ``scheduler`` / ``caching`` block (in process, no cache by default)."""
    return _CURRENT.get() or Execution()


@cache
def keep_freed_memory() -> bool:
    """Give this process the allocator the workers start with (``scheduler``): glibc's mmap threshold fixed at
    ``MMAP_THRESHOLD`` and up to ``TRIM_THRESHOLD`` of freed heap kept, so that numpy's temporaries reuse heap pages
    instead of page-faulting fresh ones (glibc's default hands a freed top of the heap above 128 KiB back to the
    system: attention on 8-32 tokens ran 2-3 times slower in process than on a worker). Once per process; False
    where the C library has no ``mallopt`` or refuses a value. Numbers do not change, only where memory comes from."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@contextlib.contextmanager
def scheduler(name: str = "sync", workers: int = 2, task_paths: int | None = None) -> Iterator[Execution]:
    """Run the blocks of every study inside the ``with`` on ``name`` (module docstring), with ``workers``
    local processes for ``"processes"``; ``task_paths`` groups consecutive blocks into tasks of at least that many
    paths (default: one block per task). This process gets the workers' allocator settings (``keep_freed_memory``).
    """
    name = check_scheduler(name)
    check_int("workers", workers, minimum=1, maximum=1024)
    if task_paths is not None:
        check_int("task_paths", task_paths, minimum=1)
    keep_freed_memory()  # the studies' own threads (and every block, in process) compute here
    previous = current_execution()
    execution = Execution(previous.cache, task_paths=task_paths)
    with contextlib.ExitStack() as stack:
        if name != "sync":
            from distributed import Client, LocalCluster

            if name == "processes":
                import dask

                # dask starts workers with MALLOC_TRIM_THRESHOLD_ set, which switches off glibc's dynamic mmap
                # threshold: every numpy temporary above 128 KiB is then mmap'd and unmapped (1.7x slower blocks).
                # A fixed mmap threshold of 32 MiB (read at process start, so it must be a pre-spawn variable)
                # restores in-process speed. dask's trim threshold of 64 KiB also hands every freed block back to the
                # system, so the next block page-faults it in again (sync-agazzi quick: 13% of its time, mostly
                # system time): workers keep up to 1 GiB of freed heap instead.
                stack.enter_context(
                    dask.config.set(
                        {
                            "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
                            "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
                        }
                    )
                )
                cluster = stack.enter_context(
                    LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
                )
                execution.client = stack.enter_context(Client(cluster))
            else:
                execution.client = stack.enter_context(Client(name))
        token = _CURRENT.set(execution)
        try:
            yield execution
        finally:
            _CURRENT.reset(token)


@contextlib.contextmanager
def caching(
    directory: str | os.PathLike, scope: dict, resume: bool = False, key_file: str | os.PathLike | None = None
) -> Iterator[BlockCache]:
    """Write every finished block under ``directory`` (keyed by ``scope``, authenticated by ``cache_secret``
    (``directory``, ``key_file``)); with ``resume``, reuse intact and authentic ones."""
    block_cache = BlockCache(Path(directory), dict(scope), bool(resume), cache_secret(directory, key_file))
    previous = current_execution()
    token = _CURRENT.set(replace(previous, cache=block_cache))
    try:
        yield block_cache
    finally:
        _CURRENT.reset(token)


def _run_task(run_block: BlockTask, blocks: Sequence[tuple[int, int]], progress: Callable[[int], None] | None) -> list:
    """A task: its blocks, one after the other."""
    return [run_block(start, stop, progress) for start, stop in blocks]


def _run_counting(run_block: BlockTask, blocks: Sequence[tuple[int, int]]) -> tuple[list, int, float]:
    """Run a task on a worker, counting the progress units it reports and its CPU seconds (sent back with the
    results)."""
    units = [0]

    def count(n: int) -> None:
        units[0] += n

    cpu = time.thread_time()
    results = _run_task(run_block, blocks, count)
    return results, units[0], time.thread_time() - cpu


def lambdified(symbols, expression, modules="numpy") -> Callable:
    """``sympy.lambdify(symbols, expression, modules)`` with ``__module__`` set to this module's name. A lambdified
    function has none, and for such a function cloudpickle (what dask ships a task with) looks for its name in every
    module of ``sys.modules``: about 23 ms per function with torch loaded, for every task that carries it. Its name
    is not found here either, so it still travels by value, at once."""
    import sympy as sp

    function = sp.lambdify(symbols, expression, modules)
    function.__module__ = __name__
    return function


def block_count(paths: int, block_paths: int) -> int:
    """How many compute blocks ``map_blocks`` splits ``paths`` into (a design's number: no execution changes it)."""
    return len(list(compute_blocks(paths, block_paths)))


def map_blocks(
    run_block: BlockTask,
    paths: int,
    block_paths: int,
    label: str,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
) -> list[Any]:
    """``run_block(start, stop, progress)`` for every compute block of ``paths`` from ``start`` on (blocks of
    ``block_paths`` rounded up to whole seed blocks), in block order, whatever tasks the current execution groups
    them into.

    ``label`` names the computation within the current cache scope (e.g. the function and its stream key); results
    are numpy arrays or dicts / tuples / lists of them.
    """
    execution = current_execution()
    groups = tasks(list(compute_blocks(paths, block_paths, start)), execution.task_paths)
    block_cache = execution.cache
    keys = [block_cache.key(label, group) if block_cache else "" for group in groups]
    results: list[Any] = [block_cache.load(key) if block_cache else None for key in keys]
    missing = [i for i, result in enumerate(results) if result is None]
    if execution.client is None:
        for i in missing:
            results[i] = _run_task(run_block, groups[i], progress)
            if block_cache:
                block_cache.store(keys[i], results[i])
        return [result for group in results for result in group]
    from distributed import as_completed

    futures = {execution.client.submit(_run_counting, run_block, groups[i], pure=False): i for i in missing}
    for future in as_completed(futures):
        i = futures[future]
        results[i], units, cpu = future.result()
        if (remote := _REMOTE_CPU.get()) is not None:
            remote[0] += cpu
        if block_cache:
            block_cache.store(keys[i], results[i])
        if progress is not None:
            progress(units)
    return [result for group in results for result in group]


def concatenate_blocks(results: Sequence[Any]) -> Any:
    """Concatenate block results (arrays, or dicts / tuples of arrays) along the paths axis."""
    first = results[0]
    if isinstance(first, dict):
        return {name: concatenate_blocks([r[name] for r in results]) for name in first}
    if isinstance(first, (tuple, list)):
        return type(first)(concatenate_blocks([r[i] for r in results]) for i in range(len(first)))
    return np.concatenate(results)
