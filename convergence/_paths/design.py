"""A ladder of depths on a horizon, with the Monte Carlo sizes shared by strong and weak experiments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verify._common import check_int, check_real

from .._statistics import (
    CONFIDENCE,
    Check,
    OrderFit,
    detectable_effect,
    order_verdict,
)


@dataclass(frozen=True)
class DepthLadder:
    """Depths (increasing, each dividing the next) on horizon T; paths in compute blocks; bootstrap size."""

    depths: tuple[int, ...]
    horizon: float = 1.0
    paths: int = 256
    block_paths: int = 128
    replicates: int = 2000

    def __post_init__(self) -> None:
        if len(self.depths) < 2:
            raise ValueError(f"depths must hold at least 2 levels, got {self.depths}")
        for depth in self.depths:
            check_int("depth", depth, minimum=1)
        for coarse, fine in zip(self.depths, self.depths[1:]):
            if fine <= coarse or fine % coarse:
                raise ValueError(f"depths must increase and each divide the next, got {self.depths}")
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("paths", self.paths, minimum=2)
        check_int("block_paths", self.block_paths, minimum=1)
        check_int("replicates", self.replicates, minimum=100)

    def steps(self) -> np.ndarray:
        """The step h = T / L of each depth."""
        return self.horizon / np.asarray(self.depths, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class RateTolerance:
    """What an order check allows: expected (mean-square) order, bias allowance around it, the largest order error
    it may miss (``order_target``: the allowance plus the statistical part of the resolution of a 99% interval 0.5
    wide, (z + z_0.9) / (2 z) ~ 0.75 of its width), and the number of bootstrap replicates."""

    order: float = 1.0
    order_allowance: float = 0.15
    order_target: float = 0.525
    replicates: int = 1000

    def mean_square_order_check(
        self, name: str, fit: OrderFit, config: dict, note: str, confidence: float = CONFIDENCE
    ) -> Check:
        """Judge the mean-square order 2p of an RMS fit ``error ~ C step^p`` (intervals at ``confidence``)
        against ``order``."""
        ci = (2 * fit.order_ci[0], 2 * fit.order_ci[1])
        resolution = detectable_effect(ci, self.order_allowance, confidence)
        verdict = order_verdict(ci, self.order, self.order_allowance, resolution, self.order_target, fit.steps.size)
        return Check(
            name=name,
            expected=self.order,
            estimate=2 * fit.order,
            ci=ci,
            verdict=verdict,
            config=config,
            allowance=self.order_allowance,
            note=note,
            confidence=confidence,
            resolution=resolution,
            target=self.order_target,
        )


@dataclass(frozen=True, kw_only=True)
class RecordGrid:
    """A forward run at steps h = T / steps and 2h on one Brownian path, observed at ``records + 1``
    equally spaced times; paths in compute blocks of ``block_paths``."""

    horizon: float
    steps: int
    records: int = 20
    paths: int = 1024
    block_paths: int = 1024

    def __post_init__(self) -> None:
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("steps", self.steps, minimum=2)
        check_int("records", self.records, minimum=1)
        if self.steps % (2 * self.records):
            raise ValueError(f"steps must be a multiple of 2 x records = {2 * self.records}, got {self.steps}")
        check_int("paths", self.paths, minimum=2)

    @property
    def times(self) -> np.ndarray:
        return np.linspace(0.0, self.horizon, self.records + 1)
