"""The proportional limit's three models (joint-limits), each at the state it is judged at, their near misses (none a
symmetry of the network's law: a shaping, temperature, branch weight or depth ratio 10% off, the diffusion scaled or
without the skip's cross term, the infinite-width ODE) and their local judgements on one set of samples, which the
joint-limits study reports as findings and the power study (and mutant-seeds over seeds) as claims; and what a near
miss moves each check by (``check_effects``: in power, whether it is a claim)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._models import (
    CovarianceSDE,
    ResidualBlock,
    ShapedAttentionBlock,
    ShapedMLPBlock,
    covariance_limit,
    covariance_sde,
    upper,
)
from .._statistics import FAMILY_ALPHA, Check
from .covariance_local import WidthLadder, covariance_local_checks, scale_norm, units

CORRELATED = np.array([[1.0, 0.5], [0.5, 1.0]])
MLP = ShapedMLPBlock(2, c_plus=1.5, c_minus=-1.5, rate=1.0)
RESNET = ResidualBlock(2, "relu")
ATTENTION = ShapedAttentionBlock(2, tau_0=0.5)
WIDTHS = (32, 64, 128)
MODELS = {  # each model and the state it is judged at (the shaped MLP's drift is largest beside its noise at rho = 0)
    "shaped MLP": (MLP, np.eye(2)),
    "ResNet": (RESNET, CORRELATED),
    "shaped attention": (ATTENTION, CORRELATED),
}


def wishart(v: np.ndarray, factor: float = 1.0) -> np.ndarray:
    """Sigma_ab,cd = factor (V_ac V_bd + V_ad V_bc) over the coordinates (0,0), (0,1), (1,1): (k, 3, 3)."""
    pairs = [(0, 0), (0, 1), (1, 1)]
    rows = [[v[:, a, c] * v[:, b, d] + v[:, a, d] * v[:, b, c] for c, d in pairs] for a, b in pairs]
    return factor * np.stack(rows, axis=-1).transpose(1, 0, 2)


def scaled(claim: CovarianceSDE, name: str, drift: float = 1.0, diffusion: float = 1.0) -> CovarianceSDE:
    return covariance_sde(lambda v: drift * claim.drift(v), lambda v: diffusion * claim.diffusion(v), 2, name)


def near_misses() -> dict[str, dict[str, CovarianceSDE]]:
    """Each model's near misses (module docstring)."""
    mlp, res, att = covariance_limit(MLP), covariance_limit(RESNET), covariance_limit(ATTENTION)
    unshaped = covariance_limit(replace(MLP, c_plus=0.0, c_minus=0.0))
    g2 = ATTENTION.gamma**2

    def no_cross_term(v: np.ndarray) -> np.ndarray:  # gamma^4 for gamma^2 (2 - gamma^2): the skip's 2 lambda^2 gamma^2
        return att.diffusion(v) - (g2 * (2 - g2) - g2**2) * wishart(v)

    return {
        "shaped MLP": {
            "c_+- x 1.1": covariance_limit(replace(MLP, c_plus=1.65, c_minus=-1.65)),
            "c_+- x 0.9": covariance_limit(replace(MLP, c_plus=1.35, c_minus=-1.35)),
            "Sigma x 1.1": scaled(mlp, "Sigma x 1.1", diffusion=1.1),
            "no shaping drift": unshaped,
            "infinite-width ODE": scaled(mlp, "ODE", diffusion=0.0),
        },
        "ResNet": {
            "T x 1.1": covariance_limit(replace(RESNET, depth_ratio=1.1)),
            "T x 0.9": covariance_limit(replace(RESNET, depth_ratio=0.9)),
            "linear branch": covariance_limit(replace(RESNET, branch="linear")),
            "a Wishart diffusion": covariance_sde(res.drift, wishart, 2, "Wishart diffusion"),
        },
        "shaped attention": {
            "tau_0 x 1.1": covariance_limit(replace(ATTENTION, tau_0=0.55)),
            "tau_0 x 0.9": covariance_limit(replace(ATTENTION, tau_0=0.45)),
            "gamma^2 x 1.1": covariance_limit(replace(ATTENTION, gamma=0.55**0.5)),
            "no skip cross term": covariance_sde(att.drift, no_cross_term, 2, "no skip cross term"),
            "infinite-width ODE": scaled(att, "ODE", diffusion=0.0),
        },
    }


def width_judgements(
    samples: int, target: float, seed: int, alpha: float, key: tuple[int, ...]
) -> dict[str, tuple[list[Check], dict[str, list[Check]]]]:
    """Per model, the local checks of its true claim (at ``alpha``) and of each near miss (at ``FAMILY_ALPHA``), all on
    one set of samples (``samples`` a width, streams ``key`` and the model's index)."""
    judged, wrong_claims = {}, near_misses()
    for index, (model, (block, state)) in enumerate(MODELS.items()):
        state_name = f"rho = {state[0, 1] / np.sqrt(state[0, 0] * state[1, 1]):g}"
        ladders = {state_name: WidthLadder(WIDTHS)}
        args = (samples, target, seed, (*key, index))

        def judge(claim: CovarianceSDE, label: str, level: float) -> list[Check]:
            config = {"model": model, "sde": label}
            return covariance_local_checks(block, claim, {state_name: state}, ladders, *args, level, 0.9, config)

        true = judge(covariance_limit(block), "derived", alpha)
        judged[model] = true, {name: judge(wrong, name, FAMILY_ALPHA) for name, wrong in wrong_claims[model].items()}
    return judged


def check_effects(limit: CovarianceSDE, claim: CovarianceSDE, state: np.ndarray) -> dict[str, float]:
    """What the checks of ``claim`` at ``state`` estimate for a block whose limit is ``limit`` (a near miss's effect,
    beside their resolutions), in each check's units: the drift's and the covariance's errors (limit less claim)
    projected on the claim's (``drift_scale``, ``diffusion_scale``; none for a zero claim) and their largest
    component (``drift``, ``diffusion``)."""
    b, b_limit = (upper(sde.drift(state[None])[0]) for sde in (claim, limit))
    sigma, sigma_limit = (sde.diffusion(state[None])[0] for sde in (claim, limit))
    rows = np.triu_indices(sigma.shape[0])
    noise_unit, cov_unit = units(sigma, state)
    effects = {
        "drift": float(np.max(np.abs(b_limit - b))) / noise_unit,
        "diffusion": float(np.max(np.abs(sigma_limit - sigma)[rows])) / cov_unit,
    }
    if np.any(b):
        effects["drift_scale"] = float((b_limit - b) @ b / scale_norm(b, noise_unit))
    if np.any(sigma[rows]):
        effects["diffusion_scale"] = float((sigma_limit - sigma)[rows] @ sigma[rows] / scale_norm(sigma[rows], 0.0))
    return effects
