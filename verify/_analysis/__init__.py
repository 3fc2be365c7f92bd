"""What the limits imply: the overlap diffusion of two tokens (``overlap``), its boundary exponents and critical
parameters (``boundary``), where it ends (``hitting``), model A's kernel constants (``kernels``) and two-point
motion (``two_point``), the random quadratic form's overlap (``quadratic_form_overlap``), and the covariance limits of
the shaped MLP and the 1/sqrt(depth) ResNet (``covariance``) and of the shaped attention and transformer blocks
(``shaped_attention``).
"""

from __future__ import annotations

from .boundary import (
    boundary_exponents,
    critical_beta_closed_form,
    critical_eps2_closed_form,
    fedorov_ends,
    hybrid_ends,
)
from .covariance import ResidualNetwork, ShapedMLP, correlation_ode, correlation_sde
from .hitting import p_antipodal, p_antipodal_double, p_antipodal_gauss, scale_decomposition
from .kernels import (
    GAUSS_HERMITE_NODES,
    Kernel,
    KernelSpec,
    activation_constants,
    activation_table,
    deficit_quadrature,
    exponents,
    format_activation_table,
    k_one,
    k_one_prime,
    k_one_quadrature,
    kernel,
    kernel_derivative_quadrature,
)
from .overlap import change_variable, overlap_sde, pair_overlap_sde, rho
from .quadratic_form_overlap import QuadraticFormResults, quadratic_form_results
from .shaped_attention import (
    ShapedAttention,
    ShapedTransformer,
    attention_drift_closed_form,
    attention_noise_closed_form,
)
from .two_point import agazzi_two_point, k1, k1p

__all__ = [
    "GAUSS_HERMITE_NODES",
    "Kernel",
    "KernelSpec",
    "QuadraticFormResults",
    "ResidualNetwork",
    "ShapedAttention",
    "ShapedMLP",
    "ShapedTransformer",
    "attention_drift_closed_form",
    "attention_noise_closed_form",
    "activation_constants",
    "activation_table",
    "agazzi_two_point",
    "boundary_exponents",
    "change_variable",
    "correlation_ode",
    "correlation_sde",
    "critical_beta_closed_form",
    "critical_eps2_closed_form",
    "deficit_quadrature",
    "exponents",
    "fedorov_ends",
    "format_activation_table",
    "hybrid_ends",
    "k1",
    "k1p",
    "k_one",
    "k_one_prime",
    "k_one_quadrature",
    "kernel",
    "kernel_derivative_quadrature",
    "overlap_sde",
    "p_antipodal",
    "p_antipodal_double",
    "p_antipodal_gauss",
    "pair_overlap_sde",
    "quadratic_form_results",
    "rho",
    "scale_decomposition",
]
