"""Model F's derivations (docs/models.md section 1): the generator in coordinates against the Gram form, the layer
map's consistency with the limit SDE, the overlap process, its boundary exponents and critical beta (certified),
the antipodal probability from the scale function, and the hybrid model's dichotomy."""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

from .._analysis import (
    critical_beta_closed_form,
    critical_eps2_closed_form,
    fedorov_ends,
    hybrid_ends,
    overlap_sde,
    p_antipodal,
    p_antipodal_gauss,
    pair_overlap_sde,
    rho,
    scale_decomposition,
)
from .._calculus import (
    coordinate_form,
    coordinate_generator_at,
    d,
    expand_step,
    gram_generator_at,
    gram_symbol,
    ito_to_stratonovich,
    sigma,
    step_drift_coefficients,
    stratonovich_to_ito,
)
from .._common import random_stream, working_digits
from .._models import MODELS, beta, eps, fedorov_system, m, quadratic_form_system, v_sign
from .._rigorous import certify_critical_beta
from .crosscheck import CHECKED, checked_system
from .derivation import Derivation

POINT_VALUES = {
    beta: sp.Rational(7, 10),
    sigma: sp.Rational(6, 5),
    eps: sp.Rational(3, 4),
    v_sign: 1,
    m: sp.Rational(1, 2),
}


KERNEL = (sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 4))


def generator_in_coordinates(dims=(2, 3, 4), seed: int = 0) -> Derivation:
    """Item 1: the Gram-level generator (d symbolic) against brute force in coordinates."""
    der = Derivation("generator", "Ito generator on functions of the Gram matrix, d symbolic, common noise")
    rng = random_stream(seed)
    g01, g00 = gram_symbol(0, 1), gram_symbol(0, 0)
    for model in CHECKED:
        system = checked_system(model, 2, False)
        for dim in dims:
            point = [list(np.round(rng.standard_normal(dim), 3)) for _ in range(2)]
            worst = max(
                abs(
                    coordinate_generator_at(system, f, dim, point, KERNEL, POINT_VALUES)
                    - gram_generator_at(system, f, dim, point, KERNEL, POINT_VALUES)
                )
                for f in (g01, sp.exp(beta * g01), g00)
            )
            der.check(
                f"{model}, d={dim}",
                worst < 1e-20,
                f"max |difference| = {sp.N(worst, 3)} over f in (g01, exp(beta g01), g00)",
            )
    system = fedorov_system(3, False, mean=m)
    point = [list(np.round(rng.standard_normal(3), 3)) for _ in range(3)]
    f = gram_symbol(0, 1) * gram_symbol(1, 2)
    diff = abs(
        coordinate_generator_at(system, f, 3, point, KERNEL, POINT_VALUES)
        - gram_generator_at(system, f, 3, point, KERNEL, POINT_VALUES)
    )
    der.check("fedorov, n=3, d=3, f=g01 g12", diff < 1e-20, f"|difference| = {sp.N(diff, 3)}")
    system = fedorov_system(2, unit=True)
    der.results["L rho (model F, n=2)"] = sp.simplify(system.generator(gram_symbol(0, 1)))
    return der


def layer_consistency() -> Derivation:
    """Item 2: the one-step expansion, the limit drift, sphere invariance, o(h) third moment, Stratonovich."""
    der = Derivation("layer_consistency", "one normalised layer expanded in sqrt(h): limit SDE of each model")
    der.results["drift of N(x + s xi + s^2 mu) at order h"] = step_drift_coefficients()
    for model in CHECKED:
        system = checked_system(model, 1, False)
        der.results[f"{model}: drift of x_0"] = sp.factor(sp.simplify(system.drift[0].c[0]))
        sphere = checked_system(model, 2, False)
        invariant = [sp.simplify(sphere.span.on_sphere(sphere.gram_drift(i, i))) for i in range(2)]
        der.check(
            f"{model}: sphere invariant (L |x_i|^2 = 0 on the sphere)",
            all(v == 0 for v in invariant),
            f"L G_ii = {invariant}",
        )
        span = sphere.span
        lowest = min(
            expand_step(span, 0, st, sphere.noise).lowest_order
            for st in MODELS[model].layer(span, **MODELS[model].parameters)[0]
        )
        der.check(
            f"{model}: increment starts at order sqrt(h) (third absolute moment O(h^3/2) = o(h))",
            lowest == 1,
            f"lowest power of s = {lowest}",
        )
    # Stratonovich: the quadratic form is given in Stratonovich form; its Ito drift must equal the
    # drift derived from the normalised Euler step (on the sphere).
    for dim in (2, 3, 4):
        coords, ito, comps = coordinate_form(quadratic_form_system(1, False), dim)
        from_strat = stratonovich_to_ito(sp.zeros(dim, 1), comps, coords)
        on_sphere = {coords[-1]: sp.sqrt(1 - sum(c**2 for c in coords[:-1]))}
        diff = sp.simplify((from_strat - ito).subs(on_sphere))
        der.check(
            f"quadratic form d={dim}: Ito drift of -P_X o dQ X equals the Euler step's",
            diff == sp.zeros(dim, 1),
            f"difference on the sphere {list(diff)}",
        )
        for model in (name for name in CHECKED if not MODELS[name].field_noise):
            coords, ito, comps = coordinate_form(checked_system(model, 1, False), dim, POINT_VALUES)
            strat = ito_to_stratonovich(ito, comps, coords)
            back = sp.simplify(stratonovich_to_ito(strat, comps, coords) - ito)
            der.check(f"{model} d={dim}: Ito -> Stratonovich -> Ito is the identity", back == sp.zeros(dim, 1))
            if model == "fedorov":
                der.results[f"model F (n=1, d={dim}) Stratonovich drift on the sphere"] = sp.simplify(
                    sp.simplify(strat).subs({coords[-1]: sp.sqrt(1 - sum(c**2 for c in coords[:-1]))})
                )
    return der


def fedorov_overlap() -> Derivation:
    """Item 3: model F two-token overlap SDE in closed form; general-n pair overlaps."""
    der = Derivation("fedorov_overlap", "d rho = b dt + sqrt(a) dB for rho = <x_1, x_2>, model F, Q^T K = I")
    drift, diffusion = overlap_sde("fedorov")
    der.results["b(rho)"], der.results["a(rho)"] = drift, diffusion
    raw = fedorov_system(2)
    g = gram_symbol(0, 1)
    for name, closed, direct in (
        ("drift", drift, raw.gram_drift(0, 1)),
        ("diffusion", diffusion, raw.gram_covariation((0, 1), (0, 1))),
    ):
        rng = random_stream(len(name))
        worst = 0
        for _ in range(5):
            vals = {
                d: int(rng.integers(2, 50)),
                beta: sp.Float(rng.uniform(-4, 4), 30),
                sigma: sp.Float(rng.uniform(0.1, 2), 30),
                rho: sp.Float(rng.uniform(-1, 1), 30),
            }
            worst = max(worst, abs(sp.N(closed.subs(vals) - direct.subs(g, rho).subs(vals), 30)))
        der.check(
            f"closed-form {name} equals the unsimplified generator output",
            worst < 1e-25,
            f"max difference {sp.N(worst, 3)} at 5 random points",
        )
    b3, a3 = pair_overlap_sde(3, 0, 1)
    der.results["n=3: drift of rho_01"], der.results["n=3: quadratic variation of rho_01"] = b3, a3
    # A third token placed on x_1 (g_02 = g_01, g_12 = 1) must give the two-token law with the
    # softmax weights of two copies of x_1: check the Gram-level drift is a function of the Gram entries only.
    der.check(
        "n=3 pair drift depends only on Gram entries",
        b3.free_symbols <= {gram_symbol(0, 1), gram_symbol(0, 2), gram_symbol(1, 2), d, beta, sigma},
    )
    return der


def boundary_analysis(d_max: int = 4096) -> Derivation:
    """Item 4: exponents at both ends, beta_c closed form, certified enclosures, classification."""
    der = Derivation("boundary", "growth exponents at rho = +-1, critical beta_c(d), boundary classification")
    ends = fedorov_ends()
    for end, behaviour in ends.items():
        der.results[f"rho = {end}: growth exponent"] = behaviour.growth_exponent
        der.results[f"rho = {end}: scale density exponent"] = behaviour.scale_exponent
    closed = critical_beta_closed_form()
    der.results["beta_c(d)"] = closed
    shifted = sp.Symbol("n", integer=True, nonnegative=True)
    der.check(
        "collapse end attracting for every d >= 2 (its exponent is negative)",
        bool(ends[1].growth_exponent.subs(d, shifted + 2).is_negative),
        str(ends[1].growth_exponent),
    )
    parts = scale_decomposition("fedorov")
    der.check(
        "scale exponents from the linearisation equal those of the scale-function decomposition",
        sp.simplify(ends[1].scale_exponent + parts.c_plus) == 0
        and sp.simplify(ends[-1].scale_exponent - parts.c_minus) == 0,
    )
    roots = [certify_critical_beta(dv) for dv in range(3, d_max + 1)]
    widths = [float(r.width) for r in roots]
    der.check(
        f"beta_c(d) certified by ball arithmetic for every d in [3, {d_max}]",
        all(r.certified for r in roots),
        f"max enclosure width {max(widths):.3g}; beta_c(4) in [{mpmath.nstr(roots[1].lo, 17)}, "
        f"{mpmath.nstr(roots[1].hi, 17)}]",
    )
    der.results["certified enclosures"] = {
        dv: [str(roots[dv - 3].lo), str(roots[dv - 3].hi)] for dv in (3, 4, 5, 8, 16, 64, 4096)
    }
    der.results["classification"] = (
        "both ends natural (Feller integrals diverge); rho = 1 attracting for every d >= 2; "
        "rho = -1 attracting with positive probability iff |beta| > beta_c(d)"
    )
    return der


def antipodal_probability(points=((4, 1.0, 0.0), (8, 2.0, -0.5)), dps: int = 30) -> Derivation:
    """Item 5: P(antipodal) from the scale function, two quadrature routes agreeing to 20+ digits."""
    der = Derivation("p_antipodal", "P(rho -> -1 | rho_0) = int_{rho_0}^1 s / int_{-1}^1 s")
    table = {}
    for dv, b, r0 in points:
        first = p_antipodal(dv, b, r0, dps=dps)
        second = p_antipodal_gauss(dv, b, r0, dps=dps)
        with working_digits(dps):
            digits = float(-mpmath.log10(abs(first - second) / abs(first))) if first != second else float(dps)
        table[f"d={dv}, beta={b}, rho0={r0}"] = mpmath.nstr(first, dps)
        der.check(
            f"d={dv}, beta={b}, rho0={r0}: Chebyshev/tanh-sinh vs Gauss-Jacobi",
            digits >= 20,
            f"agree to {digits:.1f} digits",
        )
    der.results["P(antipodal)"] = table
    der.check("P = 0 below beta_c (d=8, beta=1)", p_antipodal(8, 1.0, 0.0, dps=dps) == 0)
    return der


def hybrid_dichotomy() -> Derivation:
    """Item 6: hybrid overlap SDE and the critical eps^2(beta)."""
    der = Derivation("hybrid", "hybrid model: overlap SDE and the collapse/antipodal dichotomy")
    drift, diffusion = overlap_sde("hybrid")
    der.results["b(rho)"], der.results["a(rho)"] = drift, diffusion
    ends = hybrid_ends()
    for end, behaviour in ends.items():
        der.results[f"rho = {end}: growth exponent"] = behaviour.growth_exponent
    crit = critical_eps2_closed_form()
    der.results["eps_c^2(beta)"] = crit
    ok = True
    for bv in (-1, 0, 0.5, 2):
        for factor, signs in ((0.5, (-1, 1)), (2.0, (1, -1))):
            vals = {beta: bv, eps: sp.sqrt(factor * crit.subs(beta, bv))}
            lam_plus = float(ends[1].growth_exponent.subs(vals))
            lam_minus = float(ends[-1].growth_exponent.subs(vals))
            ok &= np.sign(lam_plus) == signs[0] and np.sign(lam_minus) == signs[1]
    der.check(
        "below eps_c^2 only collapse attracts, above it only the antipodal end",
        bool(ok),
        "exponent signs at eps^2 = eps_c^2 / 2 and 2 eps_c^2 for beta in (-1, 0, 0.5, 2)",
    )
    return der
