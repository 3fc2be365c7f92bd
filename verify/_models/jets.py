"""Jets: the order-h expansion of a sympy expression in s = sqrt(h) and the noise's standard entries z.

Every subexpression of a step that involves neither s nor z is frozen into a symbol first (``Frozen``), and each
node of what remains carries its jet (``Jet``: value, order-s mean, loadings on the z_k and the averaged order-h
part) through sums, products and functions of one argument (``Expansion``), by the sum, product and Ito chain rules:
no derivative of a large expression is ever formed. Sums and products are built without sympy's canonicalisation
(``unevaluated_sum``, ``unevaluated_product``): the coefficients are evaluated, never simplified.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sympy as sp

s = sp.Symbol("s", positive=True)  # sqrt(h): the expansion variable


class Dependence:
    """Whether an expression involves any of the ``active`` symbols, memoised per node: an expression tree with
    shared subexpressions (an attention average inside two normalisations) is a small DAG but a huge tree, and
    sympy's ``free_symbols`` walks the tree each time it is asked."""

    def __init__(self, active: set[sp.Symbol]):
        self.active = active
        self._seen: dict[sp.Expr, bool] = {}

    def __call__(self, expr: sp.Expr) -> bool:
        known = self._seen.get(expr)
        if known is None:
            known = expr in self.active if expr.is_Atom else any(self(arg) for arg in expr.args)
            self._seen[expr] = known
        return known


class Frozen:
    """Replaces every maximal subexpression free of the ``active`` symbols by a symbol ``frozen_k`` (memoised, so a
    subexpression shared by several tokens becomes one symbol); ``definitions`` maps each symbol back."""

    def __init__(self, active: set[sp.Symbol], known: dict[sp.Symbol, sp.Expr] | None = None):
        self.depends = Dependence(active)
        self.definitions: dict[sp.Symbol, sp.Expr] = dict(known or {})  # ``known``: symbols already frozen
        self._seen: dict[sp.Expr, sp.Expr] = {v: k for k, v in self.definitions.items()}

    def __call__(self, expr: sp.Expr) -> sp.Expr:
        if expr in self._seen:
            return self._seen[expr]
        if expr.is_Atom:
            out = expr
        elif not self.depends(expr):
            out = sp.Symbol(f"frozen_{len(self.definitions)}", real=True)
            self.definitions[out] = expr
        else:
            out = expr.func(*[self(arg) for arg in expr.args])
        self._seen[expr] = out
        return out

    def back(self, expr: sp.Expr | sp.Matrix):
        """The expression in the original symbols."""
        return expr.xreplace(self.definitions)


def unevaluated_sum(terms: Iterable[sp.Expr]) -> sp.Expr:
    """A sum built without sympy's canonicalisation (which asks assumptions of every large term); exact zeros
    dropped. The jets' coefficients are only ever evaluated, never simplified, so their form does not matter."""
    kept = [t for t in terms if t is not sp.S.Zero]
    return sp.S.Zero if not kept else kept[0] if len(kept) == 1 else sp.Add(*kept, evaluate=False)


def unevaluated_product(*factors: sp.Expr) -> sp.Expr:
    """A product built without canonicalisation; exact zeros and ones short-circuit."""
    if any(f is sp.S.Zero for f in factors):
        return sp.S.Zero
    kept = [f for f in factors if f is not sp.S.One]
    return sp.S.One if not kept else kept[0] if len(kept) == 1 else sp.Mul(*kept, evaluate=False)


@dataclass(frozen=True)
class Jet:
    """An expression's expansion at s = 0, with the noise entries as first-order symbols eps_k
    (E eps_k = 0, E eps_k eps_l = [k = l] h): ``value + mean s + sum_k linear[k] eps_k + drift h``, the order-h
    part already averaged over the noise (terms s eps_k average to 0)."""

    value: sp.Expr
    mean: sp.Expr = sp.S.Zero
    linear: tuple[tuple[int, sp.Expr], ...] = ()
    drift: sp.Expr = sp.S.Zero

    def second_moment(self) -> sp.Expr:
        """The order-h mean of the squared first-order part: mean^2 + sum_k linear[k]^2."""
        return unevaluated_sum(
            [unevaluated_product(self.mean, self.mean), *[unevaluated_product(c, c) for _, c in self.linear]]
        )

    def through(self, f0: sp.Expr, f1: sp.Expr, f2: sp.Expr) -> Jet:
        """f(self) for a scalar function with f(value), f'(value), f''(value) (Ito's chain rule)."""
        return Jet(
            f0,
            unevaluated_product(f1, self.mean),
            tuple((k, unevaluated_product(f1, c)) for k, c in self.linear),
            unevaluated_sum(
                [unevaluated_product(f1, self.drift), unevaluated_product(sp.S.Half, f2, self.second_moment())]
            ),
        )


def jet_sum(jets: list[Jet]) -> Jet:
    """The jet of a sum: each part (value, mean, loadings, drift) summed, loadings matched by noise entry."""
    linear: dict[int, list[sp.Expr]] = {}
    for jet in jets:
        for k, c in jet.linear:
            linear.setdefault(k, []).append(c)
    return Jet(
        unevaluated_sum([j.value for j in jets]),
        unevaluated_sum([j.mean for j in jets]),
        tuple((k, unevaluated_sum(cs)) for k, cs in sorted(linear.items())),
        unevaluated_sum([j.drift for j in jets]),
    )


def jet_product(a: Jet, b: Jet) -> Jet:
    """The jet of a product by Leibniz and Ito: the order-h part gains the cross term of the two first-order parts,
    a.mean b.mean + sum_k a.linear[k] b.linear[k] (E eps_k eps_l = [k = l] h)."""
    linear: dict[int, list[sp.Expr]] = {k: [unevaluated_product(a.value, c)] for k, c in b.linear}
    for k, c in a.linear:
        linear.setdefault(k, []).append(unevaluated_product(c, b.value))
    b_linear = dict(b.linear)
    cross = unevaluated_sum(
        [
            unevaluated_product(a.mean, b.mean),
            *[unevaluated_product(c, b_linear[k]) for k, c in a.linear if k in b_linear],
        ]
    )
    return Jet(
        unevaluated_product(a.value, b.value),
        unevaluated_sum([unevaluated_product(a.value, b.mean), unevaluated_product(a.mean, b.value)]),
        tuple((k, unevaluated_sum(cs)) for k, cs in sorted(linear.items())),
        unevaluated_sum([unevaluated_product(a.value, b.drift), unevaluated_product(a.drift, b.value), cross]),
    )


class Expansion:
    """Jets of the nodes of one expression tree (memoised: shared subexpressions are expanded once)."""

    _t = sp.Dummy("t", real=True)

    def __init__(self, noise: list[sp.Symbol]):
        self.index = {z: k for k, z in enumerate(noise)}
        self.active = {s, *noise}
        self.depends = Dependence(self.active)
        self._seen: dict[sp.Expr, Jet] = {}

    def __call__(self, expr: sp.Expr) -> Jet:
        if expr not in self._seen:
            self._seen[expr] = self._jet(expr)
        return self._seen[expr]

    def _jet(self, expr: sp.Expr) -> Jet:
        if not self.depends(expr):
            return Jet(expr)
        if expr == s:
            return Jet(sp.S.Zero, sp.S.One)
        if expr in self.index:
            return Jet(sp.S.Zero, linear=((self.index[expr], sp.S.One),))
        if expr.is_Add:
            return jet_sum([self(arg) for arg in expr.args])
        if expr.is_Mul:
            jets = [self(arg) for arg in expr.args]
            out = jets[0]
            for jet in jets[1:]:
                out = jet_product(out, jet)
            return out
        if expr.is_Pow and not self.depends(expr.exp):
            base, p = self(expr.base), expr.exp
            u = base.value
            power = (lambda q: sp.Pow(u, q, evaluate=False)) if u is not sp.S.Zero else (lambda q: sp.S.Zero**q)
            return base.through(
                power(p), unevaluated_product(p, power(p - 1)), unevaluated_product(p * (p - 1), power(p - 2))
            )
        if expr.is_Pow:
            return self(sp.exp(expr.exp * sp.log(expr.base)))
        if isinstance(expr, sp.Function) and len(expr.args) == 1:
            inner = self(expr.args[0])
            f = expr.func(self._t)
            at = {self._t: inner.value}
            return inner.through(f.xreplace(at), f.diff(self._t).xreplace(at), f.diff(self._t, 2).xreplace(at))
        raise NotImplementedError(
            f"one_step_limit cannot expand {type(expr).__name__} ({expr}) where it depends on "
            "h or the noise: write the step with +, *, powers and functions of one argument"
        )
