"""Model F's overlap statistics against the derived overlap SDE: for two tokens from a fixed overlap rho_0, smooth
functions of rho_T at increasing depth (coupled on one Brownian path, Gaussian entries) against E[f(rho_T) | rho_0]
from the backward Kolmogorov equation of ``verify.overlap_sde`` (``convergence._references.kolmogorov``): the weak
order, the weak limit, and universality (Rademacher and uniform entries, two independent finest depths). Every
run subtracts the martingale control ``OverlapControl``, built from the same Kolmogorov equation's gradient; the
limit checks' targets are relative to f(rho_T)'s standard deviation under the limit law (``reference_values``), not
to the controlled sample's. The weak-fedorov study holds the design; ``weak_overlap`` runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import sympy as sp

import verify
from verify._calculus import d as d_symbol
from verify._calculus import sigma as sigma_symbol
from verify._common import holding_precision
from verify._models import beta as beta_symbol

from .._models import FedorovModel
from .._output import Panel
from .._paths import fixed_overlap, overlap
from .._references import barycentric, expectation, lambdify_overlap, value_gradients
from .._statistics import Check
from .strong import bootstrap_generator
from .weak import OVERLAP_OBSERVABLES, WeakDesign, coupled_observables, limit_check, token_observables
from .weak_order_fit import order_check, weak_order


@dataclass(frozen=True)
class WeakOverlapOutcome:
    """The checks (weak order, weak limit per observable and entry law), a panel per configuration, and the reference
    values with their error estimates."""

    checks: list
    panels: list
    references: dict


@cache
def overlap_coefficients(dim: int, beta: float, sigma: float) -> tuple[Callable, Callable]:
    """numpy drift b(rho) and squared diffusion a(rho) of model F's derived overlap SDE (two tokens); cached, as the
    reference values and the control variate of one configuration both need them."""
    drift, diffusion = verify.overlap_sde("fedorov", 2)
    with holding_precision():  # nsimplify sets mpmath's precision
        exact_beta = sp.nsimplify(beta)
    return lambdify_overlap(drift, diffusion, {d_symbol: dim, beta_symbol: exact_beta, sigma_symbol: sigma})


CONTROL_GRID = 2048  # intervals of the uniform rho grid on which the control's slopes are tabulated


@dataclass(frozen=True, eq=False)
class OverlapControl:
    """Martingale control variates for E f_j(rho_T) of model F's two tokens (``coupled_observables``' ``control``):
    per step from t_k, u^j_rho(t_k, rho_k) d rho_k, with d rho_k = <dW a_1, x_2 - rho x_1> + <dW a_2, x_1 - rho x_2>
    the overlap's first-order response to the step's noise (the derived SDE's noise term of rho on the same dW) and
    u^j(t, rho) = E[f_j(rho_T) | rho_t = rho] from the backward Kolmogorov equation of the derived overlap SDE
    (``value_gradients``). Each term is linear in dW_k with a coefficient fixed before it, so its mean is 0 exactly,
    for any centred entry law and any u: the control moves the variance of f - M, never its mean; u decides how much
    of the variance goes (f(rho_T) - M keeps the discretisation's part only when u is exact).

    ``slopes`` (steps, CONTROL_GRID + 1, observables): u^j_rho at t_k = k T / steps on a uniform rho grid (linear
    interpolation between its points; any coefficient keeps the mean, so only the variance depends on it)."""

    stepper: FedorovModel
    horizon: float
    slopes: np.ndarray

    def __call__(self, x: np.ndarray, dw: np.ndarray, t: float) -> np.ndarray:
        a = self.stepper.attention(x)
        return self._increment(x, a @ np.swapaxes(dw, -1, -2), t)

    def step(self, x: np.ndarray, dw: np.ndarray, h: float, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Model F's layer from x on dw and the control's increment, from one noise action dW a_i (``run_coupled``'s
        fused martingale)."""
        a = self.stepper.attention(x)
        applied = a @ np.swapaxes(dw, -1, -2)
        return self.stepper.layer_from_action(x, a, applied, h), self._increment(x, applied, t)

    def _increment(self, x: np.ndarray, applied: np.ndarray, t: float) -> np.ndarray:
        steps = self.slopes.shape[0]
        k = round(t * steps / self.horizon)
        if abs(k * self.horizon / steps - t) > 1e-9 * self.horizon:
            raise ValueError(f"t = {t} is not on the control's grid of {steps} steps over T = {self.horizon}")
        rho = overlap(x)
        response = np.einsum("pnd,pnd->p", applied, x[:, ::-1] - rho[:, None, None] * x)
        position = (np.clip(rho, -1.0, 1.0) + 1.0) * (CONTROL_GRID / 2)
        left = np.minimum(position.astype(np.intp), CONTROL_GRID - 1)
        weight = (position - left)[:, None]
        table = self.slopes[k]
        return ((1.0 - weight) * table[left] + weight * table[left + 1]) * response[:, None]


def overlap_control(
    layer_map: FedorovModel, observables: dict[str, Callable], horizon: float, steps: int
) -> OverlapControl:
    """The martingale control of ``observables`` (functions of rho) for ``layer_map`` (model F, two tokens) over
    ``steps`` steps of T = ``horizon`` (``OverlapControl``)."""
    b, a = overlap_coefficients(layer_map.dim, layer_map.beta, layer_map.sigma)
    grid = np.linspace(-1.0, 1.0, CONTROL_GRID + 1)
    tables = []
    for f in observables.values():
        nodes, at_nodes = value_gradients(b, a, f, horizon, steps)
        tables.append(barycentric(nodes, at_nodes.T, grid).T)  # (steps, grid)
    return OverlapControl(layer_map, horizon, np.stack(tables, axis=-1))


def limit_moments(
    drift: Callable, diffusion_squared: Callable, f: Callable, horizon: float, rho0: float
) -> tuple[float, float, float]:
    """E[f(rho_T) | rho_0] under the overlap SDE (``drift``, ``diffusion_squared``) from its backward Kolmogorov
    equation: (value, error estimate, standard deviation of f(rho_T), from E[f^2] - E[f]^2 the same way)."""
    first = expectation(drift, diffusion_squared, f, horizon, rho0)
    second = expectation(drift, diffusion_squared, lambda r: f(r) ** 2, horizon, rho0)
    mean = float(first.value[0])
    return mean, float(first.error[0]), float(np.sqrt(max(float(second.value[0]) - mean**2, 0.0)))


def reference_values(
    dim: int, beta: float, sigma: float, horizon: float, rho0: float
) -> dict[str, tuple[float, float, float]]:
    """``limit_moments`` of each overlap observable under the derived overlap SDE."""
    b, a = overlap_coefficients(dim, beta, sigma)
    return {name: limit_moments(b, a, f, horizon, rho0) for name, f in OVERLAP_OBSERVABLES.items()}


def weak_overlap(
    configs: Sequence[tuple[int, float]],
    designs: dict[int, WeakDesign],
    design: WeakDesign,
    rho0: float,
    laws: Sequence[str],
    law_paths: int,
    seed: int,
    study_key: int,
    z: float,
    advance: Callable[[int], None],
) -> WeakOverlapOutcome:
    """For each (d, beta) of ``configs`` (index i: streams ``(study_key, i)``, and ``(study_key, i, 1 + law, level)``
    for each entry law of ``laws`` on ``law_paths`` paths at the two finest depths), the coupled runs on ``designs[d]``
    and every check at z = ``z``; ``advance`` counts the coupled runs' layers."""
    observables = token_observables()
    checks, panels, references = [], [], {}
    steps = design.steps()
    for index, (dim, b) in enumerate(configs):
        model = FedorovModel(tokens=2, dim=dim, beta=b)
        ref = reference_values(dim, b, model.sigma, design.horizon, rho0)
        references[f"d={dim}, beta={b}"] = {
            name: {"value": v, "error": e, "sd": sd} for name, (v, e, sd) in ref.items()
        }
        key = (study_key, index)
        control = overlap_control(model, OVERLAP_OBSERVABLES, design.horizon, design.depths[-1])
        values = coupled_observables(
            model, designs[dim], observables, seed, key, fixed_overlap(rho0), progress=advance, control=control
        )
        rng = bootstrap_generator(seed, key)
        series = []
        fits = weak_order(values, steps, rng, design.replicates, z)
        checks.append(
            order_check(fits, design, z, {"d": dim, "beta": b, "observable": "all (pooled)", "entries": "gaussian"})
        )
        for name in OVERLAP_OBSERVABLES:
            config = {"d": dim, "beta": b, "observable": name, "entries": "gaussian"}
            fit = fits[name]
            checks.append(
                limit_check(
                    values[name],
                    fit.differences[-1],
                    fit.standard_errors[-1],
                    *ref[name],
                    design,
                    z,
                    config,
                )
            )
            series.append(fit.series(f"|E f(L) - E f(2L)|, f = {name}", z))
        for law_index, law in enumerate(laws):
            law_key = (study_key, index, 1 + law_index)
            checks += _other_law_checks(control, law, law_paths, law_key, ref, design, rho0, seed, z)
        panels.append(
            Panel(
                title=f"d={dim}, beta={b}, rho0={rho0}",
                xlabel="step h",
                ylabel="coupled weak difference",
                series=series,
                reference_order=design.order,
            )
        )
    return WeakOverlapOutcome(checks, panels, references)


def _other_law_checks(
    control: OverlapControl,
    law: str,
    law_paths: int,
    law_key: tuple[int, ...],
    ref: dict,
    design: WeakDesign,
    rho0: float,
    seed: int,
    z: float,
) -> list[Check]:
    """weak_limit for an entry law other than Gaussian (no coupling to a Brownian path): independent runs at the two
    finest depths (streams ``(*law_key, level)``), their difference the bias allowance; each run less ``control``
    (mean 0 for any centred entry law) on its own layer map."""
    gaussian = control.stepper
    law_model = FedorovModel(tokens=2, dim=gaussian.dim, beta=gaussian.beta, law=law)
    law_control = replace(control, stepper=law_model)
    observables = token_observables()
    law_design = replace(design, paths=law_paths)
    finals = []
    for level, depth in enumerate(design.depths[-2:]):
        values = coupled_observables(
            law_model,
            law_design,
            observables,
            seed,
            (*law_key, level),
            fixed_overlap(rho0),
            [depth],
            control=law_control,
        )
        finals.append({name: v[:, 0] for name, v in values.items()})
    coarse, finest = finals
    checks = []
    for name in OVERLAP_OBSERVABLES:
        config = {"d": gaussian.dim, "beta": gaussian.beta, "observable": name, "entries": law}
        diff = coarse[name].mean() - finest[name].mean()
        diff_se = np.sqrt(coarse[name].var(ddof=1) / coarse[name].size + finest[name].var(ddof=1) / finest[name].size)
        checks.append(limit_check(finest[name], diff, diff_se, *ref[name], design, z, config))
    return checks
