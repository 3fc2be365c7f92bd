"""The empirical measure against its limit computed another way (not a second system of the same code).

Two systems built by the same code on the same noise agree whatever the code does (``convergence._experiments.chaos``
compares such pairs for the *rate*). The limit itself is checked here against the mathematics of the stochastic PDE:

``zonal_limit``  (no attention, v = 0). Given the noise the tokens are conditionally i.i.d.; averaged over the
    noise each one is a Brownian motion on S^{d-1} at rate k(1) (the field's variance at a point, ``verify``'s
    kernel constant), so for the zonal harmonics phi_1 = <x, e> and phi_2 = <x, e>^2 - 1/d
        E[phi_l(x_T) | x_0] = exp(-lambda_l T) phi_l(x_0),   lambda_l = k(1) l (l + d - 2) / 2.
    Per path: r = <mu_T, phi_l> - exp(-lambda_l T) <mu_0, phi_l> - C_l (the initial value is a control variate),
    C_l = sum_k exp(-lambda_l (T - t_k)) <mu_{t_k}, <grad phi_l, G(x; X_k) dW_k>> the martingale part of
    exp(lambda_l t) <mu_t, phi_l>, summed between records and weighted at the record interval's midpoint (any
    deterministic weights keep E C_l = 0; see weak_form).
``weak_form``  (with attention). The weak form of the SPDE for f(x) = <x, e>, in expectation (the martingale
    part has mean 0, and f is linear in R^d so the Ito term of the generator is the drift's):
        E<mu_T, f> - <mu_0, f> = int_0^T E<mu_t, <e, b(x; mu_t)>> dt,
    b the claimed mean-field drift (model A: v P_x a_mu(x) - ((d-1)/2) k(1) x; model F:
    -((d-1)/2) sigma^2 |a_mu(x)|^2 x). Per path: r = <mu_T, f> - <mu_0, f> - trapezoid of <mu_t, <e, b>> over the
    recorded times - C, with the control variate C = sum_k <mu_{t_k}, <e, G(x; X_k) dW_k>> over the layers, G the
    claimed limit's noise coefficient (``limit_sde().diffusion``). E C = 0 exactly, for any G, because the step's
    increment dW_k has mean 0 and is independent of the state X_k; C carries the O(1) martingale part of
    <mu_T, f> - <mu_0, f>, so r keeps only the O(h^{1/2}) rest (the variance of the per-path estimate falls about
    100-fold at h = 1/32).

Both run the layer map at steps h and 2h on one Brownian path; the estimate is the Richardson combination
2 r_h - r_2h (O(h) bias removed; the trapezoid's O(dt^2) and the remaining O(h^2) are below the resolution, which
every check states). Initial tokens are i.i.d. on a cap around e (uniform tokens would make E<mu, phi> = 0 by
symmetry and the check blind). The claimed drift is a parameter, so a wrong mean-field drift is judged on the same
recorded data. ``mean_field_section`` runs both for the systems of a ``MeanFieldSection`` (the chaos study's, which
the power study judges its near misses on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from verify._analysis import KernelSpec

from .._models import AgazziModel, FedorovModel, GaussianField, LayerMap, tangent_projection
from .._paths import PathStreams, RecordGrid, record_at_two_steps
from .._statistics import (
    FAIL,
    FAMILY_ALPHA,
    INCONCLUSIVE,
    PASS,
    Check,
    effect_check,
    first_nonfinite,
    z_confidence,
    z_value,
)

CAP_SPREAD = 0.7  # initial tokens normalise(e + CAP_SPREAD z): E<x_0, e> about 0.8 at d = 5

Drift = Callable[[np.ndarray], np.ndarray]  # the claimed mean-field drift b(x; mu) for tokens (paths, n, d)


def cap_initial(streams: PathStreams, tokens: int, dim: int) -> np.ndarray:
    """I.i.d. tokens normalise(e + CAP_SPREAD z), e the first basis vector, z standard normal: (paths, n, d)."""
    e = np.eye(dim)[0]
    x = streams.initial(lambda rng, m: e + CAP_SPREAD * rng.standard_normal((m, tokens, dim)))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def zonal_rates(k1: float, dim: int) -> np.ndarray:
    """lambda_1, lambda_2 = k(1) l (l + d - 2) / 2: the decay rates of the zonal harmonics."""
    return np.array([k1 * degree * (degree + dim - 2) / 2 for degree in (1, 2)])


def zonal_means(x: np.ndarray) -> np.ndarray:
    """<mu, phi_1>, <mu, phi_2> per path: (paths, 2)."""
    u = x[..., 0]
    return np.stack([u.mean(-1), (u * u - 1.0 / x.shape[-1]).mean(-1)], axis=-1)


def noise_martingale(
    layer_map: LayerMap, gradient: Callable[[np.ndarray], np.ndarray]
) -> Callable[[np.ndarray, np.ndarray, float], np.ndarray]:
    """The martingale increments of <mu, f_j> for test functions with grad f_j(x) = g_j(x) e (e the first basis
    vector): <mu, g_j(x) <e, G(x; X) dW>> per path, (paths, m), ``gradient(x)`` giving g_j at the tokens (paths, n, m)
    and G the claimed limit's noise coefficient (``limit_sde().diffusion``); ``run_recorded``'s ``martingale``."""
    sde = layer_map.limit_sde()

    def increment(x: np.ndarray, dw: np.ndarray, t: float) -> np.ndarray:
        along = sde.diffusion(x, dw)[..., 0]
        return np.einsum("pnm,pn->pm", gradient(x), along) / x.shape[-2]

    return increment


def zonal_gradients(x: np.ndarray) -> np.ndarray:
    """grad phi_1 = e and grad phi_2 = 2 <x, e> e, as multiples of e: (paths, n, 2)."""
    return np.stack([np.ones_like(x[..., 0]), 2.0 * x[..., 0]], axis=-1)


def linear_gradient(x: np.ndarray) -> np.ndarray:
    """grad f = e for f = <x, e>: (paths, n, 1)."""
    return np.ones_like(x[..., :1])


@dataclass(frozen=True)
class MeanFieldDesign:
    """Steps h = T / steps and 2h on one Brownian path, observed every ``steps // records`` steps."""

    grid: RecordGrid
    target: float = 0.05  # the largest relative resolution that still decides

    @property
    def times(self) -> np.ndarray:
        return self.grid.times


def _richardson(values: np.ndarray) -> np.ndarray:
    """2 r_h - r_2h per path from values shaped (paths, 2, ...)."""
    return 2 * values[:, 0] - values[:, 1]


def _check(name: str, per_path: np.ndarray, scale: float, z: float, target: float, config: dict, note: str) -> Check:
    """Mean of ``per_path`` (expected 0) with a z interval; resolution relative to ``scale`` (the size of the
    effect a relative error of the claim moves it by)."""
    mean = float(per_path.mean())
    se = float(per_path.std(ddof=1) / np.sqrt(per_path.size))
    ci = (mean - z * se, mean + z * se)
    check = effect_check(
        name, 0.0, mean, ci, 0.0, target * abs(scale), config, confidence=z_confidence(z), scale=scale, note=note
    )
    if check.verdict == INCONCLUSIVE or (check.verdict == PASS and not scale):  # no scale: nothing resolved
        return replace(
            check,
            verdict=INCONCLUSIVE,
            note=f"{note}; relative resolution {check.relative_resolution} "
            f"above the target {target:g}: more paths needed",
        )
    return check


def zonal_limit(
    layer_map: LayerMap,
    k1: float,
    design: MeanFieldDesign,
    seed: int,
    key: Sequence[int],
    config: dict,
    checks_in_family: int,
    rates: dict[str, np.ndarray] | None = None,
    family_alpha: float = FAMILY_ALPHA,
) -> list[Check]:
    """``zonal_limit`` for phi_1 and phi_2 (module docstring), each at level family_alpha / checks_in_family, for the
    true rates lambda_l and then for each claim of ``rates`` (name -> claimed (lambda_1, lambda_2): near misses),
    all judged on one recording of the paths."""
    claims = {"true": zonal_rates(k1, layer_map.dim)}
    claims |= {name: np.asarray(r, dtype=np.float64) for name, r in (rates or {}).items()}
    recorded = record_at_two_steps(  # (paths, 2, R+1, 4), shared with every study that judges this recording
        layer_map,
        design.grid,
        seed,
        key,
        cap_initial,
        zonal_means,
        shared=True,
        martingale=noise_martingale(layer_map, zonal_gradients),
    )
    bad = first_nonfinite(
        {"zonal means and their martingale increments": recorded}, ["phi_1", "phi_2", "dM phi_1", "dM phi_2"]
    )
    times = design.grid.times
    midpoints = 0.5 * (times[1:] + times[:-1])
    z = z_value(checks_in_family, family_alpha)
    checks = []
    horizon = design.grid.horizon
    for claim, claimed in claims.items():
        claim_config = config if claim == "true" else {**config, "claim": claim}
        for index, rate in enumerate(claimed):
            name = f"zonal_limit_phi{index + 1}"
            if bad:
                nan = float("nan")
                checks.append(Check(name, 0.0, nan, (nan, nan), FAIL, claim_config, note=bad))
                continue
            decay = np.exp(-rate * horizon)
            control = np.sum(np.exp(-rate * (horizon - midpoints)) * recorded[:, :, 1:, 2 + index], axis=-1)
            residual = recorded[:, :, -1, index] - decay * recorded[:, :, 0, index] - control
            start = float(recorded[:, 0, 0, index].mean())
            # a relative error delta in lambda moves the target by lambda T delta e^{-lambda T} E phi(x_0)
            scale = rate * horizon * decay * start
            checks.append(
                _check(
                    name,
                    _richardson(residual),
                    scale,
                    z,
                    design.target,
                    claim_config,
                    f"<mu_T, phi_{index + 1}> - exp(-lambda T) <mu_0, phi_{index + 1}> less the martingale control "
                    f"variate, lambda = {rate:.5g}, "
                    f"T = {horizon:g}; Richardson over h = T/{design.grid.steps} and 2h; relative resolution "
                    "in units of lambda",
                )
            )
    return checks


def agazzi_mean_field_drift(
    model: AgazziModel, k1: float, beta_factor: float = 1.0, v_factor: float = 1.0, ito: float | None = None
) -> Drift:
    """The claimed mean-field drift of model A: ``v P_x a_mu(x) - ito k(1) x`` with ``ito = (d - 1) / 2``
    (docs/models.md section 2); the factors and ``ito`` make near misses."""
    attention = replace(model, beta=model.beta * beta_factor)
    ito = (model.dim - 1) / 2 if ito is None else ito

    def drift(x: np.ndarray) -> np.ndarray:
        return model.v * v_factor * tangent_projection(x, attention.attention(x)) - ito * k1 * x

    return drift


def fedorov_mean_field_drift(model: FedorovModel, ito: float | None = None) -> Drift:
    """The claimed mean-field drift of model F: ``-ito sigma^2 |a_mu(x)|^2 x`` with ``ito = (d - 1) / 2``."""
    ito = (model.dim - 1) / 2 if ito is None else ito

    def drift(x: np.ndarray) -> np.ndarray:
        a = model.attention(x)
        return -ito * model.sigma**2 * np.sum(a * a, axis=-1, keepdims=True) * x

    return drift


def weak_form_observer(drift: Drift) -> Callable[[np.ndarray], np.ndarray]:
    """observe(x) = (<mu, f>, <mu, <e, b(x; mu)>>) per path, f = <x, e>, e the first basis vector."""

    def observe(x: np.ndarray) -> np.ndarray:
        return np.stack([x[..., 0].mean(-1), drift(x)[..., 0].mean(-1)], axis=-1)

    return observe


def drift_integral(recorded: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Trapezoid of <mu_t, <e, b>> over the record times per path and level: (paths, 2)."""
    g = recorded[..., 1]
    return np.sum(0.5 * (g[..., 1:] + g[..., :-1]) * np.diff(times), axis=-1)


def weak_form_residual(recorded: np.ndarray, times: np.ndarray) -> np.ndarray:
    """r = <mu_T, f> - <mu_0, f> - trapezoid of <mu_t, <e, b>> per path and level: (paths, 2)."""
    f = recorded[..., 0]
    return f[..., -1] - f[..., 0] - drift_integral(recorded, times)


def weak_form(
    layer_map: LayerMap,
    drifts: dict[str, Drift],
    design: MeanFieldDesign,
    seed: int,
    key: Sequence[int],
    config: dict,
    checks_in_family: int,
    family_alpha: float = FAMILY_ALPHA,
) -> list[Check]:
    """``weak_form`` for each claimed drift on the same recorded paths: each drift is observed along the run of
    the layer map (the first is the true claim; others are near misses judged on the same data)."""
    names = list(drifts)

    def observe(x: np.ndarray) -> np.ndarray:
        return np.concatenate([weak_form_observer(drifts[name])(x) for name in names], axis=-1)

    recorded = record_at_two_steps(  # (paths, 2, R+1, 2k + 1), shared with every study that observes the same drifts
        layer_map,
        design.grid,
        seed,
        key,
        cap_initial,
        observe,
        shared=True,
        martingale=noise_martingale(layer_map, linear_gradient),
    )
    control = recorded[..., -1].sum(axis=-1)  # C per path and level
    z = z_value(checks_in_family, family_alpha)
    checks = []
    for index, name in enumerate(names):
        part = recorded[..., 2 * index : 2 * index + 2]
        bad = first_nonfinite({f"weak form ({name})": part, "the martingale control variate": control})
        if bad:
            nan = float("nan")
            checks.append(Check("weak_form", 0.0, nan, (nan, nan), FAIL, {**config, "drift": name}, note=bad))
            continue
        residual = weak_form_residual(part, design.times) - control
        integral = float(drift_integral(part, design.times)[:, 0].mean())
        checks.append(
            _check(
                "weak_form",
                _richardson(residual),
                integral,
                z,
                design.target,
                {**config, "drift": name},
                f"E<mu_T, f> - <mu_0, f> - int E<mu_t, <e, b>> dt, f = <x, e> (the drift term integrates to "
                f"{integral:.4g}; relative resolution in its units), less the martingale control variate "
                f"sum_k <mu_k, <e, G dW_k>>; Richardson over h = T/{design.grid.steps}"
                f" and 2h; trapezoid on {design.grid.records} intervals",
            )
        )
    return checks


@dataclass(frozen=True)
class MeanFieldSection:
    """The systems whose empirical measure is checked against the SPDE: ``tokens`` tokens of model A in the
    infinite-width field of ``activation`` in d = ``dim`` (zonal limit without attention, weak form with attention
    strength ``beta``) and of model F (weak form), recorded on ``zonal`` and ``weak`` grids."""

    zonal: MeanFieldDesign
    weak: MeanFieldDesign
    tokens: int = 16
    dim: int = 5
    beta: float = 1.0
    activation: str = "relu"

    def field(self, tokens: int | None = None) -> GaussianField:
        """Model A's infinite-width field (the SPDE's noise) for ``tokens`` tokens (default: the section's)."""
        return GaussianField(KernelSpec(self.activation, self.dim), self.tokens if tokens is None else tokens)


# With the martingale control variates (per-path variance 30-100 times smaller), these paths give resolutions 2-5
# times finer than 8192/4096 (quick) and 32768/49152 (full) paths gave without them.
MEAN_FIELD_SECTIONS = {  # zonal: no attention, T = 4; weak form: with attention, T = 1
    "quick": MeanFieldSection(
        MeanFieldDesign(RecordGrid(horizon=4.0, steps=32, records=16, paths=2048), target=0.2),
        MeanFieldDesign(RecordGrid(horizon=1.0, steps=32, records=16, paths=1024), target=0.2),
    ),
    "full": MeanFieldSection(
        MeanFieldDesign(RecordGrid(horizon=4.0, steps=32, records=16, paths=8192), target=0.05),
        MeanFieldDesign(RecordGrid(horizon=1.0, steps=32, records=16, paths=4096), target=0.05),
    ),
}
MEAN_FIELD_CHECKS = 4  # claim checks of a section: zonal phi_1 (phi_2 is a finding), weak form of A and of F
NEAR_MISS_CHECKS = 7  # with near misses: 2 zonal rates, 4 model A drifts and 1 model F drift


def mean_field_section(
    section: MeanFieldSection, seed: int, key: int, family_alpha: float, near_misses: bool = False
) -> list[Check]:
    """The section's checks: ``zonal_limit`` (model A, no attention) and ``weak_form`` (models A and F), on the
    streams (key, 10), (key, 11), (key, 12). ``near_misses`` adds wrong rates (k(1) 5% off, (d-2) for (d-1)) and
    wrong mean-field drifts (attention v 5% and 20% off, beta 20% off, the Ito factor (d-2)/2) judged on the same
    recorded data; their checks, and zonal phi_2, are findings. The near-miss drifts are recorded either way, so that
    a run's studies record alike and record once (``run_seeded``'s ``shared``). Every interval is at the Bonferroni
    level of ``MEAN_FIELD_CHECKS`` (+ ``NEAR_MISS_CHECKS``) checks sharing ``family_alpha``."""
    dim = section.dim
    family = MEAN_FIELD_CHECKS + (NEAR_MISS_CHECKS if near_misses else 0)
    field = section.field()
    k1 = field.kernel.k1
    silent = AgazziModel(section.tokens, field, section.beta, 0.0)
    wrong = {}
    if near_misses:
        for label, factor in (("k(1) x 1.05", 1.05), ("(d-2)/(d-1) in lambda", (dim - 2) / (dim - 1))):
            wrong[label] = np.array([factor * r for r in (k1 * (dim - 1) / 2, k1 * 2 * dim / 2)])
    zonal = zonal_limit(
        silent, k1, section.zonal, seed, (key, 10), {"model": "A", "attention": "none"}, family, wrong, family_alpha
    )
    checks = zonal[:2]
    checks[1] = replace(
        checks[1], claim=False, note=checks[1].note + " (a finding: phi_2 resolves the rate less sharply than phi_1)"
    )
    checks += [replace(c, claim=False) for c in zonal[2::2]]  # each near miss's phi_1 check
    model_a = AgazziModel(section.tokens, field, section.beta, 1.0)
    # the near-miss drifts are recorded whether or not they are reported, so that every study records alike (the
    # recordings are shared in a run: power judges its near misses on the chaos study's)
    drifts = {
        "true": agazzi_mean_field_drift(model_a, k1),
        "attention v x 0.95": agazzi_mean_field_drift(model_a, k1, v_factor=0.95),
        "attention v x 0.8": agazzi_mean_field_drift(model_a, k1, v_factor=0.8),
        "beta x 1.2": agazzi_mean_field_drift(model_a, k1, beta_factor=1.2),
        "Ito factor (d-2)/2": agazzi_mean_field_drift(model_a, k1, ito=(dim - 2) / 2),
    }

    def reported(found: list[Check]) -> list[Check]:
        """The true drift's check, then the near misses' as findings when they are reported."""
        return [found[0]] + ([replace(c, claim=False) for c in found[1:]] if near_misses else [])

    found = weak_form(model_a, drifts, section.weak, seed, (key, 11), {"model": "A"}, family, family_alpha)
    checks += reported(found)
    model_f = FedorovModel(section.tokens, dim, section.beta)
    drifts = {
        "true": fedorov_mean_field_drift(model_f),
        "Ito factor (d-2)/2": fedorov_mean_field_drift(model_f, ito=(dim - 2) / 2),
    }
    found = weak_form(model_f, drifts, section.weak, seed, (key, 12), {"model": "F"}, family, family_alpha)
    return checks + reported(found)
