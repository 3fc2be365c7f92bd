"""The strong-fedorov study end to end, its ability to fail, and exact calibration of model F."""

import json

import numpy as np
import pytest
from scipy import special

from convergence._cli import main
from convergence._experiments import (
    StrongDesign,
    analyse_strong,
    bootstrap_generator,
    coupled_strong_errors,
)
from convergence._models import FedorovModel, FedorovSDE
from convergence._paths import simulate
from convergence._studies import strong_fedorov


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    """The study through the command line on a tiny design (one configuration, 128 paths): its report's files and
    fields, not its statistics (the quick profile's are the slow test below)."""
    out = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(strong_fedorov, "CONFIGS", ((2, 4),))
        patch.setitem(
            strong_fedorov.DESIGNS,
            "quick",
            StrongDesign(depths=(4, 8, 16), horizon=1.0, reference_factor=8, paths=128, replicates=200),
        )
        status = main(
            ["run", "strong-fedorov", "--profile", "quick", "--seed", "0", "--scheduler", "sync", "--out", str(out)]
        )
    return out, status, json.loads((out / "strong-fedorov.json").read_text())


@pytest.mark.slow
def test_quick_study_passes_with_order_interval_around_one_half(tmp_path):
    status = main(["run", "strong-fedorov", "--profile", "quick", "--seed", "0", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "strong-fedorov.json").read_text())
    assert status == 0 and report["verdict"] == "pass"
    orders = [c for c in report["checks"] if c["name"] == "strong_order"]
    assert len(orders) == 4
    for check in orders:
        lo, hi = check["ci"]
        assert 0.35 <= lo <= 0.5 <= hi <= 0.65, check
    names = {c["name"] for c in report["checks"]}
    assert names == {"strong_order", "strong_order_sup", "reference_order", "same_limit"}


def test_report_files_and_fields(tiny_report):
    out, status, report = tiny_report
    assert status == {"fail": 1, "inconclusive": 3, "pass": 0}[report["verdict"]]
    names = {c["name"] for c in report["checks"]}
    assert names == {"strong_order", "strong_order_sup", "reference_order", "same_limit"}
    assert report["params"]["paths"] == 128 and report["params"]["configs"] == [{"n": 2, "d": 4}]
    for field in ("study", "profile", "seed", "params", "verdict", "elapsed_s", "versions", "checks"):
        assert field in report
    assert report["profile"] == "quick" and report["seed"] == 0
    assert report["versions"]["numpy"] == np.__version__
    for check in report["checks"]:
        assert set(check) >= {"name", "expected", "estimate", "ci", "verdict"}
        assert len(check["ci"]) == 2
    assert (out / "strong-fedorov.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "strong-fedorov.md").read_text()
    assert "strong_order" in markdown and "strong-fedorov.png" in markdown
    assert f"[strong-fedorov](strong-fedorov.md) | **{report['verdict']}**" in (out / "index.md").read_text()


class MissingItoCorrection(FedorovSDE):
    """The limit SDE without the radial Ito drift: a wrong claim the study must reject."""

    def _drift(self, x, a):
        return np.zeros_like(x)


def test_wrong_limit_sde_is_rejected():
    model = FedorovModel(tokens=2, dim=4)
    design = StrongDesign(depths=(8, 16, 32, 64, 128), paths=128)
    data = coupled_strong_errors(model, MissingItoCorrection(model), design, seed=0, key=(9, 0))
    checks = {c.name: c for c in analyse_strong(data, design, {"n": 2}, bootstrap_generator(0, (9, 0)))[0]}
    assert checks["same_limit"].verdict == "fail"
    assert checks["strong_order"].verdict == "fail"


def one_step_contraction(d: int, s: float, nodes: int = 120) -> float:
    """m = E<N(e + s Z), e> for Z ~ N(0, I_d): by symmetry E[x_{k+1} | x_k] = m x_k for one token,
    so E<x_L, e> = m^L <x_0, e> exactly for model F with n = 1.

    Tensor Gauss quadrature: Hermite in Z_1 ~ N(0, 1), generalised Laguerre in C = |Z_perp|^2 ~
    chi-square(d - 1) (converged to about 1e-10 at 120 nodes).
    """
    z, wz = special.roots_hermitenorm(nodes)
    t, wt = special.roots_genlaguerre(nodes, (d - 1) / 2 - 1)
    c = 2 * t[None, :]
    values = (1 + s * z[:, None]) / np.sqrt((1 + s * z[:, None]) ** 2 + s * s * c)
    return float(wz @ values @ wt / (np.sqrt(2 * np.pi) * special.gamma((d - 1) / 2)))


@pytest.mark.parametrize("dim", [3, 8])
def test_one_token_mean_matches_exact_discrete_moment_and_its_limit(dim):
    sigma, horizon, depth, paths = 1.0, 0.5, 16, 20000
    exact_discrete = one_step_contraction(dim, sigma * np.sqrt(horizon / depth)) ** depth
    limit = np.exp(-(dim - 1) * sigma**2 * horizon / 2)
    # Rate and limit of the exact discrete moment: |m^L - limit| = O(h) (halves with h).
    errors = [abs(one_step_contraction(dim, sigma * np.sqrt(horizon / L)) ** L - limit) for L in (16, 32, 64)]
    assert 1.6 < errors[0] / errors[1] < 2.4 and 1.6 < errors[1] / errors[2] < 2.4
    # Monte Carlo against the exact discrete value: 4.5 standard errors, false-failure rate < 1e-5.
    e = np.eye(dim)[0]
    model = FedorovModel(tokens=1, dim=dim, sigma=sigma)
    x = simulate(model, depth, horizon, paths, seed=3, initial=lambda streams, n, d: np.tile(e, (streams.paths, n, 1)))
    u = x[:, 0, 0]
    assert abs(u.mean() - exact_discrete) <= 4.5 * u.std(ddof=1) / np.sqrt(paths)


@pytest.mark.slow
def test_full_study_gives_narrow_order_intervals(tmp_path):
    assert main(["run", "strong-fedorov", "--profile", "full", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "strong-fedorov.json").read_text())
    assert report["verdict"] == "pass"
    for check in report["checks"]:
        if check["name"] == "strong_order":
            lo, hi = check["ci"]
            assert lo <= 0.5 <= hi and hi - lo <= 0.1, check
