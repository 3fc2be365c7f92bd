"""The public interface only (``import convergence``, the ``depth_limits`` fixture): no internal imports.

Model F written as a user would write it (``examples/wrong_ito_correction.py``), checked against the limit
SDE derived for it, and a claimed SDE without the Ito correction of the normalisation, which must be rejected.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import convergence as cv

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _example(name: str):
    """An example file, loaded as a module (it uses the public interface only)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


USER = _example("wrong_ito_correction")
LAYER, RIGHT, WRONG, NOISE = USER.LAYER, USER.RIGHT, USER.WRONG, USER.NOISE
N, D, BETA, SIGMA = USER.N, USER.D, USER.BETA, USER.SIGMA


def overlap(x):
    return np.sum(x[:, 0] * x[:, 1], axis=-1)


@pytest.mark.depth_limits_quick
def test_model_f_converges_strongly_to_its_derived_sde(depth_limits):
    outcome = depth_limits.assert_strong_order(LAYER, RIGHT, order=0.5)
    assert outcome.passed and {c.name for c in outcome.checks} >= {"strong_order", "same_limit"}


@pytest.mark.depth_limits_quick
def test_a_claimed_sde_without_the_ito_correction_is_rejected(depth_limits):
    with pytest.raises(pytest.fail.Exception) as failure:
        depth_limits.assert_strong_order(LAYER, WRONG, order=0.5)
    message = str(failure.value)
    assert "strong order: fail" in message and "step h" in message  # verdict and the table of levels
    first_line = message.splitlines()[0]  # names the map, the claim and the checks that decided
    assert first_line.startswith("FAIL: strong order of map ") and "sde " in first_line, first_line
    assert "decided by" in first_line and "same_limit" in first_line, first_line
    assert "strong_order: estimate" in message and "same_limit: estimate" in message
    assert message.count("-> FAIL") >= 3  # strong_order, strong_order_sup and same_limit


@pytest.mark.depth_limits_quick
def test_the_user_map_and_the_suites_model_f_have_the_same_weak_limit(depth_limits):
    suite_model = cv.FedorovModel(N, D, BETA, sigma=SIGMA)
    depth_limits.assert_same_weak_limit(LAYER, suite_model, overlap, depth=16, paths=20_000)


@pytest.mark.depth_limits_quick
def test_an_undecidable_check_is_reported_inconclusive_not_passed():
    from convergence.pytest_plugin import DepthLimits

    with pytest.raises(pytest.skip.Exception, match="INCONCLUSIVE"):
        DepthLimits("skip").assert_weak_order(LAYER, overlap, paths=64, depths=(2, 4, 8))
    with pytest.raises(pytest.fail.Exception, match="INCONCLUSIVE"):  # this suite runs with the fail mode
        DepthLimits("fail").assert_weak_order(LAYER, overlap, paths=64, depths=(2, 4, 8))


@pytest.mark.depth_limits_quick
def test_the_plugin_asserts_that_a_wrong_claim_is_rejected(depth_limits):
    outcome = depth_limits.assert_rejects("strong_order", LAYER, WRONG, order=0.5)
    assert outcome.verdict == "fail"
    with pytest.raises(pytest.fail.Exception, match="PASSED A WRONG CLAIM"):  # a right claim "rejected": the test fails
        depth_limits.assert_rejects("strong_order", LAYER, RIGHT, order=0.5)
    with pytest.raises(ValueError, match="check must be one of .* got 'strong'"):
        depth_limits.assert_rejects("strong", LAYER, WRONG)


def test_a_claim_with_its_drift_scaled_is_a_near_miss_the_local_check_rejects():
    """``scaled_drift``: the same tokens, dimension, noise and diffusion, the drift x factor; model F's drift x 1.05
    fails the local check at its defaults, x 1 is the claim itself."""
    model = cv.FedorovModel(2, 16)
    true = model.limit_sde()
    near = cv.scaled_drift(true, 1.05)
    x = np.eye(16)[None, :2]  # two orthogonal unit tokens, one path
    np.testing.assert_array_equal(near.drift(x), 1.05 * true.drift(x))
    dw = np.random.default_rng(0).standard_normal((1, *true.noise.shape))
    np.testing.assert_array_equal(near.diffusion(x, dw), true.diffusion(x, dw))
    assert (near.tokens, near.dim, near.noise) == (true.tokens, true.dim, true.noise)
    assert cv.check_local_consistency(model, near).verdict == "fail"
    with pytest.raises(ValueError, match="factor must be finite, got nan"):
        cv.scaled_drift(true, float("nan"))
    with pytest.raises(TypeError, match="factor must be a real number, got str"):
        cv.scaled_drift(true, "1.05")


def test_outcomes_write_the_suites_reports_with_their_time_and_no_empty_figure(tmp_path):
    outcome = cv.check_strong_order(LAYER, WRONG, title="wrong-sde")
    assert outcome.verdict == "fail"
    assert outcome.elapsed_s > 0 and outcome.cpu_s > 0  # measured, not 0.0
    paths = outcome.write(tmp_path)
    assert paths["md"].exists() and "same_limit" in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["elapsed_s"] == round(outcome.elapsed_s, 3)
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"  # convergence panels to draw
    local = cv.check_local_consistency(LAYER, RIGHT, samples=256, title="local")  # per-state estimates drawn
    written = local.write(tmp_path)
    assert written["png"].read_bytes()[:4] == b"\x89PNG" and "local.png" in written["md"].read_text()
    assert [plot.title.split(" by state")[0] for plot in local.plots] == ["drift_scale", "diffusion_scale"]
    assert len(local.plots[0].curves[0].x) == 5  # four states and the pooled estimate


def test_bad_input_names_the_parameter():
    with pytest.raises(TypeError, match="step must be callable"):
        cv.layer_map(None, N, D, NOISE)
    with pytest.raises(ValueError, match=r"tokens must be an integer in \[1, inf\]"):
        cv.layer_map(USER.step, 0, D, NOISE)
    with pytest.raises(TypeError, match="noise must be a CommonNoise"):
        cv.limit_sde(USER.ito_drift, USER.diffusion, N, D, noise=(D, D))


def test_example_a_derives_the_pre_ln_limit(depth_limits):
    """Example (a)'s expansion test, in process (its strong checks and its runs as a script and under pytest are the
    slow tests below; the same checks of model F run here above)."""
    _example("pre_ln").test_the_expansion_gives_the_claimed_sde(depth_limits)


@pytest.mark.slow
def test_example_b_runs_and_its_wrong_claim_is_rejected_by_the_plugin():
    printed = subprocess.run(
        [sys.executable, str(EXAMPLES / "wrong_ito_correction.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "with Ito correction: pass" in printed and "without Ito correction: fail" in printed
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "wrong_ito_correction.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # the wrong claim's test fails on purpose
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout[-2000:]
    assert "test_the_wrong_claim" in run.stdout and "same_limit: estimate" in run.stdout


@pytest.mark.slow
def test_example_a_derives_the_pre_ln_limit_and_checks_it():
    printed = subprocess.run(
        [sys.executable, str(EXAMPLES / "pre_ln.py")], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert (
        "claimed_drift_sym\none-step expansion against the claim: consistent (largest differences: drift 0," in printed
    )
    # model F's Ito drift is not Pre-LN's: derived 0 beside the claimed drift, entry by entry
    assert "model_f_drift_sym\none-step expansion against the claim: NOT consistent" in printed
    assert "claimed/derived" in printed
    assert "dx = dW a(N(X)): pass" in printed and "with model F's Ito drift: fail" in printed
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "pre_ln.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-2000:]


def test_a_wrong_expansion_claim_fails_with_the_residuals(depth_limits):
    pre_ln = _example("pre_ln")
    with pytest.raises(
        pytest.fail.Exception, match=r"NOT consistent \(largest differences: drift(.|\n)*claimed/derived"
    ):
        depth_limits.assert_expansion_matches(
            pre_ln.step_sym, pre_ln.model_f_drift_sym, pre_ln.claimed_diffusion_sym, pre_ln.N, pre_ln.D, pre_ln.NOISE
        )


def _quadratic_form_claim(n: int, d: int) -> cv.ClaimedSDE:
    """The random quadratic form in Ito form: dX = -P_X dQ X - (d-1)/2 X dt, dQ = (dB + dB^T)/sqrt(2)."""

    def diffusion(x, dw):
        v = -x @ ((dw + np.swapaxes(dw, -1, -2)) / np.sqrt(2.0))
        return v - np.sum(x * v, axis=-1, keepdims=True) * x / np.sum(x * x, axis=-1, keepdims=True)

    return cv.limit_sde(
        lambda x: -0.5 * (d - 1) * x / np.linalg.norm(x, axis=-1, keepdims=True),
        diffusion,
        n,
        d,
        cv.matrix_noise(d, 1.0),
        name="quadratic form (Ito)",
    )


@pytest.mark.depth_limits_quick
@pytest.mark.parametrize(
    "name", ["F", pytest.param("hybrid", marks=pytest.mark.slow), "A frozen features", "quadratic form"]
)
def test_the_suites_own_models_go_through_the_same_interface(depth_limits, name):
    import verify

    options = {"paths": 1024}
    if name == "F":
        options = {"paths": 2048}  # same_limit's allowance holds 1.5 x the reference's error: 1024 paths fall short
        model = cv.FedorovModel(3, 4, 1.0)
        claim = model.limit_sde()
    elif name == "hybrid":
        model = cv.HybridModel(dim=4, beta=1.0, eps=1.0, law="gaussian")  # a Brownian noise couples across depths
        claim = model.limit_sde()
        # scalar noise: cheap paths. Local strong orders at eps = 1 are 0.55, 1.0, 0.93, 0.61, 0.57, 0.54 from
        # L = 16 to 1024 (a near-Milstein hump): only L >= 128 is asymptotic, hence slow
        options = {"paths": 4096, "depths": (128, 256, 512, 1024)}
    elif name == "A frozen features":
        field = cv.FrozenFeatureField.draw(verify.KernelSpec("tanh", 4, 0.1, 0.1), 16, np.random.default_rng(0))
        model = cv.AgazziModel(3, field, 1.0, 1.0)
        claim = model.limit_sde()
    else:
        model = cv.QuadraticFormModel(3, 4)
        claim = _quadratic_form_claim(3, 4)
        # unit-variance noise: T = 1 is far from the asymptotic regime; 2048 paths resolve same_limit's 20% target
        options = {"paths": 2048, "horizon": 0.25}
    depth_limits.assert_strong_order(model, claim, order=0.5, **options)


PLUGIN_USER_TEST = """
import numpy as np
import pytest

from wrong_ito_correction import LAYER


def overlap(x):
    return np.sum(x[:, 0] * x[:, 1], axis=-1)


def test_undecidable(depth_limits):
    depth_limits.assert_weak_order(LAYER, overlap, paths=64, depths=(2, 4, 8))
"""


def test_the_plugin_locates_inconclusive_checks_at_the_users_test_scales_paths_and_writes_reports(tmp_path):
    (tmp_path / "test_user.py").write_text(PLUGIN_USER_TEST)
    env_path = f"{EXAMPLES}"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        str(tmp_path / "test_user.py"),
        "--depth-limits-paths",
        "0.5",
        "--depth-limits-report",
        str(tmp_path / "reports"),
    ]
    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "PYTHONPATH": env_path},
    )
    assert run.returncode == 0 and "1 skipped" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    assert "test_user.py:12: INCONCLUSIVE" in run.stdout  # the user's test, not the plugin's file
    written = json.loads((tmp_path / "reports" / "test_undecidable" / "weak-order.json").read_text())
    assert written["params"]["paths"] == 32  # 64 x 0.5


def test_the_plugins_fixture_is_documented_and_a_bad_factor_is_named(pytestconfig):
    from convergence.pytest_plugin import DepthLimits

    fixture = pytestconfig.pluginmanager.get_plugin("depth_limits")
    assert (fixture.depth_limits.__doc__ or "").strip()  # what `pytest --fixtures` prints for it
    with pytest.raises(ValueError, match="--depth-limits-paths"):
        DepthLimits(paths_factor=0.0)


def test_initial_states_from_public_constructors_are_seeded_and_checked():
    def sample(rng, paths, tokens, dim):
        x = rng.standard_normal((paths, tokens, dim))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    kwargs = {"paths": 128, "depths": (4, 8, 16), "initial": cv.sampled_state(sample)}
    first = cv.check_strong_order(LAYER, RIGHT, **kwargs)
    again = cv.check_strong_order(LAYER, RIGHT, **kwargs)
    assert [c.estimate for c in first.checks] == [c.estimate for c in again.checks]
    start = np.zeros((N, D))
    start[:, 0] = 1.0
    assert cv.check_strong_order(LAYER, RIGHT, paths=64, depths=(4, 8), initial=cv.fixed_state(start)).checks
    with pytest.raises(ValueError, match="unit tokens"):
        cv.fixed_state(2 * start)
    with pytest.raises(ValueError, match=r"sample must return shape"):
        cv.check_strong_order(
            LAYER,
            RIGHT,
            paths=64,
            depths=(4, 8),
            initial=cv.sampled_state(lambda rng, paths, tokens, dim: np.ones((paths, dim))),
        )


def test_an_exception_inside_a_users_map_names_the_map_and_the_step():
    def broken(x, dw, h):
        if h < 0.1:
            raise FloatingPointError("overflow in my attention")
        return USER.step(x, dw, h)

    layer = cv.layer_map(broken, N, D, NOISE, name="my block")
    with pytest.raises(
        RuntimeError,
        match=r"my block: step\(x, dw, h\) raised FloatingPointError: overflow in my "
        r"attention at step h = 0\.0625",
    ):
        cv.check_strong_order(layer, RIGHT, paths=64, depths=(4, 8, 16))


def _first_overlap(x):
    return np.sum(x[:, 0] * x[:, 1], axis=-1)


def _transposed_diffusion(x, dw):
    """P_{x_i} dW^T a_i: the noise entering transposed, equal in law to dW a_i (i.i.d. Gaussian entries), not
    pathwise."""
    v = USER.attention(USER.unit(x)) @ dw
    return v - np.sum(USER.unit(x) * v, axis=-1, keepdims=True) * USER.unit(x)


TRANSPOSED = cv.limit_sde(USER.ito_drift, _transposed_diffusion, N, D, NOISE, name="noise transposed")
_START = np.zeros((N, D))
_START[0, 0], _START[1, 0], _START[1, 1], _START[2, 2] = 1.0, -0.5, np.sqrt(0.75), 1.0
WEAK = {"depths": (4, 8, 16, 32), "budget": 32768, "near_misses": (0.05,), "initial": cv.fixed_state(_START)}


def _claims(outcome):
    return {c.name: c.verdict for c in outcome.checks if c.claim}


def test_the_weak_check_against_a_claim_tells_laws_apart():
    right = cv.check_weak_limit(LAYER, RIGHT, _first_overlap, **WEAK)
    assert _claims(right)["claim_limit"] == "pass" and right.verdict != "fail"
    # the layer is already at its limit at these depths: every coupled difference is below claim_limit's target, so
    # the order is a finding (not identifiable at this target) whose note says what would identify it
    order = next(c for c in right.checks if c.name == "weak_order")
    assert order.verdict == "inconclusive" and not order.claim, right.table()
    assert "not identifiable at this target" in order.note and "paths would make three differences" in order.note
    wrong = cv.check_weak_limit(LAYER, WRONG, _first_overlap, **WEAK)  # the claim's law differs: no Ito drift
    assert _claims(wrong)["claim_limit"] == "fail" and wrong.verdict == "fail"
    near_miss = [c for c in right.checks if c.name == "rejects"]
    assert len(near_miss) == 1 and not near_miss[0].claim and "chance of a miss" in near_miss[0].note
    # the wrong claim has no drift: its "drift x 1.05" is itself, skipped with a note, never reported as rejected
    itself = [c for c in wrong.checks if c.name == "rejects"]
    assert len(itself) == 1 and itself[0].verdict == "inconclusive" and "the claim itself" in itself[0].note
    with pytest.raises(ValueError, match="reference_factor must be even"):
        cv.check_weak_limit(LAYER, RIGHT, _first_overlap, reference_factor=3)


def test_a_claim_equal_in_law_but_not_pathwise_passes_the_weak_check_and_fails_the_strong_one():
    assert _claims(cv.check_weak_limit(LAYER, TRANSPOSED, _first_overlap, **WEAK))["claim_limit"] == "pass"
    strong = cv.check_strong_order(LAYER, TRANSPOSED, paths=256, depths=(8, 16, 32))
    assert strong.verdict == "fail"
