"""The neural covariance SDE of the shaped ReLU MLP (Li, Nica and Roy 2022, arXiv 2206.02768), derived from one layer,
and the covariance ODE of the ResNet with a 1/sqrt(depth) branch (``ResidualNetwork``: no diffusion survives).

Conventions (docs/models.md, "Joint depth-and-width limits"): m inputs, width n, preactivations Z_l (m x n), one row
per input; the layer Z_{l+1} = sqrt(c / n) phi(Z_l) W_l^T with W_l (n x n) of i.i.d. N(0, 1) entries and the shaped
ReLU phi(x) = s_+ max(x, 0) + s_- min(x, 0), s_+- = 1 + c_+- / sqrt(n); c = 2 / (s_+^2 + s_-^2) = 1 / E phi(g)^2
(g ~ N(0, 1)) keeps the diagonal's mean. The state is V_l = (1/n) Z_l Z_l^T, time t = l / n (depth T n).

One layer, given Z_l. The columns of Z_{l+1} are i.i.d. N(0, c K) with K = (1/n) phi(Z_l) phi(Z_l)^T, so
V_{l+1} = c K^{1/2} (Wishart_n(I) / n) K^{1/2}: E[V_{l+1} | Z_l] = c K and, by Isserlis' theorem (``isserlis``),
Cov(V'_ab, V'_cd | Z_l) = (c^2 / n)(K_ac K_bd + K_ad K_bc). K is an average over the n neurons, each column of Z_l
having second moments V: K_ab = E[phi(x_a) phi(x_b)] with x ~ N(0, V), up to fluctuations of order n^{-1/2} whose
mean vanishes (their odd part cancels by the symmetry x -> -x), so over n layers they add O(n^{-1/2}). With
eps = n^{-1/2} (``epsilon``), the Gaussian expectation is exact in closed form (``piecewise_linear_kernel``, from the
arc-cosine moment ``relu_moment``):

    E[phi(x_a) phi(x_b)] = (s_+ - s_-)^2 P_ab + s_+ s_- V_ab,   P_ab = E[x_a^+ x_b^+],

and c E[phi phi] - V = eps b(V) + eps^2 ... : the O(eps) term vanishes (that is why the shaping rate is n^{-1/2}),
the O(eps^2) = O(1/n) term is the drift (``ShapedMLP.drift``), and n Cov -> V_ac V_bd + V_ad V_bc the diffusion.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

epsilon = sp.Symbol("epsilon", positive=True)  # n^{-1/2}
c_plus, c_minus = sp.symbols("c_+ c_-", real=True)
r = sp.Symbol("r", real=True)  # a correlation in (-1, 1)
rho = sp.Symbol("rho", real=True)


def relu_moment(var_a: sp.Expr, var_b: sp.Expr, correlation: sp.Expr) -> sp.Expr:
    """E[x^+ y^+] for centred jointly Gaussian (x, y) with variances ``var_a``, ``var_b`` and correlation r: the
    first-order arc-cosine kernel sqrt(var_a var_b) (sqrt(1 - r^2) + (pi - arccos r) r) / (2 pi) (Cho and Saul 2009);
    by the symmetry (x, y) -> (-x, -y) it is also E[x^- y^-]."""
    return (
        sp.sqrt(var_a * var_b)
        * (sp.sqrt(1 - correlation**2) + (sp.pi - sp.acos(correlation)) * correlation)
        / (2 * sp.pi)
    )


def piecewise_linear_kernel(
    s_plus: sp.Expr, s_minus: sp.Expr, var_a: sp.Expr, var_b: sp.Expr, correlation: sp.Expr
) -> sp.Expr:
    """E[phi(x) phi(y)] for phi(x) = s_+ max(x, 0) + s_- min(x, 0): with P = E[x^+ y^+] = E[x^- y^-] and
    E[x^+ y^-] = E[x^- y^+] = (E[x y] - 2 P) / 2 (the four parts sum to E[x y]), it is
    (s_+^2 + s_-^2) P + s_+ s_- (E[x y] - 2 P)."""
    moment = relu_moment(var_a, var_b, correlation)
    product = correlation * sp.sqrt(var_a * var_b)
    return (s_plus**2 + s_minus**2) * moment + s_plus * s_minus * (product - 2 * moment)


def isserlis(covariance: sp.Matrix, indices: tuple[int, int, int, int]) -> sp.Expr:
    """E[g_a g_b g_c g_d] for g ~ N(0, ``covariance``), from the fourth derivative of the moment generating function
    exp(u^T K u / 2) at u = 0 (computed, not Isserlis' pairing formula: the check compares the two)."""
    size = covariance.shape[0]
    u = sp.symbols(f"u0:{size}", real=True)
    vector = sp.Matrix(u)
    mgf = sp.exp((vector.T * covariance * vector)[0, 0] / 2)
    derivative = mgf
    for index in indices:
        derivative = sp.diff(derivative, u[index])
    return sp.simplify(derivative.subs({symbol: 0 for symbol in u}))


@dataclass(frozen=True)
class ShapedMLP:
    """The shaped ReLU MLP's covariance SDE for ``inputs`` inputs (module docstring), in the symbols V_ab = V_ba."""

    inputs: int = 2

    @property
    def state(self) -> sp.Matrix:
        """The symmetric matrix of symbols V_ab (a <= b)."""
        return state_matrix(self.inputs)

    def one_step_mean(self) -> sp.Matrix:
        """c E[phi(x_a) phi(x_b)] with x ~ N(0, V) and s_+- = 1 + c_+- eps: E[V_{l+1} | V_l] up to the neurons'
        fluctuations (module docstring)."""
        v = self.state
        s_plus, s_minus = 1 + c_plus * epsilon, 1 + c_minus * epsilon
        scale = 2 / (s_plus**2 + s_minus**2)

        def entry(a: int, b: int) -> sp.Expr:
            if a == b:
                return scale * piecewise_linear_kernel(s_plus, s_minus, v[a, a], v[a, a], 1)
            correlation = v[a, b] / sp.sqrt(v[a, a] * v[b, b])
            return scale * piecewise_linear_kernel(s_plus, s_minus, v[a, a], v[b, b], correlation)

        return sp.Matrix(self.inputs, self.inputs, entry)

    @cache
    def drift(self) -> sp.Matrix:
        """b(V) = lim n (E[V_{l+1} | V_l] - V_l), the eps^2 coefficient of the one-step mean (its eps^1 coefficient is
        checked to vanish in ``expansion_orders``)."""
        mean = self.one_step_mean()
        return sp.Matrix(
            self.inputs,
            self.inputs,
            lambda a, b: sp.simplify(sp.diff(mean[a, b], epsilon, 2).subs(epsilon, 0) / 2),
        )

    def expansion_orders(self) -> sp.Matrix:
        """The one-step mean's eps^0 and eps^1 coefficients less (V, 0), a row per entry a <= b: zero when the shaping
        rate is right."""
        mean = self.one_step_mean()
        return sp.Matrix(
            [
                [
                    sp.simplify(mean[a, b].subs(epsilon, 0) - self.state[a, b]),
                    sp.simplify(sp.diff(mean[a, b], epsilon).subs(epsilon, 0)),
                ]
                for a in range(self.inputs)
                for b in range(a, self.inputs)
            ]
        )

    def diffusion(self, a: int, b: int, c: int, d: int) -> sp.Expr:
        """Sigma_{ab,cd} = lim n Cov(V'_ab, V'_cd | V) = Cov(g_a g_b, g_c g_d) for g ~ N(0, c K) at eps = 0, where
        c K = V (``isserlis``; Isserlis' pairing gives V_ac V_bd + V_ad V_bc, which the derivation checks)."""
        v = self.state
        return sp.expand(isserlis(v, (a, b, c, d)) - v[a, b] * v[c, d])


def state_matrix(inputs: int) -> sp.Matrix:
    """The symmetric matrix of positive-definite-state symbols V_ab = V_ba."""
    names = {(a, b): sp.Symbol(f"V_{a + 1}{b + 1}", real=True) for a in range(inputs) for b in range(a, inputs)}
    for a in range(inputs):
        names[a, a] = sp.Symbol(f"V_{a + 1}{a + 1}", positive=True)
    return sp.Matrix(inputs, inputs, lambda a, b: names[min(a, b), max(a, b)])


def correlation_sde(model: ShapedMLP) -> tuple[sp.Expr, sp.Expr]:
    """Drift and squared diffusion of rho = V_12 / sqrt(V_11 V_22) for two inputs by Ito's formula on the three
    coordinates (V_11, V_12, V_22) with the model's drift and covariance, written in rho (the V_11, V_22 dependence
    cancels; ``model`` must have two inputs)."""
    if model.inputs != 2:
        raise ValueError(f"the correlation SDE needs inputs = 2, got {model.inputs}")
    v = model.state
    coordinates = [(0, 0), (0, 1), (1, 1)]
    variables = [v[a, b] for a, b in coordinates]
    correlation = v[0, 1] / sp.sqrt(v[0, 0] * v[1, 1])
    gradient = [sp.diff(correlation, x) for x in variables]
    drift_v = model.drift()
    drift = sum(drift_v[a, b] * g for (a, b), g in zip(coordinates, gradient))
    squared = 0
    for i, (a, b) in enumerate(coordinates):
        for j, (c, d) in enumerate(coordinates):
            sigma = model.diffusion(a, b, c, d)
            drift += sigma * sp.diff(correlation, variables[i], variables[j]) / 2
            squared += sigma * gradient[i] * gradient[j]
    in_rho = {v[0, 1]: rho * sp.sqrt(v[0, 0] * v[1, 1])}
    return sp.simplify(drift.subs(in_rho)), sp.simplify(squared.subs(in_rho))


T = sp.Symbol("T", positive=True)  # depth / width


@dataclass(frozen=True)
class ResidualNetwork:
    """A ResNet whose branch is scaled by 1/sqrt(depth), depth L = T n:
    Z_{l+1} = Z_l + sqrt(c / L) phi(Z_l) W_l^T / sqrt(n) with W_l (n x n) i.i.d. N(0, 1), phi the identity
    (``branch`` "linear", c = 1) or ReLU ("relu", c = 2, so that c E phi(g)^2 = 1); state V = (1/n) Z Z^T, time
    t = l / n.

    One layer, given Z (delta = sqrt(c / (L n)) phi(Z) W^T, K = (1/n) phi(Z) phi(Z)^T):
    V' - V = (1/n)(Z delta^T + delta Z^T) + (1/n) delta delta^T, so E[V' - V | Z] = c K / L = (1/n) c K / T and, the
    cross term being linear in W, Cov(V'_ab - V_ab, V'_cd - V_cd | Z) = (c / (L n))(V_ac K_bd + V_ad K_bc + V_bc K_ad
    + V_bd K_ac) + O(1 / (L n^2)) = O(1/n^2): per unit of t = l/n the drift is c K(V) / T and the diffusion vanishes.
    The covariance follows the ODE dV/dt = c K(V) / T (K's fluctuations about its Gaussian value average out as in
    ``ShapedMLP``); its fluctuations are O(n^-1/2) at every depth (the limits in depth and width commute)."""

    inputs: int = 2
    branch: str = "relu"

    def __post_init__(self) -> None:
        if self.branch not in ("relu", "linear"):
            raise ValueError(f"branch must be 'relu' or 'linear', got {self.branch!r}")

    @property
    def state(self) -> sp.Matrix:
        return state_matrix(self.inputs)

    def scaled_kernel(self) -> sp.Matrix:
        """c K(V) = c E[phi(x) phi(x)^T], x ~ N(0, V)."""
        v = self.state
        if self.branch == "linear":
            return v

        def entry(a: int, b: int) -> sp.Expr:
            correlation = 1 if a == b else v[a, b] / sp.sqrt(v[a, a] * v[b, b])
            return sp.simplify(2 * relu_moment(v[a, a], v[b, b], correlation))

        return sp.Matrix(self.inputs, self.inputs, entry)

    def drift(self) -> sp.Matrix:
        """b(V) = lim n E[V' - V | V] = c K(V) / T."""
        return self.scaled_kernel() / T

    def step_covariance(self, a: int, b: int, c: int, d: int) -> sp.Expr:
        """n^2 Cov(V'_ab, V'_cd | V) to leading order (``branch_covariance`` at c K = ``scaled_kernel``): the
        covariance per layer is this over n^2, so n Cov -> 0 (no diffusion)."""
        return branch_covariance(self.state, self.scaled_kernel(), T, (a, b, c, d))


def branch_covariance(v, k, depth_ratio, indices: tuple[int, int, int, int]):
    """(1/T)(V_ac K_bd + V_ad K_bc + V_bc K_ad + V_bd K_ac) for matrices V and c K (sympy or numpy) and T =
    ``depth_ratio``: the ResNet branch's cross term, n^2 Cov(V'_ab, V'_cd | Z) to leading order."""
    a, b, c, d = indices
    return (v[a, c] * k[b, d] + v[a, d] * k[b, c] + v[b, c] * k[a, d] + v[b, d] * k[a, c]) / depth_ratio


def correlation_ode(model: ResidualNetwork) -> sp.Expr:
    """d rho / dt for two inputs under the ODE dV/dt = b(V) (no Ito term: the diffusion vanishes), in rho."""
    v = model.state
    correlation = v[0, 1] / sp.sqrt(v[0, 0] * v[1, 1])
    b = model.drift()
    rate = sum(b[a, c] * sp.diff(correlation, v[a, c]) for a, c in ((0, 0), (0, 1), (1, 1)))
    return sp.simplify(sp.simplify(rate.subs(v[0, 1], rho * sp.sqrt(v[0, 0] * v[1, 1]))))
