"""Sample-size planning: a pilot run's measured variance predicts the paths a check needs for a given effect.

``Outcome.paths_needed(effect)`` solves ``detectable_effect = allowance + (z_alpha + z_power) se(paths)`` with
se ~ paths^-1/2. Checked against a second run at the planned size (other random numbers: the estimate of the
standard error from 4096 samples is good to 1.4%: the relative spread of the resolution over 10 seeds at this state,
0.7% at 16384), and on the formula's edge cases. The runs use the claim's control variate, whose noise dominates the
resolution (the layer's own, with its second-order control, leaves mostly the bias allowance at this state).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import convergence as cv
from convergence._statistics import ADVICE_MARGIN, detectable_effect, paths_for_effect

MODEL = cv.FedorovModel(2, 4)
LAYER = cv.layer_map(MODEL.layer, 2, 4, MODEL.noise, name="model F")
CLAIM = cv.limit_sde(MODEL.limit_sde().drift, MODEL.limit_sde().diffusion, 2, 4, MODEL.noise, name="its limit")
STATE = {"pair": np.array([[1.0, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0]])}  # fixed: only the samples vary by seed


def test_a_pilot_predicts_the_samples_that_reach_an_effect():
    pilot = cv.check_local_consistency(LAYER, CLAIM, states=STATE, samples=4096, seed=1, control="claim")
    label = "drift_scale [state=pair]"
    (check,) = [c for c in pilot.checks if c.name == "drift_scale" and c.config["state"] == "pair"]
    effect = check.resolution / 2  # half the pilot's resolution: about 4 times the samples
    planned = pilot.paths_needed(effect)[label]
    assert 3.5 * 4096 < planned < 4.5 * 4096
    assert pilot.paths_needed(check.resolution)[label] == pytest.approx(4096, rel=0.01)
    confirm = cv.check_local_consistency(LAYER, CLAIM, states=STATE, samples=planned, seed=2, control="claim")
    (reached,) = [c for c in confirm.checks if c.name == "drift_scale" and c.config["state"] == "pair"]
    # 6% is 4 standard deviations of the two runs' combined relative error (1.6%): false failure about 1e-4
    assert reached.resolution == pytest.approx(effect, rel=0.06)
    assert reached.verdict != "fail"
    # the inconclusive note's count (target 0.02 for one state) is the planner's at that effect, with its margin
    if reached.verdict == "inconclusive":
        wanted = math.ceil(ADVICE_MARGIN * confirm.paths_needed(0.02)[label])
        assert f"about {wanted} samples would decide" in reached.note


def test_paths_for_effect_inverts_detectable_effect_and_refuses_what_paths_cannot_buy():
    ci, allowance, confidence, paths = (0.9, 1.1), 0.02, 0.99, 1000
    resolution = detectable_effect(ci, allowance, confidence)
    assert paths_for_effect(ci, allowance, confidence, paths, resolution) == pytest.approx(paths, abs=1)
    target = allowance + (resolution - allowance) / 3  # the random part a third: nine times the paths
    assert paths_for_effect(ci, allowance, confidence, paths, target) == pytest.approx(9 * paths, rel=1e-6, abs=1)
    assert paths_for_effect(ci, allowance, confidence, paths, allowance) is None  # within the bias allowance
    assert paths_for_effect((math.nan, math.nan), 0.0, confidence, paths, 0.1) is None
    with pytest.raises(ValueError, match="effect"):
        cv.Outcome("x", []).paths_needed(0.0)
