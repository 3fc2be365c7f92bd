"""The neural covariance SDE of the shaped attention block and of the shaped transformer block (attention, then a
shaped ReLU MLP, both residual), derived from one layer (Noci et al. 2023, arXiv 2306.17759: its abstract and opening
were read, not its theorem, so the SDE is re-derived here).

Conventions (docs/models.md, "Joint depth-and-width limits"): m tokens, width n, Z (m x n), one row per token,
V = (1/n) Z Z^T, time t = l/n. Branch weights lambda^2 + gamma^2 = 1. The attention block is

    Z' = lambda Z + gamma A(Z) Z W / sqrt(n),      A = I + softmax(eps S) - (1/m) 1 1^T,   eps = n^{-1/2},

with W (n x n) i.i.d. N(0, 1) and logits eps S_ij = <q_i, k_j> / (tau_0 sqrt(n n_k)), q_i = W_Q^T z_i / sqrt(n),
k_j = W_K^T z_j / sqrt(n), W_Q, W_K (n x n_k) i.i.d. N(0, 1): the temperature tau_0 sqrt(n n_k) grows with the width,
and A is the identity plus O(eps) (shaped: centred at the identity). Given Z, S has mean 0, odd moments 0 and
E[S_ij S_kl] = kappa V_ik V_jl with kappa = tau_0^{-2}, exactly (q and k are independent Gaussian, each with
covariance V between tokens); so the law of V' given Z depends on Z only through V (the layer commutes with
Z -> Z O, O orthogonal) and V is a Markov chain.

One layer (``ShapedAttention``). E_W[V'] = lambda^2 V + gamma^2 A V A^T; with A = I + eps A_1 + eps^2 A_2 + ...
(``softmax_expansion``), the O(eps) term has mean 0 and the O(eps^3) one too (odd moments of S), so
n (E V' - V) = gamma^2 E[A_1 V A_1^T + A_2 V + V A_2^T] + O(1/n): the drift. The fluctuation's O(eps) part is the
value matrix's cross term lambda gamma (Z W Z^T + Z W^T Z^T) / n^{3/2}, its Wishart part gamma^2 (Z W W^T Z^T / n^2 -
V) and the attention's gamma^2 eps (A_1 V + V A_1^T), pairwise uncorrelated: n Cov(V'_ab, V'_cd) tends to
gamma^2 (2 - gamma^2)(V_ac V_bd + V_ad V_bc) + gamma^4 Cov(X_ab, X_cd), X = A_1 V + V A_1^T.

The transformer block (``ShapedTransformer``) follows the attention block with Z'' = lambda Z' + gamma sqrt(c/n)
phi(Z' W_1 / sqrt(n)) W_2^T, phi the shaped ReLU of ``ShapedMLP`` (W_1, W_2 (n x n) i.i.d. N(0, 1)). The hidden
columns are i.i.d. N(0, V') given Z', so E[c phi phi^T / n] = c K(V') exactly, and its fluctuation (hidden layer) and
W_2's Wishart each add (V_ac V_bd + V_ad V_bc) at eps = 0: the MLP half moves V by gamma^2 b_MLP(V) / n with
covariance (2 lambda^2 gamma^2 + 2 gamma^4)(V_ac V_bd + V_ad V_bc) / n. The two halves' noises are conditionally
centred one after the other, so to O(1/n) their drifts and covariances add.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from .covariance import ShapedMLP, branch_covariance, epsilon, isserlis, state_matrix

tau_0 = sp.Symbol("tau_0", positive=True)  # the temperature is tau_0 sqrt(n n_k)
gamma = sp.Symbol("gamma", positive=True)  # branch weight; the skip carries lambda = sqrt(1 - gamma^2)


def logit_symbols(tokens: int) -> sp.Matrix:
    """The m x m matrix of symbols S_ij (query i, key j)."""
    return sp.Matrix(tokens, tokens, lambda i, j: sp.Symbol(f"S_{i + 1}{j + 1}", real=True))


@cache
def softmax_expansion(tokens: int, order: int = 2) -> tuple[sp.Matrix, ...]:
    """(A_1, ..., A_order): the Taylor coefficients in eps of A = I + softmax_j(eps S_ij) - 1/m, from the softmax itself
    (derivatives at eps = 0, not a remembered series)."""
    s = logit_symbols(tokens)

    def entry(i: int, j: int) -> sp.Expr:
        return sp.exp(epsilon * s[i, j]) / sum(sp.exp(epsilon * s[i, k]) for k in range(tokens))

    softmax = sp.Matrix(tokens, tokens, entry)
    return tuple(
        softmax.applyfunc(lambda e, k=k: sp.expand(sp.diff(e, epsilon, k).subs(epsilon, 0) / sp.factorial(k)))
        for k in range(1, order + 1)
    )


def logit_expectation(expression: sp.Expr, state: sp.Matrix) -> sp.Expr:
    """E over the logits of a polynomial of degree <= 3 in the S_ij, with E S = 0, E[S_ij S_kl] = kappa V_ik V_jl and
    odd moments 0 (module docstring)."""
    tokens = state.shape[0]
    s = logit_symbols(tokens)
    symbols = list(s)
    polynomial = sp.Poly(expression, *symbols)
    total = sp.Integer(0)
    for powers, coefficient in polynomial.terms():
        degree = sum(powers)
        if degree == 0:
            total += coefficient
        elif degree == 2:
            (p, q) = [k for k, power in enumerate(powers) for _ in range(power)]
            (query, key), (query2, key2) = divmod(p, tokens), divmod(q, tokens)
            total += coefficient * state[query, query2] * state[key, key2] / tau_0**2
        elif degree > 3:
            raise ValueError(f"logit_expectation takes degree <= 3, got a term of degree {degree}")
    return sp.expand(total)


def wishart_part(state: sp.Matrix, indices: tuple[int, int, int, int]) -> sp.Expr:
    """lim n Cov of a residual branch's value-matrix noise: per output neuron, xi = lambda gamma (g z^T + z g^T) +
    gamma^2 g g^T with g ~ N(0, V) independent of the neuron's input z (second moments V); Cov(xi_ab, xi_cd) from
    independence and the fourth moments of g (``isserlis``)."""
    a, b, c, d = indices
    lam2 = 1 - gamma**2

    def cross(p: int, q: int, r: int, s: int) -> sp.Expr:  # E[(g_p z_q)(g_r z_s)] = V_pr V_qs
        return state[p, r] * state[q, s]

    mixed = cross(a, b, c, d) + cross(a, b, d, c) + cross(b, a, c, d) + cross(b, a, d, c)
    wishart = isserlis(state, indices) - state[a, b] * state[c, d]
    return sp.expand(lam2 * gamma**2 * mixed + gamma**4 * wishart)


@dataclass(frozen=True)
class ShapedAttention:
    """The shaped attention block's covariance SDE for ``inputs`` tokens (module docstring), in the symbols V_ab."""

    inputs: int = 3

    @property
    def state(self) -> sp.Matrix:
        return state_matrix(self.inputs)

    @cache
    def _orders(self) -> tuple[sp.Matrix, sp.Matrix]:
        first, second = softmax_expansion(self.inputs)
        v = self.state
        return first * v + v * first.T, first * v * first.T + second * v + v * second.T

    @cache
    def drift(self) -> sp.Matrix:
        """b(V) = lim n E[V' - V | V] = gamma^2 E[A_1 V A_1^T + A_2 V + V A_2^T]."""
        _, second = self._orders()
        return second.applyfunc(lambda e: sp.factor(gamma**2 * logit_expectation(e, self.state)))

    def odd_orders(self) -> tuple[sp.Matrix, sp.Matrix]:
        """The eps^1 and eps^3 coefficients of A V A^T: each is odd in S (``is_odd``), and S -> -S is a symmetry of
        the logits' law (W_Q -> -W_Q), so their means vanish: the one-step mean is V + b/n + O(n^-2)."""
        first, second, third = softmax_expansion(self.inputs, 3)
        v = self.state
        return first * v + v * first.T, first * v * second.T + second * v * first.T + third * v + v * third.T

    def attention_noise(self, a: int, b: int, c: int, d: int) -> sp.Expr:
        """gamma^4 E[X_ab X_cd], X = A_1 V + V A_1^T (mean 0): the attention's part of the diffusion."""
        first, _ = self._orders()
        return sp.expand(gamma**4 * logit_expectation(first[a, b] * first[c, d], self.state))

    def diffusion(self, a: int, b: int, c: int, d: int) -> sp.Expr:
        """Sigma_ab,cd = lim n Cov(V'_ab, V'_cd | V): ``wishart_part`` plus ``attention_noise``."""
        return sp.expand(wishart_part(self.state, (a, b, c, d)) + self.attention_noise(a, b, c, d))


def is_odd(matrix: sp.Matrix, tokens: int) -> bool:
    """Whether every entry of ``matrix`` changes sign with the logits, f(-S) = -f(S)."""
    flip = {symbol: -symbol for symbol in logit_symbols(tokens)}
    return all(sp.expand(e.xreplace(flip) + e) == 0 for e in matrix)


def attention_drift_closed_form(v, tokens: int):
    """gamma^2 kappa [tr(V H V H) V / m^2 + (diag(V) u^T + u diag(V)^T) / (2 m)], H = I - 1 1^T / m, u = V delta,
    delta_j = (H V H)_jj - tr(H V H) / m: the drift written by hand from E[S_ij S_kl] = kappa V_ik V_jl (the check
    compares it with ``ShapedAttention.drift``); for m = 2, delta = 0 and the drift is a multiple of V."""
    h = sp.eye(tokens) - sp.ones(tokens, tokens) / tokens
    centred = h * v * h
    delta = sp.Matrix([centred[j, j] - centred.trace() / tokens for j in range(tokens)])
    u = v * delta
    diagonal = sp.Matrix([v[j, j] for j in range(tokens)])
    bracket = (v * h * v * h).trace() * v / tokens**2 + (diagonal * u.T + u * diagonal.T) / (2 * tokens)
    return gamma**2 * bracket / tau_0**2


def attention_noise_closed_form(v, tokens: int, indices: tuple[int, int, int, int]):
    """gamma^4 kappa (V_ac R_bd + V_ad R_bc + V_bc R_ad + V_bd R_ac), R = V H V H V / m^2 (``branch_covariance``'s
    pattern): the attention's part of the diffusion written by hand."""
    h = sp.eye(tokens) - sp.ones(tokens, tokens) / tokens
    r = v * h * v * h * v / tokens**2
    return gamma**4 * branch_covariance(v, r, 1, indices) / tau_0**2


@dataclass(frozen=True)
class ShapedTransformer:
    """The shaped transformer block (attention, then the shaped ReLU MLP, each residual with weights lambda, gamma;
    module docstring): drifts and covariances of the two halves add."""

    inputs: int = 3

    @property
    def state(self) -> sp.Matrix:
        return state_matrix(self.inputs)

    @cache
    def drift(self) -> sp.Matrix:
        """gamma^2 (b_attention(V) / gamma^2 + b_MLP(V)), b_MLP the shaped MLP's drift (``ShapedMLP``)."""
        return ShapedAttention(self.inputs).drift() + gamma**2 * ShapedMLP(self.inputs).drift()

    def diffusion(self, a: int, b: int, c: int, d: int) -> sp.Expr:
        """The attention half's Sigma plus the MLP half's 2 gamma^2 (V_ac V_bd + V_ad V_bc): its value-matrix part
        (``wishart_part``) plus gamma^4 times the hidden layer's fluctuation, Cov(g_a g_b, g_c g_d) at eps = 0."""
        v = self.state
        hidden = isserlis(v, (a, b, c, d)) - v[a, b] * v[c, d]
        mlp = wishart_part(v, (a, b, c, d)) + gamma**4 * hidden
        return sp.expand(ShapedAttention(self.inputs).diffusion(a, b, c, d) + mlp)
