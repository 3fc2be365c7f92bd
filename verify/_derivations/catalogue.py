"""Every derivation of the symbolic side with its cross-checks, in report order (``ALL``): model F's (``model_f``),
the random quadratic form's and the Monte Carlo one-step cross-checks (here), model A's (``model_a``), the latent
diffusion model's (``stopping``), the covariance limits of the shaped MLP and the 1/sqrt(depth) ResNet
(``covariance``) and of the shaped attention and transformer blocks (``shaped_attention``).

Each function derives one result from the models' layer maps and checks it another way (brute force in
coordinates, a second quadrature, interval certification, a Monte Carlo one-step estimate, or the
formula a source paper states). A check's status is ``verified`` or ``failed``; nothing is skipped.
"""

from __future__ import annotations

import sympy as sp

from .._analysis import quadratic_form_results, rho
from .._common import Verdict
from .covariance import residual_network_covariance, shaped_mlp_covariance
from .crosscheck import CHECKED, TEST_FUNCTIONS, one_step_check
from .derivation import Derivation
from .model_a import activation_kernels, agazzi_exponents, energy_rate
from .model_f import (
    antipodal_probability,
    boundary_analysis,
    fedorov_overlap,
    generator_in_coordinates,
    hybrid_dichotomy,
    layer_consistency,
)
from .shaped_attention import shaped_attention_covariance, shaped_transformer_covariance
from .stopping import latent_diffusion


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
    shaped_mlp_covariance,
    residual_network_covariance,
    shaped_attention_covariance,
    shaped_transformer_covariance,
)
