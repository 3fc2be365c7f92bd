"""The registry of studies: each module defines one study, its configurations and its quick and full profiles, and
calls the experiments (``base``: what a study is and its progress bars; ``over_seeds``: what the studies over seeds
share). A study never imports another: designs that several studies run live in ``convergence._experiments``.
Studies: ``strong_fedorov``, ``weak_fedorov``, ``phase_transition``, ``strong_agazzi``, ``sync_agazzi``,
``grid_agazzi``, ``chaos``, ``commute``, ``ldm_stopping``, ``joint_limits``, ``power``; and, run by name only (not
part of ``report``), ``calibration`` (the public checks' decision rates over seeds, on the cases of
``calibration_cases``) and ``quick_profiles`` (every study's quick profile over seeds) and ``mutant_seeds`` (the power
study's near misses over seeds)."""

from __future__ import annotations

from .base import PROFILES, Study, progress_bars
from .calibration import STUDY as CALIBRATION
from .chaos import STUDY as CHAOS
from .commute import STUDY as COMMUTE
from .grid_agazzi import STUDY as GRID_AGAZZI
from .joint_limits import STUDY as JOINT_LIMITS
from .ldm_stopping import STUDY as LDM_STOPPING
from .mutant_seeds import mutant_seeds_study
from .phase_transition import STUDY as PHASE_TRANSITION
from .power import STUDY as POWER
from .quick_profiles import quick_profiles_study
from .strong_agazzi import STUDY as STRONG_AGAZZI
from .strong_fedorov import STUDY as STRONG_FEDOROV
from .sync_agazzi import STUDY as SYNC_AGAZZI
from .weak_fedorov import STUDY as WEAK_FEDOROV

_REPORTED = (
    STRONG_FEDOROV,
    WEAK_FEDOROV,
    PHASE_TRANSITION,
    STRONG_AGAZZI,
    SYNC_AGAZZI,
    GRID_AGAZZI,
    CHAOS,
    COMMUTE,
    LDM_STOPPING,
    JOINT_LIMITS,
    POWER,
)
STUDIES: dict[str, Study] = {
    study.name: study for study in (*_REPORTED, CALIBRATION, quick_profiles_study(_REPORTED), mutant_seeds_study(POWER))
}

# the headline checks of each study, for the index (``convergence._output.write_index``)
HEADLINES = {name: study.headlines for name, study in STUDIES.items()}

__all__ = [
    "HEADLINES",
    "PROFILES",
    "STUDIES",
    "Study",
    "progress_bars",
]
