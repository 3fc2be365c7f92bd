"""Model A's collapse rates: the ordering and rate checks decide as stated on synthetic rates, the attention's share
of the predicted rate (-2 v) is exact algebra, ReLU without bias sits at lambda_1 = -1/(2d), and the grid's claims
are judged against wrong exponents that they reject."""

import json
from pathlib import Path

import numpy as np
import pytest

import verify
from convergence._cli import main
from convergence._experiments import (
    MIN_WINDOW,
    CollapseRate,
    Comparison,
    collapse_rate,
    grid_claims,
    grid_configs,
    ordering_check,
    rate_check,
    sign_decision,
)
from convergence._models import attention_half_step

LEVEL = 0.99
REPORTS = Path(__file__).resolve().parents[1] / "reports"


def _rate(rate: float, se: float, transient: float = 0.0) -> CollapseRate:
    flat, band = np.zeros(3), np.zeros((2, 3))
    return CollapseRate(rate, se, 64, (0, 3), True, transient, flat, band, flat, band)


def test_an_ordering_passes_when_every_difference_has_its_predicted_sign_and_fails_on_a_contradiction():
    agree = [Comparison("a", "b", -1.0, 0.1, -0.8, 60.0), Comparison("c", "d", 0.9, 0.1, 1.2, 60.0)]
    assert ordering_check("o", agree, LEVEL, {}, "").verdict == "pass"
    contradicted = [*agree, Comparison("e", "f", 1.0, 0.1, -0.9, 60.0)]
    check = ordering_check("o", contradicted, LEVEL, {}, "")
    assert check.verdict == "fail" and "contradicted: e vs f" in check.note
    straddling = [*agree, Comparison("e", "f", -0.2, 0.1, -0.9, 60.0)]
    assert ordering_check("o", straddling, LEVEL, {}, "").verdict == "inconclusive"


def test_an_ordering_leaves_out_what_its_sample_cannot_resolve_and_is_undecided_with_nothing_left():
    """A predicted difference of 0.5 with a standard error of 0.3 is below its resolution (~0.3 x 4.2): left out,
    whatever its measured sign; with nothing left the check is inconclusive, never a pass."""
    noisy = Comparison("a", "b", 5.0, 0.3, -0.5, 60.0)
    check = ordering_check("o", [noisy, Comparison("c", "d", -1.0, 0.1, -0.9, 60.0)], LEVEL, {}, "")
    assert check.verdict == "pass" and "1 of 2 comparisons left out" in check.note
    assert ordering_check("o", [noisy], LEVEL, {}, "").verdict == "inconclusive"


@pytest.mark.parametrize(
    ("measured", "transient", "verdict"),
    [(-2.0, 0.0, "pass"), (-2.5, 0.0, "fail"), (-2.1, 0.15, "pass"), (-2.0, 0.5, "inconclusive")],
)
def test_a_rate_is_judged_against_the_layers_rate_with_its_drift_as_allowance(measured, transient, verdict):
    """Predicted -2.0, target 25% (0.5): a rate 25% off fails; a drift of 0.5 (the target) leaves it open."""
    assert rate_check(_rate(measured, 0.02, transient), -2.0, LEVEL, {}, "").verdict == verdict


def test_the_attention_contracts_a_tight_cluster_at_rate_v_exactly_to_first_order():
    """Exact algebra behind 2 (lambda_1 - v): N(x_i + h v a_i) moves each token of a cluster of radius r towards the
    mean at rate v (softmax weights uniform to O(beta r^2)), so squared distances shrink by 1 - 2 h v + O(h^2) per
    layer (exactly 1 / (1 + h v)^2 here: the normalisation divides by |x + h v a| = 1 + h v + O(r^2))."""
    rng = np.random.default_rng(0)
    centre = np.eye(8)[0]
    x = centre + 1e-5 * rng.standard_normal((1, 16, 8))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    for v in (1.0, -1.0):
        h = 1e-3
        y = attention_half_step(x, h, beta=1.0, v=v)
        spread = np.sum((x - x.mean(axis=1, keepdims=True)) ** 2)
        after = np.sum((y - y.mean(axis=1, keepdims=True)) ** 2)
        assert after / spread == pytest.approx(1 - 2 * h * v, abs=4 * h**2)
        assert after / spread == pytest.approx(1 / (1 + h * v) ** 2, rel=1e-8)


@pytest.mark.parametrize("dim", [5, 64, 128])
def test_relu_without_bias_sits_at_minus_one_over_two_d(dim):
    """The paper's "near the edge": k(1) = k'(1) = 1/(2d) for ReLU without biases, so lambda_1 = -1/(2d) exactly."""
    assert verify.activation_constants("relu", dim, 0.0, 0.0)["lambda_1"] == pytest.approx(-1 / (2 * dim), rel=1e-12)


def test_each_wrong_exponent_reverses_or_breaks_a_prediction_the_true_one_makes():
    """The claims' wrong predictions are not the true ones in disguise: the Ito term's sign flipped predicts that
    biases slow collapse and sigmoid is the slowest; k'(1) without its 1/d makes ReLU's lambda_1 positive at d = 64."""
    flip = grid_configs.WRONG_PREDICTIONS["the Ito term's sign flipped"]
    without = grid_configs.WRONG_PREDICTIONS["k'(1) without its 1/d"]
    biased, plain = grid_configs.Config("relu", 64, 0.1, 0.0), grid_configs.Config("relu", 64, 0.0, 0.0)
    assert grid_configs.lambda_true(biased) < grid_configs.lambda_true(plain) and flip(biased) > flip(plain)
    sig, relu = grid_configs.Config("sigmoid", 64, 0.0, 0.0), grid_configs.Config("relu", 64, 0.0, 0.0)
    assert grid_configs.lambda_true(sig) < grid_configs.lambda_true(relu) and flip(sig) > flip(relu)
    assert grid_configs.lambda_true(relu) < 0 < without(relu)


def test_a_run_tight_for_fewer_than_min_window_records_is_not_clustered():
    """A cluster that forms only in the last records (noise clustering late) is not judged by an exponent, and a
    run tight from the start is; the window ends at the last record above the rounding floor."""
    times = np.linspace(0.0, 5.0, 51)
    energy = np.exp(-2.0 * times)[None, :].repeat(8, axis=0)
    for tight_records, clustered, window in ((MIN_WINDOW - 1, False, (25, 51)), (MIN_WINDOW, True, (43, 51))):
        cosine = np.where(np.arange(51) >= 51 - tight_records, 0.995, 0.5)[None, :].repeat(8, axis=0)
        rate = collapse_rate(np.stack([cosine, energy], axis=-1), times, np.random.default_rng(0), 10, LEVEL)
        assert (rate.clustered, rate.window) == (clustered, window)
        assert rate.rate == pytest.approx(-2.0)


def _repulsion_verdict(name: str, cluster_rates: dict, predict=grid_configs.predicted_rate, se: float = 0.02) -> str:
    """ReLU and sigmoid at d = 64 without bias, v = -1, with the given rates from one tight cluster (standard error
    ``se``, 64 paths)."""
    configs = [grid_configs.Config(act, 64, 0.0, -1.0) for act in ("relu", "sigmoid")]
    cluster = {c: _rate(cluster_rates[c.act], se) for c in configs}
    return grid_claims.repulsion_check(name, configs, cluster, predict, LEVEL, {}, "", 1.0).verdict


def test_repulsion_is_judged_by_the_rate_from_a_tight_cluster_on_the_side_the_prediction_puts_it():
    """At d = 64 without bias the certified exponent predicts that ReLU's repulsion prevails (2 (lambda_1 + 1) = +2)
    and sigmoid's is overpowered (-13.7): rates of +2 and -10 from a tight cluster pass both checks; a ReLU cluster
    that contracts fails ``repulsion_prevails``; ignoring the attention's sign predicts that ReLU's contracts, which a
    rate of +2 contradicts; a rate at 0 within its error is undecided; NaN fails. Too few paths (standard error 0.7,
    every interval on its predicted side but a resolution above the predicted rates) leave it undecided, never a
    pass."""
    agree = {"relu": 2.0, "sigmoid": -10.0}
    assert _repulsion_verdict("repulsion_overpowered", agree) == "pass"
    assert _repulsion_verdict("repulsion_prevails", agree) == "pass"
    assert _repulsion_verdict("repulsion_prevails", {**agree, "relu": -1.0}) == "fail"
    ignored = grid_configs.WRONG_PREDICTIONS["the attention's sign ignored"]
    assert _repulsion_verdict("repulsion_overpowered", agree, ignored) == "fail"
    assert _repulsion_verdict("repulsion_prevails", {**agree, "relu": 0.01}) == "inconclusive"
    assert _repulsion_verdict("repulsion_prevails", {**agree, "relu": float("nan")}) == "fail"
    assert _repulsion_verdict("repulsion_prevails", agree, se=0.7) == "inconclusive"


def test_sign_decision_names_the_contradicted_row_on_a_failure():
    rows = [(-0.05, (-0.06, -0.04)), (0.1, (-0.5, 0.7))]
    assert sign_decision(rows) == ("fail", rows[0])
    assert sign_decision([(1.0, (0.5, 1.5)), (0.1, (-0.5, 0.7))]) == ("inconclusive", (0.1, (-0.5, 0.7)))
    with pytest.raises(ValueError, match="at least one row"):
        sign_decision([])


def _claims_reject_their_wrong_predictions(report: dict) -> None:
    """Every claim of the grid is shown to fail on a plausible wrong prediction: for each claim, some
    ``wrong_prediction`` row judging it fails."""
    rows = [c for c in report["checks"] if c["name"] == "wrong_prediction"]
    for claim in (*grid_claims.ORDERING_CLAIMS, "collapse_rate"):
        verdicts = {c["verdict"] for c in rows if c["config"]["check"] == claim}
        assert "fail" in verdicts, (claim, verdicts)


def test_the_committed_grid_report_passes_and_rejects_every_wrong_prediction():
    """... and a wrong prediction's collapse_rate allowance is the true one's (from the run, not from the claim)."""
    report = json.loads((REPORTS / "grid-agazzi.json").read_text())
    assert report["verdict"] == "pass" and report["profile"] == "full"
    _claims_reject_their_wrong_predictions(report)
    allowances = {}
    for c in report["checks"]:
        if "collapse_rate" in (c["name"], c["config"].get("check")):
            key = tuple(c["config"][k] for k in ("act", "d", "bias", "v"))
            allowances.setdefault(key, set()).add(c["allowance"])
    assert allowances and all(len(values) == 1 for values in allowances.values())
    claims = {c["name"] for c in report["checks"] if c["claim"]}
    assert claims >= {*grid_claims.ORDERING_CLAIMS, "collapse_rate", "finite_records"} - {
        grid_claims.LARGER_D_WITHOUT_BIAS
    }


@pytest.mark.slow  # the quick profile: about a minute on 2 cores
def test_the_quick_grid_passes_and_rejects_every_wrong_prediction(tmp_path):
    assert main(["run", "grid-agazzi", "--profile", "quick", "--seed", "0", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "grid-agazzi.json").read_text())
    assert report["verdict"] == "pass"
    _claims_reject_their_wrong_predictions(report)
