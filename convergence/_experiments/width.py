"""Width convergence of model A at fixed depth: the width-m network against the infinite-width one.

Coupling. At each layer the paper's block (U, b, W, c fresh, width m) is, given U and b, a Gaussian
field at the token positions with covariance K_m(Y) = (1/m) phi phi^T + sigma_W^2,
phi = act(U Y / sqrt(d) + b) (n x m); the infinite-width block is Gaussian with covariance
K(Y) = [k(<y_i, y_j>)]. Both are sampled as sqrt(K) dZ with the same n x d standard matrix dZ and the
symmetric square root, so the only difference between the two networks is K_m - K: the layer's
feature kernel against its mean. This is a synchronous coupling, exact in law for each network. The
per-layer errors are independent and of mean square O(|K_m - K|^2) = O(1/m); summed over L layers
of weight h they give E (1/n) sum_i |X^m_i - X^inf_i|^2 = O(T/m) at any depth: order 1 in 1/m, the
theorem's rate. Widths are nested (width m uses the first m features of the widest draw), which
correlates the levels and sharpens the fitted slope; it does not change any level's law.

Why this and not a weak observable: with fresh features the depth limit at fixed m is already the
kernel-k SDE (the layers average K_m to K), so the width bias of a weak observable is O(h/m),
too small to measure at useful depths; the pathwise coupling measures the 1/m term itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from verify._analysis import KernelSpec, kernel
from verify._common import check_int, check_ladder, check_real
from verify._models import activation

from .._models import (
    CommonNoise,
    attention_half_step,
    half_squared_distances,
    normalise,
    preactivations,
    psd_factor,
)
from .._output import Panel, Series
from .._paths import (
    BrownianBlock,
    InitialState,
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
    FAIL,
    Check,
    bootstrap_counts,
    detectable_effect,
    fit_order,
    limit_plateau,
    limit_verdict,
)


@dataclass(frozen=True, kw_only=True)
class WidthDesign(RateTolerance):
    """Widths (increasing), depth L, horizon T, tokens n, paths; the order is the mean-square order in 1/m."""

    widths: tuple[int, ...]
    depth: int = 32
    horizon: float = 1.0
    tokens: int = 4
    paths: int = 512
    block_paths: int = 1024
    limit_allowance: float = 0.1  # fraction of the widest level's mean-square error

    def __post_init__(self) -> None:
        check_ladder("widths", self.widths)
        check_int("depth", self.depth, minimum=1)
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("tokens", self.tokens, minimum=2)
        check_int("paths", self.paths, minimum=2)
        check_int("replicates", self.replicates, minimum=10)


@dataclass(frozen=True, eq=False)
class KernelMatrixNetwork:
    """Model A's layer with the block sampled as sqrt(K) dZ; K = K_m from the packed features, or K = k.

    Noise per layer (packed, not Brownian): rows 0..n-1, columns 0..d-1 hold dZ (N(0, h) entries);
    rows n..n+M-1 hold U's rows (columns 0..d-1) and b / sigma_U (column d), scaled by sqrt(h) when
    drawn and rescaled here. ``width = None`` is the infinite-width network (reads dZ only).
    """

    spec: KernelSpec
    tokens: int
    max_width: int
    width: int | None
    beta: float = 1.0
    v: float = 1.0

    @property
    def dim(self) -> int:
        return self.spec.dim

    @property
    def noise(self) -> CommonNoise:
        return CommonNoise(shape=(self.tokens + self.max_width, self.dim + 1), nested=False)

    def covariance(self, y: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        if self.width is None:
            k = kernel(self.spec)
            return k.k1 - k.deficit(half_squared_distances(y))
        n, d, m = self.tokens, self.dim, self.width
        unit = dw[:, n : n + m] / np.sqrt(h)
        phi = activation(self.spec.activation).numpy(preactivations(y, unit[..., :d], self.spec.sigma_u * unit[..., d]))
        return phi @ np.swapaxes(phi, -1, -2) / m + self.spec.sigma_w**2

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        y = attention_half_step(x, h, self.beta, self.v)
        dz = dw[:, : self.tokens, : self.dim]
        return normalise(y + psd_factor(self.covariance(y, dw, h), "symmetric") @ dz)


def coupled_width_errors(
    spec: KernelSpec,
    design: WidthDesign,
    seed: int,
    key: Sequence[int],
    beta: float = 1.0,
    v: float = 1.0,
    initial: InitialState = uniform_sphere,
    progress: Callable[[int], None] | None = None,
    limit_spec: KernelSpec | None = None,
) -> np.ndarray:
    """Per-path token-mean squared distance at T between each width and infinite width: (paths, widths).

    ``limit_spec`` is the kernel claimed as the infinite-width limit (default: ``spec``'s own kernel).
    """
    top = design.widths[-1]
    networks = [KernelMatrixNetwork(limit_spec or spec, design.tokens, top, None, beta, v)]
    networks += [KernelMatrixNetwork(spec, design.tokens, top, m, beta, v) for m in design.widths]
    levels = [Level("infinite" if net.width is None else f"m={net.width}", net, 1) for net in networks]
    comparisons = [(i + 1, 0) for i in range(len(design.widths))]
    h = design.horizon / design.depth

    def compute(streams: PathStreams, advance) -> np.ndarray:
        x0 = initial(streams, design.tokens, spec.dim)
        block = BrownianBlock(networks[0].noise, streams, h)
        return run_coupled(levels, comparisons, x0, block, design.depth, advance).final_sq

    return concatenate_blocks(
        run_seeded(
            compute,
            name="coupled_width_errors",
            configuration=(design, spec, limit_spec, beta, v, initial),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
            progress=progress,
        )
    )


def analyse_width(
    sq: np.ndarray, design: WidthDesign, config: dict, rng: np.random.Generator, confidence: float = CONFIDENCE
) -> tuple[list[Check], Panel]:
    """``width_order`` (mean-square order in 1/m, expected 1) and ``width_limit`` (plateau 0), intervals at
    ``confidence``."""
    steps = 1.0 / np.asarray(design.widths, dtype=np.float64)
    if not np.all(np.isfinite(sq)):
        nan = float("nan")
        return (
            [
                Check(n, e, nan, (nan, nan), FAIL, config, note="non-finite distances")
                for n, e in (("width_order", design.order), ("width_limit", 0.0))
            ],
            Panel(title=str(config), xlabel="1/m", ylabel="RMS distance", series=[], reference_order=design.order / 2),
        )
    counts = bootstrap_counts(rng, sq.shape[0], design.replicates)
    fit = fit_order(steps, sq, counts, confidence)
    order = design.mean_square_order_check(
        "width_order",
        fit,
        config,
        f"mean-square distance to infinite width ~ C m^(-q) at L = {design.depth}, T = {design.horizon}",
        confidence,
    )
    point, ci, how = limit_plateau(fit, design.order, confidence=confidence)
    widest = float(fit.error[-1] ** 2)
    allowance = design.limit_allowance * widest
    limit = Check(
        name="width_limit",
        expected=0.0,
        estimate=float(point),
        ci=ci,
        verdict=limit_verdict(ci, allowance, widest),
        config=config,
        allowance=allowance,
        note=(
            f"{how} (step 1/m); the infinite-width network is sampled exactly, the allowance "
            f"({design.limit_allowance:g} x the widest level's mean square {widest:.3g}) covers the higher-order "
            "terms the fit ignores; target: a plateau as large as the widest level's mean square"
        ),
        confidence=confidence,
        resolution=detectable_effect(ci, allowance, confidence),
        target=widest,
    )
    series = Series.from_fit("RMS distance to infinite width at T", fit)
    label = ", ".join(f"{k}={v}" for k, v in config.items())
    return [order, limit], Panel(
        title=label, xlabel="1/m", ylabel="RMS distance", series=[series], reference_order=design.order / 2
    )
