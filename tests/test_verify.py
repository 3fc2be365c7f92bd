"""The symbolic side: interface, derivations with their independent checks, and their ability to fail."""

import json
import threading
import time

import flint
import mpmath
import numpy as np
import pytest
import sympy as sp

import verify
from convergence import matrix_noise
from verify.__main__ import main as verify_main
from verify._analysis import p_antipodal_gauss, rho
from verify._calculus import d, sigma
from verify._common import working_bits, working_digits
from verify._derivations import catalogue, crosscheck, derivation, model_a, model_f
from verify._models import beta, fedorov_system


def test_overlap_sde_interface_symbols():
    drift, diffusion = verify.overlap_sde(model="fedorov", tokens=2)
    assert drift.free_symbols <= {rho, beta, d, sigma} and diffusion.free_symbols <= {rho, beta, d, sigma}
    # Both ends are degenerate, and the diffusion is non-negative inside.
    for end in (1, -1):
        assert sp.simplify(drift.subs(rho, end)) == 0 and sp.simplify(diffusion.subs(rho, end)) == 0
    values = {d: 5, beta: 1.3, sigma: 0.7}
    assert all(float(diffusion.subs(values).subs(rho, r)) > 0 for r in np.linspace(-0.99, 0.99, 21))
    with pytest.raises(ValueError, match="tokens must be 2"):
        verify.overlap_sde("fedorov", tokens=3)
    with pytest.raises(ValueError, match="model must be one of"):
        verify.overlap_sde("transformer")


def test_one_token_limit_is_spherical_brownian_motion():
    # Exact algebra: with n = 1 the derived drift is -(d-1)/2 sigma^2 x, so E<x_t, e> decays at
    # rate (d-1) sigma^2 / 2, the first zonal eigenvalue of (sigma^2/2) Laplacian on S^{d-1}.
    system = fedorov_system(1, unit=True)
    coefficient = system.drift[0].c[0]
    assert sp.simplify(coefficient + (d - 1) * sigma**2 / 2) == 0


def test_generator_agrees_with_coordinates_in_dimension_2():
    """Every checked model at d = 2 and model F with three tokens at d = 3; ``python -m verify`` (slow) adds d = 3, 4.
    The two sides agree exactly (0 at 30 digits), at any point: the point is the same rational on both."""
    der = model_f.generator_in_coordinates(dims=(2,))
    assert der.status == "verified", der.checks
    assert len(der.checks) == len(crosscheck.CHECKED) + 1 and all(
        "= 0 " in c["detail"] or c["detail"].endswith("= 0") for c in der.checks
    )


def test_layer_consistency_invariance_and_stratonovich():
    der = model_f.layer_consistency()
    assert der.status == "verified", [c for c in der.checks if c["status"] != "verified"]
    names = " ".join(c["name"] for c in der.checks)
    assert "sphere invariant" in names and "Stratonovich" in names and "third absolute moment" in names


@pytest.mark.parametrize("dim", [3, 4, 5, 16, 100, 4096])
def test_critical_beta_is_certified_and_brackets_the_sign_change(dim):
    lo, hi = verify.critical_beta(dim)
    assert lo <= hi and hi - lo < 1e-14
    # Independent high-precision evaluation of the exponent just outside the enclosure.
    with mpmath.workdps(50):
        outside = [lo - mpmath.mpf(10) ** -12, hi + mpmath.mpf(10) ** -12]
        below, above = (verify.boundary_exponents(dim, b, 1)[1] for b in outside)
        assert sp.N(below, 40) > 0 or (dim == 3 and sp.N(below, 40) < 0)
        assert sp.N(above, 40) < 0


def test_critical_beta_rejects_bad_dimensions():
    for bad in (2, 1, 3.0, True):
        with pytest.raises(ValueError, match="d must be an integer >= 3"):
            verify.critical_beta(bad)


def test_boundary_exponents_collapse_always_attracting():
    for dim in (2, 3, 10):
        plus, minus = verify.boundary_exponents(dim, 0.3, 0.5)
        assert float(plus) < 0


def test_p_antipodal_two_routes_agree_to_20_digits():
    first = verify.p_antipodal(4, 1.0, -0.3, dps=30)
    second = p_antipodal_gauss(4, 1.0, -0.3, dps=30, nodes=40)  # 40 Gauss nodes already agree to 30 digits
    with mpmath.workdps(40):
        assert abs(first - second) < mpmath.mpf(10) ** -20 * abs(first)
    assert 0 < first < 1


def test_p_antipodal_properties():
    lo, hi = verify.critical_beta(5)
    assert verify.p_antipodal(5, float(lo) * 0.9, 0.0, dps=15) == 0
    values = [verify.p_antipodal(5, 2.0, r, dps=15) for r in (-0.99, -0.5, 0.0, 0.5, 0.99)]
    assert all(a > b for a, b in zip(values, values[1:]))  # decreasing in rho0
    assert values[0] > 0.8 and values[-1] < 0.05
    with pytest.raises(ValueError, match="rho0 must be in"):
        verify.p_antipodal(5, 2.0, 1.0)
    with pytest.raises(ValueError, match="beta must be finite"):
        verify.p_antipodal(5, float("nan"), 0.0)


def test_hybrid_dichotomy_and_interface():
    der = model_f.hybrid_dichotomy()
    assert der.status == "verified"
    assert verify.critical_eps2(0.0) == 2
    assert abs(verify.critical_eps2(1.0) - 2 * mpmath.e**-1) < mpmath.mpf(10) ** -25


def test_quadratic_form_and_model_a_derivations():
    assert catalogue.quadratic_form().status == "verified"
    exponents = model_a.agazzi_exponents()
    assert exponents.status == "verified", exponents.checks


def test_one_step_crosscheck_rejects_a_wrong_generator(monkeypatch):
    good = crosscheck.one_step_check("fedorov", "rho", pairs=100_000)
    assert good.verdict == "pass"
    true_value = crosscheck.derived_generator
    monkeypatch.setattr(crosscheck, "derived_generator", lambda *a: 1.05 * true_value(*a))
    assert crosscheck.one_step_check("fedorov", "rho", pairs=100_000).verdict == "fail"


def test_python_m_verify_runs_its_derivations_and_writes_the_reports(tmp_path, capsys, monkeypatch):
    """The command's mechanism on two cheap derivations (the whole catalogue is the slow test below)."""
    import verify.__main__ as command

    monkeypatch.setattr(command, "ALL", (model_f.hybrid_dichotomy, model_a.agazzi_exponents))
    assert verify_main(["--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "symbolic.json").read_text())
    assert [der["name"] for der in data["derivations"]] == ["hybrid", "agazzi_two_point"]
    assert "**Status: verified**" in (tmp_path / "symbolic.md").read_text()
    assert "2/2 derivations verified" in capsys.readouterr().out
    failing = derivation.Derivation("failing", "a check that fails")
    failing.check("false", False)
    monkeypatch.setattr(command, "ALL", (lambda: failing,))
    assert verify_main(["--out", str(tmp_path / "failed")]) == 1


@pytest.mark.slow
def test_python_m_verify_writes_reports(tmp_path, capsys):
    assert verify_main(["--out", str(tmp_path)]) == 0
    text = (tmp_path / "symbolic.md").read_text()
    assert "**Status: verified**" in text
    data = json.loads((tmp_path / "symbolic.json").read_text())
    assert {der["name"] for der in data["derivations"]} >= {"generator", "boundary", "p_antipodal", "one_step"}
    assert all(der["status"] == "verified" for der in data["derivations"])
    assert "beta_c(d)" in capsys.readouterr().out


@pytest.mark.parametrize("model_name", ["fedorov", "hybrid"])
def test_numerical_limit_sde_drift_equals_the_symbolic_one(model_name, rng):
    from convergence._models import FedorovModel, HybridModel
    from verify._calculus import gram_symbol, vec_coordinates
    from verify._models import eps, hybrid_system, m

    from .helpers import random_tokens

    dim, b, s, e, mean = 4, 0.8, 0.9, 1.3, 0.4
    x = random_tokens(rng, 1, 2, dim)
    if model_name == "fedorov":
        sde = FedorovModel(tokens=2, dim=dim, beta=b, sigma=s, mean_value=mean * np.eye(dim)).limit_sde()
        system = fedorov_system(2, unit=True, mean=m)
    else:
        sde = HybridModel(dim=dim, beta=b, eps=e).limit_sde()
        system = hybrid_system(2)
    xs = [sp.Matrix(x[0, i]) for i in range(2)]
    gram = {gram_symbol(0, 1): float(x[0, 0] @ x[0, 1])}
    values = {d: dim, beta: b, sigma: s, eps: e, m: mean}
    for i in range(2):
        expected = np.array(vec_coordinates(system.drift[i], xs, gram).subs(values), dtype=float).ravel()
        np.testing.assert_allclose(sde.drift(x)[0, i], expected, rtol=1e-12, atol=1e-12)


def test_one_step_expansion_of_a_user_map_recovers_model_f_and_rejects_a_missing_ito_term():
    """verify.check_limit on model F written in explicit coordinates (d = 2, n = 2): the derived drift is
    -(d-1)/2 sigma^2 |a_i|^2 x_i and the covariance sigma^2 P_i <a_i, a_j> P_j; without the drift it fails."""
    d, n, sigma = 2, 2, sp.Rational(1, 2)
    noise = matrix_noise(d, float(sigma))

    def attention(xs, i):
        w = [sp.exp((xs[i].T * x)[0]) for x in xs]
        return sum((wj * x for wj, x in zip(w, xs)), sp.zeros(d, 1)) / sum(w)

    def unit(y):
        return y / sp.sqrt((y.T * y)[0])

    def step(xs, dw, h):
        return [unit(xs[i] + dw * attention(xs, i)) for i in range(n)]

    def drift(xs):
        return [
            -sp.Rational(d - 1, 2) * sigma**2 * (attention(xs, i).T * attention(xs, i))[0] * xs[i] for i in range(n)
        ]

    def diffusion(xs, dw):
        return [dw * attention(xs, i) - (xs[i].T * dw * attention(xs, i))[0] * xs[i] for i in range(n)]

    right = verify.check_limit(step, drift, diffusion, n, d, noise)
    assert right["consistent"] and right["drift"] < 1e-25 and right["covariance"] < 1e-25
    wrong = verify.check_limit(step, lambda xs: [sp.zeros(d, 1)] * n, diffusion, n, d, noise)
    assert not wrong["consistent"] and wrong["drift"] > 0.01 and wrong["covariance"] < 1e-25


@pytest.mark.parametrize(
    "block, read, wanted, other",
    [(working_digits, lambda: mpmath.mp.dps, 50, 20), (working_bits, lambda: flint.ctx.prec, 200, 80)],
)
def test_a_working_precision_block_is_not_changed_by_another_thread(block, read, wanted, other):
    """Studies run side by side in threads and mpmath's and flint's precisions are process-wide: each of two
    overlapping blocks in two threads computes at its own precision. (With plain ``mpmath.workdps`` the second
    thread's block sets 20 digits under the first, and the first, leaving, restores the default under the second:
    both readings fail.)"""
    before, inside, seen = read(), threading.Event(), []

    def enter_another_block():
        inside.wait()
        with block(other):
            time.sleep(0.2)  # the first thread leaves its block meanwhile
            seen.append(read())

    thread = threading.Thread(target=enter_another_block)
    thread.start()
    with block(wanted):
        inside.set()
        time.sleep(0.1)  # the other thread tries to enter its block here
        assert read() == wanted
    thread.join()
    assert seen == [other] and read() == before


def test_sympy_work_on_floats_waits_for_another_threads_precision_block():
    """``boundary_exponents`` substitutes float values into cosh, which sympy evaluates under ``mpmath.workprec``: it
    holds the precision lock, so it runs after another thread's block, not under it (without the lock it finishes
    in milliseconds, long before the block ends)."""
    verify.boundary_exponents(8, 0.5, 0.25)  # the derivation behind it, once
    inside, order = threading.Event(), []

    def simplify_meanwhile():
        inside.wait()
        verify.boundary_exponents(8, 0.6195, 0.35)
        order.append("simplified")

    thread = threading.Thread(target=simplify_meanwhile)
    thread.start()
    with working_digits(50):
        inside.set()
        time.sleep(0.5)
        assert mpmath.mp.dps == 50
        order.append("block left")
    thread.join()
    assert order == ["block left", "simplified"]
