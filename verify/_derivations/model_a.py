"""Model A's derivations (docs/models.md section 2): the two-point exponents lambda_1 and lambda_bar, the activation
kernels k(1) and k'(1) by two quadratures (and ReLU's by conditioning), and the synchronisation bound's F(u) with the
certified lambda_bar'."""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

from .._analysis import (
    GAUSS_HERMITE_NODES,
    KernelSpec,
    activation_constants,
    activation_table,
    agazzi_two_point,
    k1,
    k1p,
    k_one,
    k_one_prime,
    k_one_quadrature,
    kernel,
    kernel_derivative_quadrature,
)
from .._calculus import d
from .._common import working_digits
from .._models import beta
from .._rigorous import lambda_bar_prime
from .derivation import Derivation


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
