"""The commute experiment's estimates and checks from the grid of coupled energies u(N, L): the iterated limits
lim_N lim_L and lim_L lim_N extrapolated from the grid (Richardson in h, a polynomial in 1/N), the rates of its
consecutive differences along each axis, and the interaction of (log2(L/N))^2 and ^3 in the residuals of
u = f(N) + g(L); intervals from a bootstrap over paths (``analyse_commute``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._output import Heatmap, Panel, Series
from .._statistics import (
    CONFIDENCE,
    Check,
    bootstrap_interval,
    bootstrap_means_drawn,
    detectable_effect,
    effect_check,
    least_squares_line,
    least_squares_slope,
    order_verdict,
    percentile_interval,
)
from .commute import CommuteDesign

TOKEN_DEGREE = 2  # N -> infinity: V_N = U + b/N + c/N^2 (small N are far from the 1/N regime)


SMOOTH_CROSS_TERMS = ((1, 1), (2, 1), (1, 2))  # h/N, h^2/N, h/N^2: interactions that vanish as N, L grow


RATE_DIFFERENCES = 3  # rates use the finest three consecutive differences of each ladder


def _interval(point, replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    lo, hi = bootstrap_interval(np.asarray(point), replicates, confidence)
    return float(lo), float(hi)


def _intercept(x: np.ndarray, y: np.ndarray, degree: int = 1) -> np.ndarray:
    """Least-squares value at x = 0 of a polynomial of ``degree`` in x fitted to y over the last axis."""
    basis = np.vander(np.asarray(x, dtype=np.float64), degree + 1, increasing=True)
    return y @ np.linalg.pinv(basis).T[:, 0]


def _double_centre(table: np.ndarray) -> np.ndarray:
    """Remove row and column means: the part of a (tokens, depths) table that is not additive."""
    return table - table.mean(axis=1, keepdims=True) - table.mean(axis=0, keepdims=True) + table.mean()


def ratio_fit(grid: np.ndarray, tokens: Sequence[int], depths: Sequence[int], horizon: float):
    """Residuals of the additive model u(N, L) = f(N) + g(L) and the coefficients of their ratio parts.

    The residual (two-way main effects removed) is the interaction. It is regressed on double-centred
    terms: the interaction parts of k^2 and k^3, k = log2(L/N) (an even and an odd ratio effect; a linear
    function of k is additive and needs no test), together with the smooth cross terms h^a / N^b of
    ``SMOOTH_CROSS_TERMS``, which vanish along every diagonal as N and L grow. Returns (residual, the two
    ratio coefficients, their regressors).
    """
    residual = (
        grid
        - grid.mean(axis=-1, keepdims=True)
        - grid.mean(axis=-2, keepdims=True)
        + grid.mean(axis=(-1, -2), keepdims=True)
    )
    depths_row = np.asarray(depths, dtype=np.float64)[None, :]
    tokens_column = np.asarray(tokens, dtype=np.float64)[:, None]
    ratio = np.log2(depths_row / tokens_column)
    smooth = [(horizon / depths_row) ** a / tokens_column**b for a, b in SMOOTH_CROSS_TERMS]
    regressors = np.stack([_double_centre(term) for term in (ratio**2, ratio**3, *smooth)])
    regressors = regressors.reshape(len(regressors), -1)
    coefficients = residual.reshape(*residual.shape[:-2], -1) @ np.linalg.pinv(regressors)
    return residual, coefficients[..., :2], regressors[:2]


def commute_estimates(means: np.ndarray, design: CommuteDesign) -> dict[str, np.ndarray]:
    """Every derived quantity from level means (..., levels), vectorised over leading (replicate) axes."""
    nn, nl = len(design.tokens), len(design.depths)
    grid = means[..., : nn * nl].reshape(*means.shape[:-1], nn, nl)
    large = means[..., nn * nl : nn * nl + nl]
    half = means[..., nn * nl + nl : nn * nl + 2 * nl]
    em = means[..., nn * nl + 2 * nl :].reshape(*means.shape[:-1], nn, 2)
    inv_n = 1.0 / np.asarray(design.tokens, dtype=np.float64)
    h = design.steps
    depth_first = 2 * em[..., 0] - em[..., 1]  # V_N
    token_first = 2 * large - half  # W_L
    u_depth = _intercept(inv_n, depth_first, TOKEN_DEGREE)
    u_token = _intercept(h, token_first)
    u_depth_drop = _intercept(inv_n[1:], depth_first[..., 1:], TOKEN_DEGREE)
    u_token_drop = _intercept(h[1:], token_first[..., 1:])
    residual, coefficients, regressors = ratio_fit(grid, design.tokens, design.depths, design.horizon)
    tiny = np.finfo(float).tiny
    depth_diff = grid[..., :, :-1] - grid[..., :, 1:]
    token_diff = grid[..., :-1, :] - grid[..., 1:, :]
    # rates from the differences averaged over the other axis (the bias has one sign along it; averaging
    # keeps the logarithm away from the noise floor that single rows reach at large N or L)
    k = RATE_DIFFERENCES
    depth_rate = least_squares_slope(np.log(h[:-1][-k:]), np.log(np.abs(depth_diff.mean(axis=-2)[..., -k:]) + tiny))
    token_rate = least_squares_slope(np.log(inv_n[:-1][-k:]), np.log(np.abs(token_diff.mean(axis=-1)[..., -k:]) + tiny))
    depth_diff, token_diff = np.abs(depth_diff), np.abs(token_diff)
    return {
        "grid": grid,
        "depth_first": depth_first,
        "token_first": token_first,
        "u_depth_first": u_depth,
        "u_token_first": u_token,
        "difference": u_depth - u_token,
        "allowance": np.abs(u_depth - u_depth_drop) + np.abs(u_token - u_token_drop),
        "residual": residual,
        "ratio_even": coefficients[..., 0],
        "ratio_odd": coefficients[..., 1],
        "ratio_regressors": regressors,
        "depth_rate": depth_rate,
        "token_rate": token_rate,
        "depth_diff": depth_diff,
        "token_diff": token_diff,
    }


def analyse_commute(
    energies: np.ndarray, design: CommuteDesign, config: dict, rng: np.random.Generator, confidence: float = CONFIDENCE
):
    """Checks ``iterated_limits``, ``depth_rate``, ``token_rate``, ``ratio_even``, ``ratio_odd`` (intervals at
    ``confidence``, each with its resolution); heatmaps, panels.

    ``iterated_limits`` and the ratio checks are ``inconclusive`` when their resolution exceeds
    ``design.resolution`` of the grid's spread (for the ratio coefficients: of the residual change they cause)."""
    point = commute_estimates(energies.mean(axis=0), design)
    boot = commute_estimates(bootstrap_means_drawn(energies, rng, design.replicates), design)
    label = ", ".join(f"{k}={v}" for k, v in config.items())
    checks = _rate_checks(point, boot, design, config, confidence)
    checks.append(_iterated_limits_check(point, boot, design, config, confidence))
    checks += _ratio_checks(point, boot, design, config, confidence)
    return checks, _difference_panels(point, boot, design, label), _grid_heatmaps(point, design, label)


def _rate_checks(point: dict, boot: dict, design: CommuteDesign, config: dict, confidence: float) -> list[Check]:
    """``depth_rate`` and ``token_rate``: the slopes of the grid's consecutive differences along each axis."""
    checks = []
    for name, note in (
        ("depth_rate", "slope of |mean over N of u(N,L) - u(N,2L)| against h, finest 3 differences"),
        ("token_rate", "slope of |mean over L of u(N,L) - u(2N,L)| against 1/N, finest 3 differences"),
    ):
        ci = _interval(point[name], boot[name], confidence)
        resolution = detectable_effect(ci, design.order_allowance, confidence)
        checks.append(
            Check(
                name,
                design.order,
                float(point[name]),
                ci,
                order_verdict(ci, design.order, design.order_allowance, resolution, design.order_target, 3),
                config,
                design.order_allowance,
                confidence,
                note=note,
                resolution=resolution,
                target=design.order_target,
            )
        )
    return checks


def _iterated_limits_check(point: dict, boot: dict, design: CommuteDesign, config: dict, confidence: float) -> Check:
    """``iterated_limits``: lim_N lim_L against lim_L lim_N, both extrapolated from the grid."""
    ci = _interval(point["difference"], boot["difference"], confidence)
    spread = float(np.ptp(point["grid"]))
    return effect_check(
        "iterated_limits",
        0.0,
        float(point["difference"]),
        ci,
        float(point["allowance"]),
        design.resolution * spread,
        config,
        confidence=confidence,
        scale=spread,
        note=(
            f"lim_N lim_L = {float(point['u_depth_first']):.6g} (limit SDE by Euler-Maruyama, then "
            f"N -> inf) against lim_L lim_N = {float(point['u_token_first']):.6g} (M = "
            f"{design.large} tokens, then L -> inf); allowance = sensitivity of both extrapolations "
            f"to their coarsest point; inconclusive when the resolution exceeds {design.resolution:g} x the "
            f"grid's spread {spread:.3g}"
        ),
    )


def _ratio_checks(point: dict, boot: dict, design: CommuteDesign, config: dict, confidence: float) -> list[Check]:
    """``ratio_even`` and ``ratio_odd``: the interaction coefficients of (log2(L/N))^2 and ^3 in the residuals."""
    spread = float(np.ptp(point["grid"]))
    checks = []
    for name, row in (("ratio_even", 0), ("ratio_odd", 1)):
        ci = _interval(point[name], boot[name], confidence)
        reach = float(np.ptp(point["ratio_regressors"][row]))  # residual change per unit coefficient
        power = 2 if name == "ratio_even" else 3
        checks.append(
            effect_check(
                name,
                0.0,
                float(point[name]),
                ci,
                0.0,
                design.resolution * spread / reach,
                config,
                confidence=confidence,
                scale=spread / reach,
                note=(
                    f"coefficient of the interaction part of (log2(L/N))^{power} in the residuals of u = f(N) + g(L), "
                    "fitted with the cross terms h/N, h^2/N, h/N^2 and the other power; largest |residual| "
                    f"{float(np.max(np.abs(point['residual']))):.3g}; inconclusive when the resolution is a ratio "
                    f"effect larger than {design.resolution:g} x the grid's spread (relative resolution: in units of "
                    "the spread)"
                ),
            )
        )
    return checks


def _grid_heatmaps(point: dict, design: CommuteDesign, label: str) -> list[Heatmap]:
    """The grid u(N, L) about the mean of the two iterated limits, and the residuals of u = f(N) + g(L)."""
    limit = 0.5 * (float(point["u_depth_first"]) + float(point["u_token_first"]))
    tokens, depths = list(design.tokens), list(design.depths)
    return [
        Heatmap(f"u(N, L) - U, U = {limit:.5g} ({label})", "N", "L", tokens, depths, (point["grid"] - limit).tolist()),
        Heatmap(f"residuals of u = f(N) + g(L) ({label})", "N", "L", tokens, depths, point["residual"].tolist()),
    ]


def _difference_panels(point: dict, boot: dict, design: CommuteDesign, label: str) -> list[Panel]:
    """The consecutive differences along depth (one series per N) and along tokens (one per L)."""
    panels = []
    for name, axis_values, rows, xlabel in (
        ("depth_diff", design.steps[:-1], design.tokens, "step h"),
        ("token_diff", 1.0 / np.asarray(design.tokens[:-1], float), design.depths, "1/N"),
    ):
        diffs = point[name] if name == "depth_diff" else point[name].T
        boot_diffs = boot[name] if name == "depth_diff" else np.swapaxes(boot[name], -1, -2)
        series = []
        for r, row in enumerate(rows):
            lo, hi = percentile_interval(boot_diffs[:, r])
            intercept, slope = least_squares_line(np.log(axis_values), np.log(diffs[r]))
            series.append(
                Series(
                    f"{'N' if name == 'depth_diff' else 'L'} = {row}",
                    axis_values.tolist(),
                    diffs[r].tolist(),
                    lo.tolist(),
                    hi.tolist(),
                    float(slope),
                    float(intercept),
                    [[] for _ in axis_values],
                )
            )
        panels.append(
            Panel(
                f"{'depth' if name == 'depth_diff' else 'token'} convergence ({label})",
                xlabel,
                "|consecutive difference|",
                series,
                design.order,
            )
        )
    return panels
