"""The synchronisation-by-noise experiment's design (Agazzi et al., arXiv:2604.26898): its configurations (activation,
d, bias, attention) for the exponents and the energy bound, the random quadratic form's and the figure's settings,
the family of its checks with their level, and the sizes a study gives it (``SyncDesign``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from .._paths import RecordGrid
from .._statistics import FAMILY_ALPHA
from .energy import ENERGY_TARGET, EnergyDesign
from .exponents import ExponentDesign
from .overlap_ends import MERGE_TARGET

SYNC_BETA = 1.0


EXPONENT_CONFIGS = tuple((act, d, bias) for act in ("relu", "sigmoid") for d in (5, 16) for bias in (0.0, 0.1))


ENERGY_CONFIGS = (
    ("sigmoid", 5, 0.0, "attractive"),
    ("sigmoid", 5, 0.0, "repulsive"),
    ("relu", 5, 0.0, "attractive"),
    ("relu", 5, 0.0, "repulsive"),
    ("tanh", 5, 0.0, "attractive"),
)


QF_DIM, QF_RHO0S, QF_DELTA = 3, (-0.5, 0.3), 0.01


FIGURE_DIM, FIGURE_TOKENS, FIGURE_HORIZON = 4, 64, 20.0


ALIGNED = 0.9  # |cos| above this counts as aligned in the figure's checks


ANTIPODAL_SHARE = 0.1  # two opposite groups of k and n - k tokens hold k (n - k) / (n (n - 1) / 2) of the pairs


# one family: exponents (2 per config), energy bounds, quadratic form (2 exponents, 2 per rho0), figure (2)
SYNC_CHECKS = 2 * len(EXPONENT_CONFIGS) + len(ENERGY_CONFIGS) + 2 + 2 * len(QF_RHO0S) + 2


CHECK_ALPHA = FAMILY_ALPHA / SYNC_CHECKS


CONFIDENCE_LEVEL = 1.0 - CHECK_ALPHA


GridT = TypeVar("GridT", bound=RecordGrid)


@dataclass(frozen=True)
class SyncDesign:
    exponents: ExponentDesign
    energy: EnergyDesign
    energy_tokens: int
    qf_exponents: ExponentDesign
    qf_paths: int
    qf_depths: tuple[int, int]  # invariant at T = 1, depths L and 2L
    qf_merge_horizon: float
    qf_merge_depth: int
    figure_width: int
    figure_depth: int
    figure_paths: int
    invariant_target: float = 0.1  # qf_invariant may miss a relative error of E S(rho_T) up to this
    energy_target: float = ENERGY_TARGET  # energy_bound may miss the bound exceeded by this fraction of it
    merge_target: float = MERGE_TARGET  # qf_merge_probability may miss a probability error up to this
    exponent_paths: tuple[tuple[str, int, int], ...] = ()  # (activation, d, paths) where not the exponents' own
    energy_paths: tuple[tuple[str, str, int], ...] = ()  # (activation, attention, paths) where not the energy's own

    def exponent_design(self, act: str, dim: int) -> ExponentDesign:
        """The exponents' design of one configuration: its own number of paths where ``exponent_paths`` names it."""
        return _own_paths(self.exponents, self.exponent_paths, (act, dim))

    def energy_design(self, act: str, attention: str) -> EnergyDesign:
        """The energy experiment's design of one configuration: its own paths where ``energy_paths`` names it."""
        return _own_paths(self.energy, self.energy_paths, (act, attention))


def _own_paths(design: GridT, overrides: tuple[tuple, ...], config: tuple) -> GridT:
    """``design`` with the paths that ``overrides`` ((*config, paths) entries) gives ``config``, else its own."""
    paths = {tuple(entry[:-1]): entry[-1] for entry in overrides}.get(config, design.paths)
    return replace(design, paths=paths)
