"""Every derivation of the symbolic side with its cross-checks, as records a report can print.

Each function derives one result from the models' layer maps and checks it another way (brute force in
coordinates, a second quadrature, interval certification, a Monte Carlo one-step estimate, or the
formula a source paper states). A check's status is ``verified`` or ``failed``; nothing is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mpmath
import numpy as np
import sympy as sp

from .._analysis import (
    GAUSS_HERMITE_NODES,
    KernelSpec,
    activation_constants,
    activation_table,
    agazzi_two_point,
    critical_beta_closed_form,
    critical_eps2_closed_form,
    fedorov_ends,
    hybrid_ends,
    k1,
    k1p,
    k_one,
    k_one_prime,
    k_one_quadrature,
    kernel,
    kernel_derivative_quadrature,
    overlap_sde,
    p_antipodal,
    p_antipodal_gauss,
    pair_overlap_sde,
    quadratic_form_results,
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
from .._common import Verdict, random_stream, working_digits
from .._models import (
    MODELS,
    beta,
    eps,
    fedorov_system,
    m,
    quadratic_form_system,
    v_sign,
)
from .._models import latent_variances as ld
from .._rigorous import certify_critical_beta, lambda_bar_prime
from .crosscheck import (
    CHECKED,
    TEST_FUNCTIONS,
    checked_system,
    one_step_check,
)

VERIFIED, FAILED = "verified", "failed"


@dataclass
class Derivation:
    name: str
    statement: str
    results: dict[str, object] = field(default_factory=dict)
    checks: list[dict] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append({"name": name, "status": VERIFIED if ok else FAILED, "detail": detail})

    @property
    def status(self) -> str:
        return VERIFIED if self.checks and all(c["status"] == VERIFIED for c in self.checks) else FAILED


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


def quadratic_form() -> Derivation:
    """Item 7: random quadratic form overlap, invariant, merge probability, exponent near the diagonal."""
    der = Derivation("quadratic_form", "dX = -P_X o dQ X: overlap process, invariant, merge probability")
    res = quadratic_form_results()
    der.results.update(
        {
            "b(rho)": res.drift,
            "a(rho)": res.diffusion_squared,
            "invariant S(rho)": res.invariant,
            "invariant in the angle": res.invariant_of_angle,
            "P(merge | rho)": res.merge_probability,
            "growth exponent of 1 - rho": res.exponent_diagonal,
            "growth exponent of 1 + rho": res.exponent_antipodal,
        }
    )
    generator = sp.simplify(
        res.drift * sp.diff(res.invariant, rho) + res.diffusion_squared * sp.diff(res.invariant, rho, 2) / 2
    )
    der.check("the invariant has zero drift (L S = 0)", generator == 0, f"L S = {generator}")
    der.check(
        "merge probability is 1 at rho = 1 and 0 at rho = -1",
        sp.limit(res.merge_probability, rho, 1) == 1 and sp.limit(res.merge_probability, rho, -1) == 0,
    )
    return der


def agazzi_exponents() -> Derivation:
    """Item 8: model A two-point motion, lambda_1, lambda_bar, G(u), against docs/models.md section 2."""
    der = Derivation("agazzi_two_point", "model A two-point motion (pure noise): exponents and G(u)")
    res = agazzi_two_point()
    der.results.update(
        {
            "drift of u (v = 0)": res.drift,
            "a(u)": res.diffusion_squared,
            "lambda_1": res.lambda_1,
            "lambda_bar": res.lambda_bar,
            "G(u)": res.G,
            "drift of u with attention": res.drift_with_attention,
        }
    )
    u = sp.Symbol("u", real=True)
    kf = sp.Function("k")
    stated = {  # docs/models.md section 2, the claims under test
        "lambda_1": ((d - 3) * k1p - (d - 1) * k1) / 2,
        "lambda_bar": (d - 1) * k1p - (d - 3) * k1,
        "G(u)": kf(u) * (d - 2 + u**2 - beta * u * (1 - u**2)) + k1 * (beta * (1 - u**2) - (d - 1) * u),
    }
    for name, formula in stated.items():
        derived = {"lambda_1": res.lambda_1, "lambda_bar": res.lambda_bar, "G(u)": res.G}[name]
        der.check(f"{name} equals the formula of docs/models.md section 2", sp.simplify(derived - formula) == 0)
    return der


def one_step_crosschecks(pairs: int = 200_000) -> Derivation:
    """Item 9: (E f(X_h) - f(x))/h of the discrete layers -> derived generator, O(h) bias, three steps."""
    der = Derivation("one_step", "discrete layer one step vs derived generator (Monte Carlo, antithetic)")
    rows = []
    for model in CHECKED:
        for observable in TEST_FUNCTIONS:
            check = one_step_check(model, observable, pairs=pairs)
            rows.append(check.to_dict())
            der.check(
                f"{model}, f = {observable}",
                check.verdict == Verdict.PASS,
                f"L f = {check.generator:.5f}; fit {check.intercept:.5f} +- {check.intercept_se:.5f} "
                f"(slope {check.slope:.3g}) from D(h) at h = {check.steps}",
            )
    der.results["table"] = rows
    return der


def relu_kernel_by_conditioning(spec: KernelSpec, u: float, dps: int = 30) -> mpmath.mpf:
    """E[relu(Z_1) relu(Z_2)] + sigma_W^2 as a 1-D integral: given g_1, E relu(a + b g) = a Phi(a/b) + b phi(a/b)."""
    with working_digits(dps):
        s = mpmath.sqrt(mpmath.mpf(spec.variance))
        r = (mpmath.mpf(u) / spec.dim + mpmath.mpf(spec.sigma_u) ** 2) / s**2
        q = mpmath.sqrt(1 - r**2)

        def inner(g):
            a, b = s * r * g, s * q
            return a * mpmath.ncdf(a / b) + b * mpmath.npdf(a / b)

        value = mpmath.quad(lambda g: s * g * inner(g) * mpmath.npdf(g), [0, mpmath.inf])
        return value + mpmath.mpf(spec.sigma_w) ** 2


def activation_kernels() -> Derivation:
    """Item 10: model A's kernel constants k(1), k'(1) three ways, the arc-cosine kernel, Price's theorem."""
    der = Derivation("activation_kernels", "MLP field kernel k(u), k(1), k'(1) and the two-point exponents")
    der.results["table"] = activation_table()
    for act in ("relu", "tanh", "sigmoid", "silu", "linear"):
        for dim, sig in ((5, 0.0), (16, 0.1)):
            spec = KernelSpec(act, dim, sig, sig)
            k1_mp, k1p_mp = k_one(spec), k_one_prime(spec)
            gh = k_one_quadrature(spec, 2 * GAUSS_HERMITE_NODES)
            gh_p = float(kernel_derivative_quadrature(spec, 1.0, 2 * GAUSS_HERMITE_NODES))
            if act in ("relu", "linear"):
                with working_digits(40):  # closed forms at the spec's own (float) parameters
                    s2, w2 = mpmath.mpf(spec.variance), mpmath.mpf(spec.sigma_w) ** 2
                    exact = (
                        (s2 / 2 + w2, mpmath.mpf(1) / (2 * dim)) if act == "relu" else (s2 + w2, mpmath.mpf(1) / dim)
                    )
                    gap = max(abs(k1_mp - exact[0]), abs(k1p_mp - exact[1]))
                der.check(
                    f"{act}, d={dim}, sigma={sig}: k(1), k'(1) equal the closed forms",
                    gap < 1e-25,
                    f"gap {float(gap):.2e}",
                )
            if act != "relu":  # Gauss-Hermite is slow for the kink; the closed form covers ReLU
                gap = max(abs(float(k1_mp) - gh), abs(float(k1p_mp) - gh_p))
                der.check(
                    f"{act}, d={dim}, sigma={sig}: tanh-sinh and Gauss-Hermite agree", gap < 1e-12, f"gap {gap:.2e}"
                )
    for sig in (0.0, 0.1):
        spec = KernelSpec("relu", 5, sig, sig)
        gaps = [
            abs(float(kernel(spec)(u)) - float(relu_kernel_by_conditioning(spec, u)))
            for u in (-0.9, -0.3, 0.2, 0.7, 0.99)
        ]
        der.check(
            f"ReLU arc-cosine kernel equals the conditioned integral (sigma = {sig})",
            max(gaps) < 1e-12,
            f"max gap {max(gaps):.2e}",
        )
    for act in ("tanh", "sigmoid", "silu"):
        k = kernel(KernelSpec(act, 5, 0.1, 0.1))
        u = np.array([-0.8, -0.1, 0.4, 0.95])
        slope = (k(u + 1e-5) - k(u - 1e-5)) / 2e-5
        price = kernel_derivative_quadrature(k.spec, u)
        gap = float(np.max(np.abs(slope - price)))
        der.check(
            f"{act}: k'(u) (differentiated interpolant) equals Price's E[act' act']/d",
            gap < 1e-8,
            f"max gap {gap:.2e}; interpolation error {k.interpolation_error:.1e}",
        )
    return der


def energy_rate(
    configs=(
        ("relu", 5, 0.0),
        ("relu", 5, 0.1),
        ("sigmoid", 5, 0.0),
        ("tanh", 5, 0.0),
        ("silu", 5, 0.1),
        ("sigmoid", 16, 0.1),
    ),
    beta_value: float = 1.0,
) -> Derivation:
    """Item 11: F(u) of the synchronisation bound, its value at u = 1, eps of the attention flow, certified
    lambda_bar'."""
    der = Derivation("energy_rate", "synchronisation bound: F(u), lambda_bar' (certified), attention rate eps")
    u, z, c0, c1, c2, kappa = sp.symbols("u z c0 c1 c2 kappa", real=True)
    kf = sp.Function("k")
    g = agazzi_two_point().G
    f = beta * sp.exp(beta * u) * g / (sp.exp(beta) - sp.exp(beta * u))
    quadratic = {kf(u): c0 + c1 * u + c2 * u**2, k1: c0 + c1 + c2}
    at_one = sp.simplify(sp.limit(f.subs(quadratic), u, 1))
    lambda_bar = agazzi_two_point().lambda_bar.subs({k1: c0 + c1 + c2, k1p: c1 + 2 * c2})
    der.check(
        "F(1) = -lambda_bar (limit for a generic quadratic kernel)",
        sp.simplify(at_one + lambda_bar) == 0,
        f"F(1) = {at_one}",
    )
    secant = g.subs(kf(u), k1 - (1 - u) * kappa) / (1 - u)
    regular = k1 * ((d - 2 - u) + beta * (1 - u) * (1 + u)) - kappa * (d - 2 + u**2 - beta * u * (1 - u**2))
    der.check(
        "G(u)/(1-u) = k(1)((d-2-u) + beta z (1+u)) - kappa q(u) with k = k(1) - z kappa",
        sp.simplify(secant - regular) == 0,
    )
    ratio = (1 - u**2) * sp.exp(beta * u) / (sp.exp(beta) - sp.exp(beta * u))
    der.check(
        "(1-u^2) e^{beta u}/(e^beta - e^{beta u}) = z(2-z)/(e^{beta z} - 1), z = 1 - u",
        sp.simplify(ratio.subs(u, 1 - z) - z * (2 - z) / (sp.exp(beta * z) - 1)) == 0,
    )
    bpos = sp.Symbol("b", positive=True)
    sup = sp.limit(z * (2 - z) / (sp.exp(bpos * z) - 1), z, 0, "+")
    der.check(
        "its supremum is the limit 2/beta at z -> 0 (so eps = 2 beta (2/beta) = 4 for V = -I)",
        sp.simplify(sup - 2 / bpos) == 0,
        f"limit {sup}",
    )
    rows = []
    for act, dim, sig in configs:
        enclosure = lambda_bar_prime(act, dim, sig, sig, beta_value)
        grid_value = _lambda_bar_prime_on_grid(act, dim, sig, beta_value)
        width = float(enclosure.upper - enclosure.lower)
        ok = (
            width < 1e-6 and grid_value <= float(enclosure.upper) + 1e-9 and grid_value >= float(enclosure.lower) - 1e-4
        )
        der.check(
            f"lambda_bar' for {act}, d={dim}, sigma={sig}: bracket < 1e-6 and consistent with a grid of F",
            ok,
            f"[{float(enclosure.lower):.9g}, {float(enclosure.upper):.9g}] "
            f"({'rigorous' if enclosure.rigorous else 'given quadrature error estimates'}); grid {grid_value:.9g}",
        )
        rows.append(
            {
                "activation": act,
                "d": dim,
                "sigma": sig,
                "lambda_bar_prime": [float(enclosure.lower), float(enclosure.upper)],
                "argmin_u": enclosure.argmin,
                "rigorous": enclosure.rigorous,
            }
        )
    der.results["lambda_bar_prime"] = rows
    return der


def _lambda_bar_prime_on_grid(act: str, dim: int, sig: float, beta_value: float) -> float:
    """-min F over a grid of u in [-1, 1) and F(1) = -lambda_bar: a lower bound of lambda_bar' up to float rounding
    (the certified enclosure's cross-check)."""
    k = kernel(KernelSpec(act, dim, sig, sig))
    grid = np.linspace(-1.0, 1.0 - 1e-6, 200001)
    gv = k(grid) * (dim - 2 + grid**2 - beta_value * grid * (1 - grid**2)) + k.k1 * (
        beta_value * (1 - grid**2) - (dim - 1) * grid
    )
    fv = beta_value * np.exp(beta_value * grid) * gv / (np.exp(beta_value) - np.exp(beta_value * grid))
    fv = np.append(fv, -activation_constants(act, dim, sig, sig)["lambda_bar"])
    return float(-np.min(fv))


def latent_diffusion() -> Derivation:
    """Section 4: variance ODEs, closed forms, capped minimiser, Frechet formula, monotonicity, switching times."""
    der = Derivation(
        "latent_diffusion",
        "Gaussian latent diffusion: decoded variance, W2 distance, its sign in t, "
        "switching times and the capped score (docs/models.md section 4)",
    )
    _latent_variances(der)
    _latent_distance(der)
    return der


def _latent_variances(der: Derivation) -> None:
    """The forward and backward variances (SDE, probability-flow ODE, capped) and the capped score's minimiser."""
    forward = ld.forward_variance()
    der.results["forward variance"] = forward
    der.check(
        "forward OU variance from dsolve equals a_u^2 + b_u^2 s^2",
        sp.simplify(forward - (1 - sp.exp(-2 * ld.u) + sp.exp(-2 * ld.u) * ld.s**2)) == 0,
    )
    der.results["backward SDE variance rate"] = ld.variance_rate(ld.m)
    der.results["probability-flow variance rate"] = ld.variance_rate(ld.m, flow=True)
    for flow, capped, label in (
        (False, False, "SDE"),
        (True, False, "probability-flow ODE"),
        (False, True, "capped SDE"),
    ):
        der.results[f"{label} variance"] = ld.backward_variance(flow, capped)
        der.check(
            f"{label}: the closed form solves its variance ODE with v(0) = v0", ld.solves_variance_ode(flow, capped)
        )
    exact_start = ld.backward_variance().subs(ld.v0, 1 + sp.exp(-2 * ld.T) * (ld.q - 1))
    der.check(
        "started from the model's law at T, the SDE reproduces tau2(T - t)",
        sp.simplify(exact_start - (1 + sp.exp(-2 * (ld.T - ld.t)) * (ld.q - 1))) == 0,
    )
    minimiser, convex = ld.capped_score_minimiser()
    der.results["score-matching loss"] = ld.score_matching_loss()
    der.results["unconstrained minimiser"] = minimiser
    der.check(
        "the loss is convex in m and minimised at 1/tau2 (so the capped minimiser is min(C, 1/tau2))",
        convex and sp.simplify(minimiser - 1 / (1 + sp.exp(-2 * ld.u) * (ld.q - 1))) == 0,
    )


def _latent_distance(der: Derivation) -> None:
    """The Frechet distance, its derivative in t for the exact score, and the plug-in criterion from the convexity of
    f_d."""
    a, b = sp.symbols("a1:4", positive=True), sp.symbols("b1:4", positive=True)
    der.check(
        "Frechet distance of diagonal Gaussians is sum (sqrt(a_j) - sqrt(b_j))^2",
        sp.simplify(ld.frechet_diagonal(list(a), list(b)) - sum((sp.sqrt(x) - sp.sqrt(y)) ** 2 for x, y in zip(a, b)))
        == 0,
    )
    der.results["exact-score derivative"] = ld.exact_derivative_closed_form()
    der.check(
        "d/dt (sqrt(v) - s)^2 = -2 (1 - s^2)^2 (1 - e^{-2u}) e^{-2u} / (sqrt(v) (sqrt(v) + s)) <= 0 (exact score)",
        sp.simplify(ld.exact_term_derivative() - ld.exact_derivative_closed_form()) == 0,
    )
    until = ld.helpful_until()
    der.results["u_j (coordinate j helps for u < u_j)"] = until
    der.check("u_j solves tau2(u_j) = 4 s^2", sp.simplify((1 + sp.exp(-2 * until) * (ld.s**2 - 1)) - 4 * ld.s**2) == 0)
    x, term = ld.plugin_remaining_term()
    der.results["plug-in term f_j(x), x = a^2 of the remaining time"] = term
    der.check(
        "the plug-in run from the model's law has decoded variance q (1 - x) + x, x = 1 - e^{-2u}",
        sp.simplify(ld._gaussian_model_variance(ld.q, ld.u).subs(sp.exp(-2 * ld.u), 1 - x) - (ld.q * (1 - x) + x)) == 0,
    )
    second = sp.simplify(sp.diff(term, x, 2))
    der.results["f_j''(x)"] = second
    der.check(
        "f_j''(x) = s (1 - q)^2 / (2 (q (1 - x) + x)^(3/2)) >= 0: f_d is convex, so monotone iff f_d'(0) >= 0",
        sp.simplify(second - ld.s * (1 - ld.q) ** 2 / (2 * (ld.q * (1 - x) + x) ** sp.Rational(3, 2))) == 0,
    )
    der.check(
        "f_j'(0) equals the paper's criterion term (1 - s/sigma_hat)(1 - sigma_hat^2)",
        sp.simplify(sp.diff(term, x).subs(x, 0) - ld.plugin_criterion_term()) == 0,
    )
    turn = ld.plugin_turning_time()
    der.results["plug-in turning time"] = turn
    der.check(
        "the plug-in path meets s^2 at its turning time",
        sp.simplify((1 + sp.exp(-2 * turn) * (ld.q - 1)) - ld.s**2) == 0,
    )


ALL = (
    generator_in_coordinates,
    layer_consistency,
    fedorov_overlap,
    boundary_analysis,
    antipodal_probability,
    hybrid_dichotomy,
    quadratic_form,
    agazzi_exponents,
    one_step_crosschecks,
    activation_kernels,
    energy_rate,
    latent_diffusion,
)
