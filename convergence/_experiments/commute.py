"""Do the depth limit (L -> infinity) and the token limit (N -> infinity) commute?

Observable: u(N, L) = E[E_beta(mu^{N,L}_T)], the interaction energy of the N tokens after L layers.
All systems share one Brownian path (nested depths), and every N-token value is the mean over the disjoint
N-token systems that partition one pool of initial tokens (``coupled_energies``), so differences between
grid points are measured with little noise.

Each sample is an antithetic pair (the same initial tokens and Brownian path, then the path reversed),
whose average cancels the part of every level that is odd in the noise. Data per sample:
  grid      u(N, L) for N in ``tokens`` and L in ``depths``;
  depth-first inner limit   V_N = lim_L u(N, L): the N-token limit SDE integrated by Ito Euler-Maruyama
            (a different scheme) at steps h_ref and 2 h_ref, Richardson 2 u(h_ref) - u(2 h_ref);
  token-first inner limit   W_L = lim_N u(N, L): the discrete L-layer map with M and M/2 tokens,
            Richardson 2 u(M) - u(M/2).
Estimates (``commute_checks``, each recomputed on every bootstrap replicate of the paths):
  U_depth_first = lim_N V_N   (least squares V_N = U + b/N + c/N^2)
  U_token_first = lim_L W_L   (least squares W_L = U + a h)
  ``iterated_limits``: U_depth_first - U_token_first = 0. The two routes use disjoint data (limit SDE
      at small N against large discrete systems), so their agreement is not an algebraic identity.
      Allowance: the change of each extrapolation when its coarsest point is dropped (remainder terms).
  ``depth_rate`` / ``token_rate``: log-log slope of |mean_N (u(N, L) - u(N, 2L))| against h and of
      |mean_L (u(N, L) - u(2N, L))| against 1/N, over the finest three differences of each ladder (the
      coarsest are pre-asymptotic): weak order 1 in each.
  ``ratio_even`` / ``ratio_odd``: the grid is fitted by the additive model u(N, L) = f(N) + g(L) (any functions of
      1/N and of h: two-way main effects); a limit that depends on the ratio L/N is an interaction and
      leaves residuals that vary with log2(L/N). A linear function of log2(L/N) is itself additive, so
      the statistics are the coefficients of the interaction parts of (log2(L/N))^2 and (log2(L/N))^3 in
      the residuals (an even and an odd ratio effect), fitted together with the smooth cross terms h/N,
      h^2/N and h/N^2 (which vanish along every diagonal as N and L grow); both must vanish.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from verify._common import check_int, check_ladder, check_real

from .._models import LayerMap, normalise
from .._paths import (
    BrownianBlock,
    EulerMaruyama,
    Level,
    PathStreams,
    RateTolerance,
    SignedBlock,
    Subsystems,
    common_noise,
    run_coupled,
    run_seeded,
)
from .._runtime import concatenate_blocks
from .energy import mean_system_energy


@dataclass(frozen=True, kw_only=True)
class CommuteDesign(RateTolerance):
    depths: tuple[int, ...] = (4, 8, 16, 32, 64)
    tokens: tuple[int, ...] = (8, 16, 32, 64, 128)
    large: int = 256
    reference_factor: int = 4
    horizon: float = 1.0
    beta: float = 1.0
    paths: int = 256
    block_paths: int = 256
    order_allowance: float = 0.2
    # a rate may miss an order error up to this, the allowance included: rate 1/2 (the 1/sqrt(N) of a CLT, the
    # strong rate in h) is rejected with probability above 90% for claimed rate 1
    order_target: float = 0.45
    resolution: float = 0.05  # iterated_limits and the ratio checks must resolve 5% of the grid's spread

    def __post_init__(self) -> None:
        check_ladder("depths", self.depths, doubling=True)
        check_ladder("tokens", self.tokens, doubling=True)
        check_int("large", self.large, minimum=2 * self.tokens[-1])
        if self.large % 2:
            raise ValueError(f"large must be even, got {self.large}")
        check_int("reference_factor", self.reference_factor, minimum=2)
        check_real("horizon", self.horizon, minimum=0.0, strict_minimum=True)
        check_int("paths", self.paths, minimum=2)
        check_real("resolution", self.resolution, minimum=0.0, strict_minimum=True)

    @property
    def pool(self) -> int:
        """Initial tokens shared out among the grid's systems (N-token systems, pool / N of them)."""
        return self.tokens[-1]

    @property
    def fine_steps(self) -> int:
        return self.depths[-1] * self.reference_factor

    @property
    def steps(self) -> np.ndarray:
        return self.horizon / np.asarray(self.depths, dtype=np.float64)


def coupled_energies(
    model_for: Callable[[int], LayerMap],
    design: CommuteDesign,
    seed: int,
    key: Sequence[int],
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Per-path energies at T: columns = grid (N-major), large M and M/2 per L, EM at h_ref and 2 h_ref per N.

    Every N-token entry is the mean energy of the ``pool / N`` disjoint N-token systems that partition one pool
    of initial tokens (``design.pool`` for the grid and the limit SDE, ``design.large`` for M and M/2), all
    driven by the same noise: consecutive token counts are then a system and its two halves, whose initial
    sampling errors cancel at first order in the difference.
    """
    fine = design.fine_steps
    levels: list[Level] = []
    sizes: list[tuple[int, int]] = []  # (pool, tokens per system) of each level

    def add(stepper, name: str, factor: int, pool: int, size: int) -> None:
        levels.append(Level(name, Subsystems(stepper, pool // size), factor))
        sizes.append((pool, size))

    for n in design.tokens:
        model = model_for(n)
        for depth in design.depths:
            add(model, f"N={n},L={depth}", fine // depth, design.pool, n)
    for size in (design.large, design.large // 2):
        model = model_for(size)
        for depth in design.depths:
            add(model, f"N={size},L={depth}", fine // depth, design.large, size)
    for n in design.tokens:
        reference = EulerMaruyama(model_for(n).limit_sde())
        add(reference, f"EM N={n}", 1, design.pool, n)
        add(reference, f"EM N={n} 2h", 2, design.pool, n)
    noise, dim = common_noise(levels), model_for(1).dim

    def compute(block_streams: PathStreams, advance) -> np.ndarray:
        pair = []
        for sign in (1.0, -1.0):  # antithetic: the same path with the noise reversed (the noise law is symmetric)
            streams = block_streams.fresh()
            x = streams.initial(lambda rng, k: rng.standard_normal((k, design.large, dim)))
            x /= np.linalg.norm(x, axis=-1, keepdims=True)
            block = SignedBlock(BrownianBlock(noise, streams, design.horizon / fine), sign)
            final = run_coupled(levels, [], [x[:, :pool] for pool, _ in sizes], block, fine, advance).final
            # Euler-Maruyama states leave the sphere by O(sqrt(h)): the energy is taken of the projected tokens
            pair.append(
                np.stack(
                    [mean_system_energy(normalise(state), size, design.beta) for state, (_, size) in zip(final, sizes)],
                    axis=1,
                )
            )
        return 0.5 * (pair[0] + pair[1])

    return concatenate_blocks(
        run_seeded(
            compute,
            name="coupled_energies",
            configuration=(design, [level.name for level in levels], model_for(1)),
            seed=seed,
            key=key,
            paths=design.paths,
            block_paths=design.block_paths,
            progress=progress,
        )
    )
