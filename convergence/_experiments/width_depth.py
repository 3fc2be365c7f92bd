"""Width against depth for model A's fresh-feature block: does the depth limit depend on the width m?

With every weight fresh at each layer, the block G_k has covariance K(x, y) I_d at any width m, so the
depth limit at fixed m is the kernel-k SDE for every m: the width only enters through the block's
non-Gaussian cumulants, and an observable's width effect at depth L is O(h / m) (it vanishes as L grows).
The limits L -> infinity and m -> infinity therefore commute, with the same limit as the infinite-width
(Gaussian-field) layer map.

Experiment, at each depth L (fresh-feature noise is not a Brownian increment, so depths are independent
runs): u(m, L) = E[E_beta(mu^{n,m,L}_T)] for a doubling ladder of widths, and u(inf, L) from the
Gaussian-field map started from the same initial tokens with its own noise. Widths share one draw of the
widest block: width m uses the rows of its group of m features (``WidthGroups``), every group running the
same initial tokens, and u(m, L) averages the groups (m_max / m of them).

Check ``width_effect``: u(m_min, L) - u(inf, L) = a + b h over the depth ladder, and the depth limit a is 0
(the finite-depth width effect b h, O(h/m) in theory, is allowed); ``inconclusive`` when the interval of a
detects an effect (``detectable_effect``) only above ``resolution``. A block whose covariance changed with m would fail
it. (A first version required the mean over L of the effect itself to vanish: with 2048 paths it detected the
finite-depth effect, about +0.002 at m = 4, decreasing in m, which the theory predicts.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from verify._analysis import KernelSpec
from verify._common import check_int, check_ladder, check_real

from .._models import AgazziModel, FreshFeatureField, GaussianField
from .._output import Heatmap
from .._paths import (
    BrownianBlock,
    Level,
    PathStreams,
    RateTolerance,
    run_coupled,
    run_seeded,
    uniform_sphere,
)
from .._runtime import concatenate_blocks
from .._statistics import (
    CONFIDENCE,
    bootstrap_counts,
    bootstrap_interval,
    bootstrap_means,
    effect_check,
    least_squares_line,
)
from .energy import interaction_energy, mean_system_energy

FieldFactory = Callable[[KernelSpec, int], FreshFeatureField]


@dataclass(frozen=True, kw_only=True)
class WidthDepthDesign(RateTolerance):
    """Widths and depths (doubling ladders), tokens n, horizon T, beta, paths; ``resolution`` is the
    largest half-width of the ``width_effect`` interval that still decides."""

    widths: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    depths: tuple[int, ...] = (4, 8, 16, 32, 64)
    tokens: int = 16
    horizon: float = 1.0
    beta: float = 1.0
    paths: int = 256
    block_paths: int = 256
    resolution: float = 0.01

    def __post_init__(self) -> None:
        check_ladder("widths", self.widths)
        if any(self.widths[-1] % m for m in self.widths):
            raise ValueError(f"every width must divide the largest, got widths = {self.widths}")
        check_ladder("depths", self.depths)
        check_int("tokens", self.tokens, minimum=2)
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("paths", self.paths, minimum=2)
        check_real("resolution", self.resolution, minimum=0.0, strict_minimum=True)


@dataclass(frozen=True, eq=False)
class WidthGroups:
    """Model A with width-``width`` fresh-feature blocks cut from one block of width ``total``.

    The state (paths, groups * n, d) holds one copy of the n tokens per group of ``width`` consecutive
    features; copy g takes rows g*width .. (g+1)*width - 1 of the wide block and its output bias c.
    """

    model: AgazziModel
    total: int

    @property
    def groups(self) -> int:
        return self.total // self.model.field.width

    @property
    def noise(self):
        return FreshFeatureField(self.model.field.spec, self.total).noise

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        paths, groups, width = x.shape[0], self.groups, self.model.field.width
        rows = dw[:, : self.total].reshape(paths, groups, width, dw.shape[-1])
        bias = np.broadcast_to(dw[:, None, self.total :], (paths, groups, 1, dw.shape[-1]))
        dw_groups = np.concatenate([rows, bias], axis=2).reshape(paths * groups, width + 1, dw.shape[-1])
        copies = x.reshape(paths * groups, self.model.tokens, x.shape[-1])
        return self.model.layer(copies, dw_groups, h).reshape(x.shape)


def width_depth_energies(
    spec: KernelSpec,
    design: WidthDepthDesign,
    seed: int,
    key: Sequence[int],
    field_for: FieldFactory = FreshFeatureField,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """E_beta(mu_T) per path: shape (paths, depths, widths + 1), the last column from the Gaussian-field map."""
    total, n = design.widths[-1], design.tokens
    out = np.empty((design.paths, len(design.depths), len(design.widths) + 1))
    for d_index, depth in enumerate(design.depths):
        h = design.horizon / depth
        steppers = [WidthGroups(AgazziModel(n, field_for(spec, m), design.beta, 1.0), total) for m in design.widths]
        levels = [Level(f"m={m}", s, 1) for m, s in zip(design.widths, steppers)]
        gaussian = AgazziModel(n, GaussianField(spec, n), design.beta, 1.0)

        def compute(
            streams: PathStreams,
            advance,
            d_index=d_index,
            h=h,
            depth=depth,
            steppers=steppers,
            levels=levels,
            gaussian=gaussian,
        ) -> np.ndarray:
            x = uniform_sphere(streams, n, spec.dim)
            block = BrownianBlock(steppers[0].noise, streams, h)
            final = run_coupled(
                levels, [], [np.tile(x, (1, s.groups, 1)) for s in steppers], block, depth, advance
            ).final
            energies = [mean_system_energy(state, n, design.beta) for state in final]
            # the same initial tokens, the Gaussian field's own noise (common random numbers for the comparison)
            noise_streams = streams.with_key((*key, d_index, 1))
            state = run_coupled(
                [Level("inf", gaussian, 1)], [], x, BrownianBlock(gaussian.noise, noise_streams, h), depth, advance
            ).final[0]
            return np.stack([*energies, interaction_energy(state, design.beta)], axis=1)

        out[:, d_index] = concatenate_blocks(
            run_seeded(
                compute,
                name="width_depth_energies",
                configuration=(design, spec, field_for),
                seed=seed,
                key=(*key, d_index, 0),
                paths=design.paths,
                block_paths=design.block_paths,
                progress=progress,
            )
        )
    return out


def analyse_width_depth(
    energies: np.ndarray,
    design: WidthDepthDesign,
    config: dict,
    rng: np.random.Generator,
    confidence: float = CONFIDENCE,
):
    """Check ``width_effect`` (the depth limit of the width-m map is the infinite-width one; interval at
    ``confidence``, inconclusive when its resolution exceeds ``design.resolution``) and the heatmap."""
    paths = energies.shape[0]
    flat = energies.reshape(paths, -1)
    boot = bootstrap_means(flat, bootstrap_counts(rng, paths, design.replicates)).reshape(-1, *energies.shape[1:])
    point = energies.mean(axis=0)
    effect = point[:, :-1] - point[:, -1:]
    steps = design.horizon / np.asarray(design.depths, dtype=np.float64)
    limit, slope = least_squares_line(steps, effect[:, 0])
    boot_limit, boot_slope = least_squares_line(steps, boot[:, :, 0] - boot[:, :, -1])
    lo, hi = (float(v) for v in bootstrap_interval(limit, boot_limit, confidence))
    slope_lo, slope_hi = (float(v) for v in bootstrap_interval(slope, boot_slope, confidence))
    limit = float(limit)
    label = ", ".join(f"{k}={v}" for k, v in config.items())
    check = effect_check(
        "width_effect",
        0.0,
        limit,
        (lo, hi),
        0.0,
        design.resolution,
        config,
        confidence=confidence,
        note=(
            f"L -> infinity intercept a of u(m, L) - u(inf, L) = a + b h over L in {list(design.depths)}, smallest "
            f"width m = {design.widths[0]} (n = {design.tokens}, fresh features; u(inf, L) from the Gaussian-field "
            f"map, same initial tokens, own noise); finite-depth width effect b = {float(slope):.3g} [{slope_lo:.3g}, "
            f"{slope_hi:.3g}] per unit h (theory: O(1/m)); inconclusive when the resolution exceeds "
            f"{design.resolution:g}"
        ),
    )
    heatmap = Heatmap(
        f"u(m, L) - u(inf, L) ({label})", "L", "m", list(design.depths), list(design.widths), effect.tolist()
    )
    return [check], heatmap
