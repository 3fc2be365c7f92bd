"""The models: each layer map beside its limit SDE (``fedorov``, ``hybrid``, ``softmax_hybrid``, ``agazzi``,
``quadratic_form``, ``latent_diffusion``), a user's PyTorch block with fresh weights at every layer (``torch_block``)
and its Ito limit by automatic differentiation (``autodiff_limit``), a library's layer as such a block
(``library_block``) and three small Hugging Face decoder layers so built (``hugging_face``), the registry of the models
that declare their claims, each in one module with its examples (``registry``: it also names any model module this
docstring does not), model F's exact in-law samplers
(``fedorov_reduced``, ``fedorov_overlap_chain``), model A's MLP fields (``mlp_field``), and what they share: the
interface and the claims a model declares (``protocols``), the laws of the common noise and the one factor of a
covariance (``noise``), softmax attention (``attention``) and the derived Ito drift of a normalised step
(``normalised_step``), and the Ito-Stratonovich correction of a claim's drift (``ito_correction``); and the textbook
SDEs with known solutions, exact and Euler steps, on which every check is calibrated (``textbook_steps``); and the
blocks indexed by width whose observed state is a covariance matrix (``width_blocks``) with their covariance SDEs
(``covariance_limits``), and a user's MLP block from a shaped activation with its covariance SDE by automatic
differentiation (``activation_limit``)."""

from __future__ import annotations

from .activation_limit import ActivationBlock, activation_block, activation_limit
from .agazzi import ATTENTION, AgazziModel, AgazziSDE, attention_half_step
from .attention import (
    attention_average,
    attention_scores,
    normalise,
    softmax_weights,
    tangent_projection,
)
from .autodiff_limit import AutodiffLimit, derive_limit, noise_quadratic
from .covariance_limits import CovarianceSDE, coordinates, covariance_limit, covariance_sde, upper
from .fedorov import FedorovModel, FedorovSDE
from .fedorov_overlap_chain import FrameNoise, TwoTokenOverlapChain, plane_coordinates
from .fedorov_reduced import (
    ReducedFedorov,
    ReducedFedorovSDE,
    gram_factor,
    two_token_factor,
    two_token_step,
)
from .hugging_face import hugging_face_blocks, hugging_face_configs, hugging_face_layers
from .hybrid import HybridModel, HybridSDE
from .latent_diffusion import (
    LatentSampler,
    discrete_variances,
    distance_table,
    joint_optimum,
    plugin_variances,
)
from .library_block import wrap_library_layer
from .mlp_field import (
    FreshFeatureField,
    FrozenFeatureField,
    GaussianField,
    half_squared_distances,
    preactivations,
)
from .noise import (
    ENTRY_LAWS,
    FACTOR_FORMS,
    CommonNoise,
    JointNoise,
    joint_noise,
    matrix_noise,
    psd_factor,
    scalar_noise,
    standard_entries,
)
from .protocols import CONFORMANCE, ClaimingModel, Claims, LayerMap, LimitSDE, exemptions, in_law_only
from .quadratic_form import QuadraticFormModel, QuadraticFormSDE
from .registry import MODEL_MODULES, MODELS, registered
from .softmax_hybrid import SoftmaxHybridModel, SoftmaxHybridSDE
from .textbook_steps import TextbookProblem, TextbookStep, textbook_problems
from .torch_block import TorchBlockLayer, torch_layer_map
from .width_blocks import (
    ResidualBlock,
    ShapedAttentionBlock,
    ShapedMLPBlock,
    ShapedTransformerBlock,
    UserWidthBlock,
    WidthBlock,
    covariance,
    width_block,
)

__all__ = [
    "ActivationBlock",
    "activation_block",
    "activation_limit",
    "CovarianceSDE",
    "coordinates",
    "covariance_limit",
    "covariance_sde",
    "upper",
    "ResidualBlock",
    "ShapedAttentionBlock",
    "ShapedMLPBlock",
    "ShapedTransformerBlock",
    "UserWidthBlock",
    "WidthBlock",
    "covariance",
    "width_block",
    "ATTENTION",
    "AgazziModel",
    "AutodiffLimit",
    "derive_limit",
    "noise_quadratic",
    "AgazziSDE",
    "CONFORMANCE",
    "ClaimingModel",
    "Claims",
    "CommonNoise",
    "ENTRY_LAWS",
    "FACTOR_FORMS",
    "FedorovModel",
    "FedorovSDE",
    "FrameNoise",
    "FreshFeatureField",
    "FrozenFeatureField",
    "GaussianField",
    "HybridModel",
    "HybridSDE",
    "JointNoise",
    "LatentSampler",
    "LayerMap",
    "LimitSDE",
    "MODELS",
    "MODEL_MODULES",
    "registered",
    "QuadraticFormModel",
    "QuadraticFormSDE",
    "ReducedFedorov",
    "ReducedFedorovSDE",
    "SoftmaxHybridModel",
    "SoftmaxHybridSDE",
    "TextbookProblem",
    "TextbookStep",
    "TorchBlockLayer",
    "TwoTokenOverlapChain",
    "attention_average",
    "attention_half_step",
    "attention_scores",
    "discrete_variances",
    "distance_table",
    "joint_optimum",
    "gram_factor",
    "half_squared_distances",
    "hugging_face_blocks",
    "hugging_face_configs",
    "hugging_face_layers",
    "joint_noise",
    "matrix_noise",
    "normalise",
    "plane_coordinates",
    "plugin_variances",
    "preactivations",
    "psd_factor",
    "textbook_problems",
    "scalar_noise",
    "softmax_weights",
    "standard_entries",
    "exemptions",
    "in_law_only",
    "tangent_projection",
    "torch_layer_map",
    "wrap_library_layer",
    "two_token_factor",
    "two_token_step",
]
