"""Two limit SDEs compared coefficient by coefficient at states, deterministically (no sampling).

For a derived limit (``convergence.derive_limit``) against a claim, or any two ``LimitSDE`` on the same noise: at
each state x the drifts b(x) and the diffusions' covariances G(x) C G(x)^T (C the noise's covariance per unit time;
G is read off by applying the diffusion to each basis increment) must agree to ``rtol`` relative to the larger
coefficient. The covariance is what the law of the limit depends on (a claim with its noise rotated is the same
limit in law, and passes); whether G itself agrees, which a strong check needs, is reported beside it. Both are
exact computations to rounding, so the checks have no false-failure rate and no resolution: their tolerance is
rounding (1e-8 by default; a block computing in float32 needs about 1e-5).
"""

from __future__ import annotations

import numpy as np

from verify._common import check_real

from .._models import LayerMap, LimitSDE
from .._statistics import FAIL, PASS, Check
from .arguments import check_protocol, check_title, name_of
from .local import resolve_states, where_it_lives
from .outcome import Outcome, timed
from .staged import USER_KEY

SHOWN = 4  # components of each coefficient printed in a check's note


@timed
def compare_limits(
    derived: LimitSDE,
    claim: LimitSDE,
    states: tuple[str, ...] | dict[str, np.ndarray] = ("uniform", "merged", "antipodal", "near merged"),
    *,
    rtol: float = 1e-8,
    atol: float = 1e-14,
    seed: int = 0,
    title: str = "limits compared",
) -> Outcome:
    """``drift`` and ``diffusion`` checks per state (module docstring): pass when the largest difference is at most
    ``rtol`` times the larger coefficient's largest entry plus ``atol`` (rounding of a coefficient that is 0), else
    fail. The two limits may be driven by differently laid out noises (a claim's d x d matrix noise of scale sigma,
    a derived limit's packed parameters): the covariances compare each with its own scale; G itself only when the
    noises have the same size.

    ``states``: names of ``convergence._experiments.local_states.STATES`` (drawn from ``seed``; for a limit derived
    from a layer map, moved to where the map lives as by ``check_local_consistency``, ``where_it_lives``) or a
    mapping name -> array (tokens, d), e.g. states on a LayerNorm sphere for a block that lives there."""
    check_protocol("derived", derived, LimitSDE)
    check_protocol("claim", claim, LimitSDE)
    if (derived.tokens, derived.dim) != (claim.tokens, claim.dim):
        raise ValueError(
            f"claim must have the derived limit's tokens and dim {(derived.tokens, derived.dim)}, got "
            f"{(claim.tokens, claim.dim)}"
        )
    rtol = check_real("rtol", rtol, minimum=0.0)
    atol = check_real("atol", atol, minimum=0.0)
    chosen = resolve_states(derived.tokens, derived.dim, states, seed, (USER_KEY, 4))  # the local check's states
    layer = getattr(derived, "model", None)
    if not isinstance(states, dict) and isinstance(layer, LayerMap):
        chosen = {name: where_it_lives(layer, x, name) for name, x in chosen.items()}
    config = {"derived": name_of(derived), "claim": name_of(claim)}
    checks = []
    for name, x in chosen.items():
        b_derived, b_claim = derived.drift(x[None])[0], claim.drift(x[None])[0]
        # G per unit normal entry: each raw increment carries its noise's scale (1 for a packed joint noise)
        g_derived = derived.noise.scale * diffusion_matrix(derived, x)
        g_claim = claim.noise.scale * diffusion_matrix(claim, x)
        same_size = g_derived.shape == g_claim.shape
        pathwise = _relative(g_derived, g_claim) if same_size else float("inf")
        kind = (
            ("the same map of the noise" if pathwise <= rtol else "equal in law at most")
            if same_size
            else "noises of different sizes: compared in law"
        )
        checks.append(_equal_check("drift", b_derived, b_claim, rtol, atol, {**config, "state": name}, ""))
        checks.append(
            _equal_check(
                "diffusion",
                g_derived @ g_derived.T,
                g_claim @ g_claim.T,
                rtol,
                atol,
                {**config, "state": name},
                f"covariance G C G^T per unit time; G itself differs by {pathwise:.3g} (relative: {kind})",
            )
        )
    return Outcome(check_title(title), checks, [], {"states": list(chosen), "rtol": rtol}, seed)


def diffusion_matrix(sde: LimitSDE, x: np.ndarray) -> np.ndarray:
    """G(x) as a (tokens d) x (noise size) matrix: the diffusion applied to each basis increment at the state x."""
    size = int(np.prod(sde.noise.shape, dtype=int))
    basis = np.eye(size).reshape(size, *sde.noise.shape)
    out = sde.diffusion(np.broadcast_to(x, (size, *x.shape)).copy(), basis)
    return out.reshape(size, -1).T


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


def _equal_check(
    name: str, derived: np.ndarray, claimed: np.ndarray, rtol: float, atol: float, config: dict, note: str
) -> Check:
    finite = bool(np.all(np.isfinite(derived)) and np.all(np.isfinite(claimed)))
    error = _relative(derived, claimed) if finite else float("nan")
    difference = float(np.max(np.abs(derived - claimed), initial=0.0)) if finite else float("nan")
    shown = (
        f"derived {np.array2string(derived.ravel()[:SHOWN], precision=6)}, claimed "
        f"{np.array2string(claimed.ravel()[:SHOWN], precision=6)} (first {SHOWN} entries)"
    )
    verdict = PASS if finite and (error <= rtol or difference <= atol) else FAIL
    return Check(
        name,
        0.0,
        error,
        (error, error),
        verdict,
        config,
        rtol,
        1.0,
        0.0,
        note="; ".join(
            filter(
                None,
                [
                    f"largest difference / largest entry (tolerance {rtol:g}; or the "
                    f"difference itself within {atol:g})",
                    note,
                    shown,
                ]
                + ([] if finite else ["non-finite coefficient: cannot pass"]),
            )
        ),
        target=rtol,
    )
