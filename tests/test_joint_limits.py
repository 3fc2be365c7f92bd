"""The ``joint-limits`` study: its near misses are wrong claims (none equal to the true one at the state it is judged
at: not a symmetry of the network's law), its exact claim holds, and its quick profile passes (slow)."""

import numpy as np
import pytest

from convergence._models import covariance_limit, upper
from convergence._studies import STUDIES
from convergence._studies.joint_limits import MODELS, near_misses, norm_martingale


@pytest.mark.parametrize("model", list(MODELS))
def test_every_near_miss_differs_from_the_true_claim_where_it_is_judged(model):
    block, state = MODELS[model]
    true = covariance_limit(block)
    v = state[None]
    misses = near_misses()[model]
    assert len(misses) >= 4
    for name, wrong in misses.items():
        drift_gap = np.max(np.abs(upper(wrong.drift(v)) - upper(true.drift(v))))
        diffusion_gap = np.max(np.abs(wrong.diffusion(v) - true.diffusion(v)))
        assert max(drift_gap, diffusion_gap) > 1e-3, (model, name)


def test_the_shaped_mlp_norm_is_a_martingale_of_its_derived_sde():
    check = norm_martingale()
    assert check.verdict == "pass" and check.false_failure_rate == 0.0, check.note


@pytest.mark.slow  # the quick profile: about two minutes on 2 cores
def test_the_quick_profile_passes():
    result = STUDIES["joint-limits"].run("quick", 0)
    assert result.verdict == "pass", [(c.name, c.config, c.verdict) for c in result.checks if c.verdict != "pass"]
    assert result.family_wise_rate <= 0.0101
