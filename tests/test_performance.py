"""Performance reporting: cost-curve exponents, the performance report's figure, CPU time in the index."""

import json
import sys

import numpy as np
import pytest

import convergence as cv
from convergence._experiments import WeakDesign, coupled_observables
from convergence._models import CommonNoise, FedorovModel, attention_average
from convergence._output import StudyResult, write_index, write_run, write_study
from convergence._paths import PathStreams, fixed_overlap, overlap
from convergence._performance.breakdown import categorise, sampled_breakdown
from convergence._performance.cost import CostAxis, cost_curves
from convergence._performance.report import performance_markdown, write_performance
from convergence._performance.user_checks import BUDGETS, user_checks_markdown
from convergence._performance.variance import commute_multilevel_rows, multilevel_diagnostics, variance_factor


def test_cost_curve_exponent_is_the_log_log_slope_of_the_upper_sizes():
    """Exact algebra on synthetic timings: t = 3 s^2 above a fixed cost that only the smallest size feels."""
    axis = CostAxis("n", "n", (2, 4, 8, 16, 32), 2.0, lambda n: lambda: 1e3 * (n == 2) + 3.0 * n**2, "synthetic")
    curves = cost_curves(lambda run, repeats: run(), axes=(axis,))
    assert curves["n"]["exponent"] == pytest.approx(2.0, abs=1e-12)
    assert curves["n"]["seconds"][0] == pytest.approx(1012.0)


def test_performance_report_writes_the_cost_figure_and_table(tmp_path):
    curves = {
        "n": {
            "label": "tokens N",
            "sizes": [1, 2, 4],
            "seconds": [1.0, 4.0, 16.0],
            "exponent": 2.0,
            "expected": 2.0,
            "workload": "synthetic",
        }
    }
    result = {
        "config": {"repeats": 1},
        "rates": {"x": {"seconds": 1.0, "path_steps_per_s": 10.0}},
        "ratios": {},
        "machine": {"cpus": 2, "processor": "x", "python": "3", "numpy": "2"},
        "notes": [],
        "cost_curves": curves,
    }
    paths = write_performance(result, tmp_path)
    assert paths["cost"].read_bytes()[:4] == b"\x89PNG"
    text = paths["md"].read_text()
    assert "## Cost curves" in text and "| tokens N | synthetic | 1, 2, 4 | 1, 4, 16 | - | 2.00 | 2 |" in text
    result["ref_s"] = 2.0  # seconds in units of the reference kernel
    text = write_performance(result, tmp_path)["md"].read_text()
    assert "| tokens N | synthetic | 1, 2, 4 | 1, 4, 16 | 0.5, 2, 8 | 2.00 | 2 |" in text


def test_a_users_check_meets_its_budget_only_when_decided_as_wanted_and_cheap_enough():
    rows = [
        {"check": "local", "claim": "true claim", "wanted": "pass", "verdict": "pass", "cpu_s": 2.0, "ref": 0.2},
        {
            "check": "local",
            "claim": "drift x 1.05",
            "wanted": "fail",
            "verdict": "inconclusive",
            "cpu_s": 1,
            "ref": 0.1,
        },
        {"check": "weak", "claim": "true claim", "wanted": "pass", "verdict": "pass", "cpu_s": 60.0, "ref": 6.0},
    ]
    rows = [{**r, "budget_ref": BUDGETS[r["check"]]} for r in rows]
    table = [line for line in user_checks_markdown(rows) if line.startswith("| local") or line.startswith("| weak")]
    assert [line.rsplit("|", 2)[1].strip() for line in table] == ["yes", "**no**", "**no**"]


def test_index_reports_wall_and_cpu_time(tmp_path):
    result = StudyResult("s", "quick", 0, {}, [], elapsed_s=10.0, cpu_s=19.5)
    write_study(result, tmp_path)
    assert json.loads((tmp_path / "s.json").read_text())["cpu_s"] == 19.5
    index = write_index(tmp_path).read_text()
    assert "| 10.0 | 19.5 |" in index and "Sum over studies: 10 s wall, 20 s CPU." in index
    # the run line names the studies a `run` ran (the index lists every report in the folder, not only those)
    run = {
        "command": "run",
        "profile": "full",
        "seed": 0,
        "studies": ["s", "t"],
        "wall_s": 12.0,
        "scheduler": "processes",
        "workers": 2,
        "concurrent_studies": 1,
        "cores": 2,
    }
    write_run(tmp_path, run)
    assert "Last run (`run s t`, profile full, 2 studies" in write_index(tmp_path).read_text()
    write_run(tmp_path, {**run, "command": "report"})
    assert "Last run (`report`, profile full" in write_index(tmp_path).read_text()


def test_breakdown_charges_numpy_kernels_to_the_suites_function_that_called_them():
    assert categorise("/x/convergence/_paths/brownian.py:increments") == "sampling"
    assert categorise("/x/sympy/core/add.py:__new__") == "symbolic"
    assert categorise("/x/numpy/lib/_function_base_impl.py:median") == "statistics"

    def work():
        # ~30 ms of draws (26 MB: under load their page faults may take several times that), then attention long
        # enough to stay the larger share whatever else runs on the machine
        x = PathStreams(0, 0, 64).increments(CommonNoise((256, 5)), 40, 1.0)[:, 0]
        for _ in range(40):
            attention_average(x / np.linalg.norm(x, axis=-1, keepdims=True), 1.0)

    seconds = sampled_breakdown(work, interval=0.001)
    assert seconds["attention"] > seconds["sampling"] > 0, seconds
    assert seconds["attention"] > 0.5 * sum(seconds.values()), seconds
    # pure-Python symbolic work is charged as such (the stack walk reaches sympy frames)
    import sympy

    x = sympy.Symbol("x")
    expression = sympy.exp(x) / (1 + x)
    # sympy imports parts of its series machinery on first use of each (importlib frames, charged "other", and slow
    # on a loaded machine with a fresh install): warm up on the very computation that is measured
    sympy.series(expression, x, 0, 12)
    seconds = sampled_breakdown(lambda: [sympy.series(expression, x, 0, 12) for _ in range(3)], 0.001)
    assert seconds["symbolic"] > 0.6 * sum(seconds.values()), seconds


def test_standard_library_frames_are_charged_to_their_caller():
    """Time in a standard-library helper (here copy.deepcopy) called from sympy is sympy's (it was 'other')."""
    from convergence._performance.breakdown import frame_category

    class Grab:
        def __deepcopy__(self, memo):
            Grab.category = frame_category(sys._getframe(1))  # the live frame of copy.deepcopy, inside "sympy"
            return self

    scope: dict = {}
    exec(compile("import copy\ndef caller(obj):\n    return copy.deepcopy(obj)\n", "/x/sympy/fake.py", "exec"), scope)
    scope["caller"](Grab())
    assert Grab.category == "symbolic"


def test_a_variance_factor_is_the_variance_ratio_at_equal_work():
    """Exact algebra: samples of variance 4 against samples of variance 1 whose paths cost 2 each give 2, inside the
    interval; the same samples at equal cost give 4."""
    rng = np.random.default_rng(0)
    unit = rng.standard_normal(4096)
    unit = (unit - unit.mean()) / unit.std(ddof=1)  # variance exactly 1
    assert variance_factor(2 * unit, unit, work=2.0)["factor"] == pytest.approx(2.0, rel=1e-12)
    row = variance_factor(2 * unit, unit)
    assert row["factor"] == pytest.approx(4.0, rel=1e-12) and row["interval"][0] < 4.0 < row["interval"][1]


def test_antithetic_pairs_cancel_the_noise_of_a_map_affine_in_it():
    """Exact algebra: an Euler step of an Ornstein-Uhlenbeck process, x <- (1 - h) x + 0.7 dW, from a fixed state, and a
    linear observable. A path and its reverse average to the noise-free value (1 - h)^L x_0 at every depth L (to
    rounding), while the plain paths spread."""
    step = cv.layer_map(lambda x, dw, h: (1 - h) * x + 0.7 * dw, 1, 2, cv.per_token_noise(1, 2), name="OU Euler")
    design = WeakDesign(depths=(4, 8, 16), horizon=1.0, paths=64, block_paths=32)
    first = {"x": lambda x: x[:, 0, 0]}
    start = cv.fixed_state(np.array([[1.0, 0.0]]))
    plain = coupled_observables(step, design, first, 0, (1,), start)["x"]
    paired = coupled_observables(step, design, first, 0, (1,), start, antithetic=True)["x"]
    assert plain.std(axis=0).min() > 0.1
    noise_free = np.array([(1 - 1.0 / depth) ** depth for depth in design.depths])
    np.testing.assert_allclose(paired, np.broadcast_to(noise_free, paired.shape), rtol=0, atol=1e-13)


def test_antithetic_pairs_keep_the_mean_of_a_nonlinear_map():
    """Unbiased: model F's overlap (d = 4) by antithetic pairs and by independent paths, 2048 pairs against 4096
    paths; the means agree within 4 standard errors of their difference (false-failure rate 6e-5)."""
    model = FedorovModel(tokens=2, dim=4, beta=1.0)
    first = {"rho": lambda x: overlap(x)}
    start = fixed_overlap(-0.5)
    plain = coupled_observables(model, WeakDesign(depths=(2, 4, 8), horizon=1.0, paths=4096), first, 0, (2,), start)
    paired = coupled_observables(
        model, WeakDesign(depths=(2, 4, 8), horizon=1.0, paths=2048), first, 0, (3,), start, antithetic=True
    )
    a, b = plain["rho"][:, -1], paired["rho"][:, -1]
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(a.mean() - b.mean()) < 4 * se


def test_multilevel_diagnostics_read_the_rates_of_the_level_corrections():
    """Exact algebra: level corrections Y_l = 2^-l + 2^(-l/2) u_l with u_l of mean 0 and variance exactly 1 give
    alpha = beta = 1; the predicted saving is V[P_L] C_L / (sum_l sqrt(V_l C_l))^2 with C = (4, 12, 24)."""
    rng = np.random.default_rng(1)
    u = rng.standard_normal((4096, 3))
    u = (u - u.mean(axis=0)) / u.std(axis=0, ddof=1)
    corrections = np.stack([2.0**-level + 2.0 ** (-level / 2) * u[:, level] for level in range(3)], axis=1)
    values = np.cumsum(corrections, axis=1)
    row = multilevel_diagnostics(values, (4, 8, 16))
    assert row["alpha"] == pytest.approx(1.0, abs=1e-12) and row["beta"] == pytest.approx(1.0, abs=1e-12)
    variances, costs = np.array([1.0, 0.5, 0.25]), np.array([4.0, 12.0, 24.0])
    expected = values[:, -1].var(ddof=1) * 16 / np.sum(np.sqrt(variances * costs)) ** 2
    assert row["saving"] == pytest.approx(expected, rel=1e-12)


def test_the_performance_report_shows_each_levers_factors():
    row = {
        "check": "weak",
        "study": "weak-fedorov",
        "lever": "antithetic pairs",
        "configuration": "model F, d = 4, f = rho",
        "quantity": "finest mean (weak_limit)",
        "factor": 1.34,
        "interval": [1.28, 1.40],
        "cost_factor": 0.99,
        "efficiency": 1.34 / 0.99,
        "paths": 8192,
    }
    multilevel = {
        "check": "weak",
        "study": "weak-fedorov",
        "configuration": "model F, d = 4, f = rho",
        "depths": [4, 8, 16],
        "alpha": 1.0,
        "beta": 2.0,
        "gamma": 1.0,
        "kurtosis": 3.0,
        "saving": 4.5,
    }
    result = {
        "config": {"repeats": 1},
        "rates": {},
        "ratios": {},
        "machine": {"cpus": 2, "processor": "x", "python": "3", "numpy": "2"},
        "notes": [],
        "variance_reduction": {"levers": [row], "multilevel": [multilevel]},
    }
    text = performance_markdown(result)
    assert "| weak | weak-fedorov | model F, d = 4, f = rho | 1.00 | 2.00 | 1 | 3.0 | 4.50 |" in text
    assert "## Variance reduction (measured)" in text
    assert "| weak | weak-fedorov | antithetic pairs | model F, d = 4, f = rho | finest mean (weak_limit) | " in text
    assert "1.34 [1.28, 1.40] | 0.99 | 1.35 |" in text


def test_commute_ladders_are_diagnosed_per_model_and_token_count():
    rows = commute_multilevel_rows(pairs=8)
    assert [row["configuration"].split(",")[0:2] for row in rows] == [
        [model, f" N = {n}"] for model in ("model F", "model A") for n in (8, 16, 32)
    ]
    assert all(np.isfinite([row[k] for k in ("alpha", "beta", "kurtosis", "saving")]).all() for row in rows)
