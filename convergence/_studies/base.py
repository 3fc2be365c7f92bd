"""What a study is: a name, a one-line claim, a run function per profile, and its headline checks; and how it
reports progress (``ProgressFactory``: none, ``no_progress``, or bars on standard error, ``progress_bars``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from tqdm import tqdm

from verify._common import check_choice, check_int, package_versions

from .._output import Headline, StudyResult
from .._runtime import cpu_meter, reference_seconds

PROFILES = ("quick", "full")

# progress(total_units) -> advance(units); a study reports its work in units it chooses.
ProgressFactory = Callable[[int, str], Callable[[int], None]]


def no_progress(total: int, description: str) -> Callable[[int], None]:
    return lambda units: None


def progress_bars(enabled: bool) -> ProgressFactory:
    """One progress bar per study on standard error (tqdm), closed when its work is done; none unless ``enabled``."""
    if not enabled:
        return no_progress

    def factory(total: int, description: str) -> Callable[[int], None]:
        bar = tqdm(total=total, desc=description, unit="step", leave=False, file=sys.stderr)

        def advance(units: int) -> None:
            bar.update(units)
            if bar.n >= total:
                bar.close()

        return advance

    return factory


@dataclass(frozen=True)
class Study:
    """A named study. ``run`` validates its inputs, times the work (wall time, and CPU time of this process and of
    the dask workers' blocks run for it), stamps versions and the machine's reference kernel time ``ref_s``."""

    name: str
    summary: str
    execute: Callable[[str, int, ProgressFactory], StudyResult]
    in_report: bool = True  # False: run by name only (``python -m convergence run``), not by ``report``
    headlines: tuple[Headline, ...] = ()  # checks shown in the index's headline table (``output.headlines``)

    def run(self, profile: str = "quick", seed: int = 0, progress: ProgressFactory = no_progress) -> StudyResult:
        check_choice("profile", profile, PROFILES)
        check_int("seed", seed, minimum=0, maximum=2**63 - 1)
        ref = reference_seconds()  # before the work, once per process: costs in ref units (runtime.reference)
        start = time.perf_counter()
        with cpu_meter() as cpu:
            result = self.execute(profile, seed, progress)
            result.cpu_s, result.serial_cpu_s = (round(seconds, 3) for seconds in cpu.split())
        result.elapsed_s = round(time.perf_counter() - start, 3)
        result.versions = package_versions()
        result.ref_s = round(ref, 3)
        return result
