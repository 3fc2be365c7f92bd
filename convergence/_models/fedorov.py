"""Model F: a deep transformer with random value matrices (Fedorov et al., arXiv:2601.21942).

Layer map (docs/models.md section 1), step ``h = T / L``, tokens as rows of ``x`` shaped (paths, n, d):

    a_i   = sum_j softmax_j(beta x_i^T G x_j) x_j          G = Q^T K (default I)
    y_i   = x_i + sqrt(h) V_k a_i = x_i + h M a_i + dW_k a_i,   V_k = sqrt(h) M + Z_k
    x_i' <- y_i / |y_i|

with ``dW_k = sqrt(h) Z_k`` the increment of a d x d matrix Brownian motion whose entries have
variance ``sigma^2`` per unit time (default ``sigma^2 = 1/d``). ``sigma = 0`` gives the
deterministic attention flow ``dx_i/dt = P_{x_i} M a_i``.

Limit SDE (Ito), derived by expanding one layer to order h. Write ``delta = dW a + h M a``; then

    N(x + delta) = x + delta - <x,delta> x - <x,delta> delta - |delta|^2 x / 2
                   + (3/2) <x,delta>^2 x + O(|delta|^3).

With E[dW v v'^T dW^T] = sigma^2 <v,v'> I h:  E[<x,dWa> dWa] = sigma^2 |a|^2 x h,
E|dWa|^2 = d sigma^2 |a|^2 h, E<x,dWa>^2 = sigma^2 |a|^2 h. Collecting the order-h mean gives

    dx_i = P_{x_i} dW a_i + P_{x_i} M a_i dt - ((d - 1) / 2) sigma^2 |a_i|^2 x_i dt.

The last term is the radial Ito correction produced by the normalisation (time unit: one unit of T).
Check: on |x| = 1, d|x|^2 = 2<x, dx> + |P_x dW a|^2 has mean
(-(d-1) + tr P_x) sigma^2 |a|^2 dt = 0, so the sphere is invariant; for one token (a = x) this is
Brownian motion on S^{d-1} at rate sigma^2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from verify._common import check_choice, check_int, check_matrix, check_real
from verify._models import MODELS as SYMBOLIC

from .attention import attention_average, normalise
from .noise import ENTRY_LAWS, CommonNoise, matrix_noise
from .normalised_step import NormalisedLayerLimit
from .protocols import Claims, exemptions, in_law_only

MAX_BETA = 1e3


@dataclass(frozen=True, eq=False)
class FedorovModel:
    """Model F's layer map; ``limit_sde()`` gives its Ito limit.

    Parameters: ``tokens`` n >= 1, ``dim`` d >= 2, ``beta`` in [-1e3, 1e3], ``sigma`` >= 0 (entry
    standard deviation per unit time; None means 1/sqrt(d)), ``law`` of the value entries,
    ``interaction`` = Q^T K (d x d, None means I) and ``mean_value`` M (d x d, None means 0).
    """

    tokens: int
    dim: int
    beta: float = 1.0
    sigma: float | None = None
    law: str = "gaussian"
    interaction: np.ndarray | None = field(default=None, repr=False)
    mean_value: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_int("tokens", self.tokens, minimum=1)
        check_int("dim", self.dim, minimum=2)
        check_real("beta", self.beta, minimum=-MAX_BETA, maximum=MAX_BETA)
        sigma = 1.0 / np.sqrt(self.dim) if self.sigma is None else self.sigma
        object.__setattr__(self, "sigma", check_real("sigma", sigma, minimum=0.0))
        check_choice("law", self.law, ENTRY_LAWS)
        shape = (self.dim, self.dim)
        if self.interaction is not None:
            object.__setattr__(self, "interaction", check_matrix("interaction", self.interaction, shape))
        if self.mean_value is not None:
            object.__setattr__(self, "mean_value", check_matrix("mean_value", self.mean_value, shape))

    @classmethod
    def from_query_key(cls, query: np.ndarray, key: np.ndarray, **kwargs) -> FedorovModel:
        """Build the model from Q and K (only ``Q^T K`` matters)."""
        dim = kwargs["dim"]
        q = check_matrix("query", query, (dim, dim))
        k = check_matrix("key", key, (dim, dim))
        return cls(interaction=q.T @ k, **kwargs)

    @property
    def noise(self) -> CommonNoise:
        return matrix_noise(self.dim, self.sigma, self.law)

    @property
    def claims(self) -> Claims:
        unlike_verify = self._unlike_verify()
        return Claims(
            limit="dx_i = P_{x_i} dW a_i + [P_{x_i} M a_i - ((d-1)/2) sigma^2 |a_i|^2 x_i] dt, W a d x d matrix "
            "Brownian motion with entry variance sigma^2",
            noise_law=f"i.i.d. {self.law} value-matrix entries of variance sigma^2 h",
            strong_order=0.5 if self.law == "gaussian" else None,
            weak_order=1.0,
            symbolic=None if unlike_verify else SYMBOLIC["fedorov"],
            exempt=exemptions(
                pathwise=in_law_only(self.noise),
                symbolic=unlike_verify,
                rotation=None if self._rotatable() else "Q^T K or M does not commute with every rotation",
            ),
        )

    def _unlike_verify(self) -> str | None:
        """Why verify's model F (Q^T K = I, M = m I) is not this one, or None."""
        if self.interaction is not None and not np.array_equal(self.interaction, np.eye(self.dim)):
            return "Q^T K is not I, as in verify's model F"
        if self.mean_value is not None and not np.array_equal(
            self.mean_value, self.mean_value[0, 0] * np.eye(self.dim)
        ):
            return "the mean value M is not a multiple of I, as in verify's model F"
        return None

    def _rotatable(self) -> bool:
        return self._unlike_verify() is None  # Q^T K = I and M = m I commute with every rotation

    def symbolic_values(self) -> dict[str, float]:
        """The values of verify's model F symbols: d, beta, sigma and m (M = m I)."""
        mean = 0.0 if self.mean_value is None else float(self.mean_value[0, 0])
        return {"d": float(self.dim), "beta": self.beta, "sigma": float(self.sigma), "m": mean}

    def rotate_noise(self, dw: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The noise that makes the layer equivariant under the rotation ``q`` (tokens x -> x q^T): q dW q^T."""
        return q @ dw @ np.swapaxes(q, -1, -2)

    def attention(self, x: np.ndarray) -> np.ndarray:
        """The attention averages ``a_i(X)``, shaped like ``x``."""
        return attention_average(x, self.beta, self.interaction)

    def layer(self, x: np.ndarray, dw: np.ndarray, h: float) -> np.ndarray:
        """One layer: ``N(x_i + h M a_i + dW a_i)`` with ``dw`` = sqrt(h) Z_k shaped (paths, d, d)."""
        a = self.attention(x)
        return self.layer_from_action(x, a, a @ np.swapaxes(dw, -1, -2), h)

    def layer_from_action(self, x: np.ndarray, a: np.ndarray, applied: np.ndarray, h: float) -> np.ndarray:
        """The layer given the attention averages ``a`` and the increment's action on them, ``applied`` = dW a
        (the form ``convergence._experiments.strong_low_rank`` drives)."""
        y = x + applied
        if self.mean_value is not None:
            y += h * (a @ self.mean_value.T)
        return normalise(y)

    def limit_sde(self) -> FedorovSDE:
        return FedorovSDE(self)


@dataclass(frozen=True, eq=False)
class FedorovSDE(NormalisedLayerLimit):
    """The Ito limit of model F (derivation in the module docstring):

    ``dx_i = P_{x_i} dW a_i + [P_{x_i} M a_i - ((d-1)/2) sigma^2 |a_i|^2 x_i] dt``.

    The drift is the one ``verify._calculus.expansion`` derives for a normalised step
    (``convergence._models.normalised_step``)
    with S = E[xi xi^T] = sigma^2 |a|^2 I and mu = M a. Its coefficients are defined on all of R^d
    (evaluated at x/|x|; ``P_x`` the orthogonal projection), so an integrator that does not project
    back to the sphere sees whether the radial drift is right.
    """

    model: FedorovModel

    @property
    def noise(self) -> CommonNoise:
        return matrix_noise(self.model.dim, self.model.sigma, "gaussian")

    def _attention(self, x: np.ndarray) -> np.ndarray:
        return self.model.attention(x)

    def _moments(self, x_hat: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, ...]:
        s2 = self.model.sigma**2 * np.sum(a * a, axis=-1, keepdims=True)
        mu = np.zeros_like(x_hat) if self.model.mean_value is None else a @ self.model.mean_value.T
        return mu, s2 * x_hat, s2, self.model.dim * s2

    def _noise(self, a: np.ndarray, dw: np.ndarray) -> np.ndarray:
        return a @ np.swapaxes(dw, -1, -2)


# the registry's examples of this model (``registry``): name -> a small instance
EXAMPLES = {
    "fedorov": lambda: FedorovModel(2, 4, beta=0.8, sigma=0.9, mean_value=0.4 * np.eye(4)),
    "fedorov rademacher": lambda: FedorovModel(3, 5, beta=1.2, law="rademacher"),
}
