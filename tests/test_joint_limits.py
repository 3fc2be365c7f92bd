"""The ``joint-limits`` study: its near misses are wrong claims (none equal to the true one at the state it is judged
at: not a symmetry of the network's law), the power study's rule for claiming one, its exact claim holds, and its quick
profile passes (slow)."""

import numpy as np
import pytest

from convergence._experiments import check_effects
from convergence._models import covariance_limit, covariance_sde, upper
from convergence._statistics import Check
from convergence._studies import STUDIES
from convergence._studies.joint_limits import MODELS, near_misses, norm_martingale
from convergence._studies.power import unseen


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


@pytest.mark.parametrize("model", ["shaped MLP", "shaped attention"])  # the ResNet's limit has no noise
def test_a_near_miss_moves_the_checks_by_its_relative_error_on_the_claim(model):
    """``check_effects``, which decides whether the power study claims a near miss: a claim with its diffusion x f is
    off by (1 - f) / f relative to itself in diffusion_scale, and by nothing in the drift's checks."""
    block, state = MODELS[model]
    true = covariance_limit(block)
    wider = covariance_sde(true.drift, lambda v: 1.1 * true.diffusion(v), 2, "Sigma x 1.1")
    effects = check_effects(true, wider, state)
    assert effects["diffusion_scale"] == pytest.approx(-0.1 / 1.1, rel=1e-12)
    assert effects.get("drift_scale", 0.0) == 0.0 and effects["drift"] == 0.0
    assert check_effects(true, true, state) == {k: 0.0 for k in effects}


def test_a_near_miss_is_a_claim_only_when_it_moves_a_check_by_the_margin_times_that_checks_resolution():
    """power's width rows: an effect 1.25 x the near miss's own resolution makes it a claim; just below, a finding
    that names the ratios; a check without a resolution does not count."""
    inner = [
        Check("diffusion_scale", 0.0, 0.0, (0.0, 0.0), "fail", resolution=0.04),
        Check("drift", 0.0, 0.0, (0.0, 0.0), "pass", resolution=None),
    ]
    assert unseen({"diffusion_scale": -0.05, "drift": 9.0}, inner) == ""
    finding = unseen({"diffusion_scale": -0.0499, "drift": 9.0}, inner)
    assert "a finding" in finding and "diffusion_scale by -0.0499 (1.2 x)" in finding and "drift" not in finding


def test_the_shaped_mlp_norm_is_a_martingale_of_its_derived_sde():
    check = norm_martingale()
    assert check.verdict == "pass" and check.false_failure_rate == 0.0, check.note


@pytest.mark.slow  # the quick profile: about two minutes on 2 cores
def test_the_quick_profile_passes():
    result = STUDIES["joint-limits"].run("quick", 0)
    assert result.verdict == "pass", [(c.name, c.config, c.verdict) for c in result.checks if c.verdict != "pass"]
    assert result.family_wise_rate <= 0.0101
