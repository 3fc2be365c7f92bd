"""Cost curves: how the time of the discrete layer maps grows with each size a study grows.

For each axis one workload is timed (best of ``repeats`` after a warm-up, in process) at a ladder of sizes with
the others fixed, and the log-log slope over the ladder's upper half is reported as the fitted exponent (time ~
size^p). Expected, from the algorithms: tokens N -> 2 (the n x n attention scores), dimension d -> 2 (model F's
d x d value matrix: d^2 normals per layer), depth L -> 1, paths -> 1, width m -> 1 (model A's fresh-feature
block); for the width-indexed blocks of the covariance checks, width n -> 2 (a layer draws n x n weights per sample:
a law check at width n runs T n layers, so it costs about T n^3 a sample, a local check n^2) and inputs m -> 1 (m n^2
products, beside n^2 normals drawn: flat while m is small; the frame's QR and Z Z^T, m^2 n, can lift it above 1 at
m comparable to n). An exponent far above these names a scaling bug; one
below shows fixed costs still dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verify._analysis import KernelSpec

from .._models import AgazziModel, FedorovModel, FreshFeatureField, ShapedMLPBlock
from .._output import Curve, Plot
from .._paths import correlation, simulate, width_run
from .._statistics import log_log_slope


@dataclass(frozen=True)
class CostAxis:
    """A size that grows: ``workload(size)`` returns the run to time; ``expected`` is the algorithm's exponent."""

    name: str
    label: str
    sizes: tuple[int, ...]
    expected: float
    workload: Callable[[int], Callable[[], object]]
    description: str


def _forward(layer_map, depth: int, paths: int) -> Callable[[], object]:
    return lambda: simulate(layer_map, depth, 1.0, paths, seed=0, block_paths=paths)


def _width_layers(inputs: int, width: int, layers: int = 2, samples: int = 4096) -> Callable[[], object]:
    """``layers`` layers of the shaped MLP (c_+ = -c_- = 1.5) at ``width`` on ``inputs`` uncorrelated unit inputs
    (4096 samples: whole seeded blocks at every width, ``seeded_block``, so the time is per sample)."""
    block = ShapedMLPBlock(inputs, c_plus=1.5, c_minus=-1.5, rate=1.0)
    return lambda: width_run(block, np.eye(inputs), width, layers, samples, correlation, 0, (0,))


AXES = (
    CostAxis(
        "tokens",
        "tokens N",
        (64, 128, 256, 512, 1024),
        2.0,
        lambda n: _forward(FedorovModel(n, 5, 1.0), 4, 16),
        "model F, d = 5, 16 paths, 4 layers",
    ),
    CostAxis(
        "dimension",
        "dimension d",
        (8, 16, 32, 64, 128),
        2.0,
        lambda d: _forward(FedorovModel(2, d, 1.0), 16, 512),
        "model F, n = 2, 512 paths, 16 layers",
    ),
    CostAxis(
        "depth",
        "depth L",
        (16, 32, 64, 128, 256),
        1.0,
        lambda depth: _forward(FedorovModel(2, 16, 1.0), depth, 512),
        "model F, n = 2, d = 16, 512 paths",
    ),
    CostAxis(
        "paths",
        "paths",
        (256, 512, 1024, 2048, 4096),
        1.0,
        lambda paths: _forward(FedorovModel(2, 16, 1.0), 16, paths),
        "model F, n = 2, d = 16, 16 layers",
    ),
    CostAxis(
        "width",
        "width m",
        (32, 64, 128, 256, 512),
        1.0,
        lambda m: _forward(AgazziModel(16, FreshFeatureField(KernelSpec("relu", 5), m), 1.0, 1.0), 8, 64),
        "model A (fresh-feature ReLU block), N = 16, d = 5, 64 paths, 8 layers",
    ),
    CostAxis(
        "covariance_width",
        "width n (covariance)",
        (8, 16, 32, 64, 128),
        2.0,
        lambda n: _width_layers(2, n),
        "shaped MLP block, m = 2 inputs, 4096 samples, 2 layers",
    ),
    CostAxis(
        "covariance_inputs",
        "inputs m (covariance)",
        (2, 4, 8, 16, 32),
        1.0,
        lambda m: _width_layers(m, 64),
        "shaped MLP block, width n = 64, 4096 samples, 2 layers",
    ),
)


def cost_curves(
    best_time: Callable[[Callable[[], object], int], float],
    repeats: int = 2,
    progress: Callable[[str], None] = lambda name: None,
    axes: tuple[CostAxis, ...] = AXES,
) -> dict[str, dict]:
    """Seconds per size (``best_time(run, repeats)``) and the fitted exponent (log-log slope over the upper three
    sizes) for every axis."""
    curves = {}
    for axis in axes:
        progress(f"cost curve: {axis.name}")
        seconds = [best_time(axis.workload(size), repeats) for size in axis.sizes]
        exponent = float(log_log_slope(np.asarray(axis.sizes[-3:]), np.asarray(seconds[-3:])))
        curves[axis.name] = {
            "label": axis.label,
            "sizes": list(axis.sizes),
            "seconds": seconds,
            "exponent": exponent,
            "expected": axis.expected,
            "workload": axis.description,
        }
    return curves


def cost_plots(curves: dict[str, dict]) -> list[Plot]:
    """One log-log panel per axis: measured times and the fitted power law through the upper sizes."""
    plots = []
    for entry in curves.values():
        sizes, seconds = np.asarray(entry["sizes"], float), np.asarray(entry["seconds"], float)
        fitted = seconds[-1] * (sizes / sizes[-1]) ** entry["exponent"]
        plots.append(
            Plot(
                f"{entry['workload']}",
                entry["label"],
                "seconds",
                [
                    Curve("measured", sizes.tolist(), seconds.tolist(), style="points"),
                    Curve(
                        f"fit: exponent {entry['exponent']:.2f} (expected {entry['expected']:g})",
                        sizes.tolist(),
                        fitted.tolist(),
                    ),
                ],
                logx=True,
                logy=True,
            )
        )
    return plots
