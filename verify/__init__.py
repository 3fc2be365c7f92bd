"""The symbolic and rigorous side: derivations (sympy), certified numbers (python-flint, mpmath).

Public interface (names fixed):
    overlap_sde(model="fedorov", tokens=2) -> (drift, diffusion_squared) in rho, beta, d, sigma
    critical_beta(d) -> certified (lo, hi), mpmath numbers
    boundary_exponents(d, beta, sigma=1) -> growth exponents of 1 - rho and 1 + rho
    p_antipodal(d, beta, rho0, dps=30) -> mpmath number
    critical_eps2(beta) -> the hybrid model's critical eps^2
    activation_constants(act, d, sigma_u, sigma_w) -> {k1, k1_prime, lambda_1, lambda_bar} (model A)
    lambda_bar_prime(act, d, sigma_u, sigma_w, beta) -> certified enclosure of the energy decay rate
    one_step_limit(step, tokens, dim, noise) -> StepLimit: the limit SDE one step of a user's layer map defines
        (several independent noises: a tuple or dict of noises; cached)
    check_limit(step, drift, diffusion, tokens, dim, noise) -> LimitComparison: derived against claimed
        coefficients, the entries that differ most side by side
    ldm_distance(variances, t, d, T=2.0, variances_hat=None) -> squared W2 of the latent diffusion sample (mpmath)
    ldm_switching_times(variances, T=2.0) -> [t_1, ..., t_{D+1}] (latent dimension d optimal on (t_d, t_{d+1}))
"""

from __future__ import annotations

import mpmath
import sympy as sp

from ._analysis import (
    KernelSpec,
    activation_constants,
    boundary_exponents,
    critical_eps2_closed_form,
    overlap_sde,
    p_antipodal,
)
from ._common import working_digits
from ._models import LimitComparison, StepLimit, check_limit, one_step_limit
from ._models import beta as _beta
from ._rigorous import critical_beta, lambda_bar_prime, ldm_distance, ldm_switching_times


def critical_eps2(beta_value, dps: int = 30):
    """The hybrid model's critical eps^2(beta): collapse a.s. below it, antipodal a.s. above it.

    A sympy expression for a symbolic beta, an mpmath number (``dps`` digits) for a number.
    """
    expr = critical_eps2_closed_form().subs(_beta, beta_value)
    if isinstance(beta_value, sp.Basic) and beta_value.free_symbols:
        return expr
    if not mpmath.isfinite(beta_value):
        raise ValueError(f"beta must be finite, got {beta_value!r}")
    with working_digits(dps):
        return mpmath.mpf(sp.N(expr, dps + 5))


__all__ = [
    "KernelSpec",
    "LimitComparison",
    "StepLimit",
    "activation_constants",
    "boundary_exponents",
    "check_limit",
    "critical_beta",
    "critical_eps2",
    "lambda_bar_prime",
    "ldm_distance",
    "ldm_switching_times",
    "one_step_limit",
    "overlap_sde",
    "p_antipodal",
]
