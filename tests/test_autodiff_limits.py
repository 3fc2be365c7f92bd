"""Limits derived from torch modules by automatic differentiation (``convergence.derive_limit``), compared with
limits derived another way (``convergence.compare_limits``): model F's and model A's closed forms
(``convergence.FedorovSDE``, ``convergence.AgazziSDE`` with frozen tanh features and repulsive attention, numpy)
against torch modules written from the layer maps' definitions (model A's takes the step h: its attention half-step
is a drift term), and the post-LN example's limit (derived with sympy by ``verify.one_step_limit``) against the torch
``TransformerEncoderLayer``. Near misses fail: the
Ito factor (d - 2)/2, a 5% drift error, a missing tangent projection. Needs the torch extra."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import convergence as cv  # noqa: E402
import verify  # noqa: E402
from convergence._statistics import FAIL, PASS  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "post_ln_torch.py"
spec = importlib.util.spec_from_file_location("post_ln_torch", EXAMPLE)
post_ln = importlib.util.module_from_spec(spec)
spec.loader.exec_module(post_ln)

N, D, BETA, SIGMA = 3, 5, 1.3, 0.7


def _unit_tokens(seed: int, paths: int, tokens: int, dim: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((paths, tokens, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class ModelF(torch.nn.Module):
    """Model F's layer from its definition: x_i <- N(x_i + V a_i), a_i = sum_j softmax_j(beta <x_i, x_j>) x_j."""

    def __init__(self) -> None:
        super().__init__()
        self.value = torch.nn.Parameter(torch.zeros(D, D))

    def forward(self, x):
        a = torch.softmax(BETA * x @ x.transpose(-1, -2), dim=-1) @ x
        y = x + a @ self.value.T
        return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


LAYER_F = cv.torch_layer_map(ModelF, N, D, {"value": SIGMA}, name="model F in torch")
CLOSED_FORM = cv.FedorovModel(N, D, BETA, sigma=SIGMA).limit_sde()


def _model_f_claim(ito: float = (D - 1) / 2, drift_factor: float = 1.0, project: bool = True, transpose=False):
    """Model F's limit in closed form on the torch layer's noise (its part 'value', scaled by sigma)."""

    def drift(x):
        a = CLOSED_FORM.model.attention(x)
        return -drift_factor * ito * SIGMA**2 * np.sum(a * a, axis=-1, keepdims=True) * x

    def diffusion(x, parts):
        dw = parts["value"]
        v = CLOSED_FORM.model.attention(x) @ (dw if transpose else np.swapaxes(dw, -1, -2))
        return v - np.sum(x * v, axis=-1, keepdims=True) * x if project else v

    return cv.limit_sde(drift, diffusion, N, D, LAYER_F.noise)


def test_model_fs_limit_by_automatic_differentiation_is_its_closed_form():
    derived = cv.derive_limit(LAYER_F)
    outcome = cv.compare_limits(derived, _model_f_claim(), rtol=1e-10)
    assert outcome.verdict == PASS, outcome.table()
    # the closed form as the suite implements it (FedorovSDE, driven by its own d x d matrix noise of scale sigma)
    x = _unit_tokens(0, 4, N, D)
    np.testing.assert_allclose(derived.drift(x), CLOSED_FORM.drift(x), rtol=0, atol=1e-12)
    dw = np.random.default_rng(1).standard_normal((4, D * D))
    np.testing.assert_allclose(
        derived.diffusion(x, dw), CLOSED_FORM.diffusion(x, SIGMA * dw.reshape(4, D, D)), rtol=0, atol=1e-13
    )


@pytest.mark.parametrize(
    "claim, failing",
    [
        (_model_f_claim(ito=(D - 2) / 2), {"drift"}),
        (_model_f_claim(drift_factor=1.05), {"drift"}),
        (_model_f_claim(project=False), {"diffusion"}),
    ],
    ids=["(d-2)/2", "drift x 1.05", "no projection"],
)
def test_near_misses_of_model_fs_limit_fail_the_comparison(claim, failing):
    outcome = cv.compare_limits(cv.derive_limit(LAYER_F), claim, rtol=1e-8)
    assert outcome.verdict == FAIL
    assert {c.name for c in outcome.checks if c.verdict == FAIL} == failing, outcome.table()


def test_a_claim_equal_in_law_passes_and_the_note_says_it_is_not_the_same_map_of_the_noise():
    outcome = cv.compare_limits(cv.derive_limit(LAYER_F), _model_f_claim(transpose=True), rtol=1e-10)
    assert outcome.verdict == PASS, outcome.table()
    assert all("equal in law at most" in c.note for c in outcome.checks if c.name == "diffusion")


WIDTH, V, SIGMA_U, SIGMA_W = 6, -1.0, 0.3, 0.2


def _model_a():
    """Model A with frozen tanh features and repulsive attention, as the suite implements it (numpy) and as a torch
    module written from the layer map's definition, whose forward takes the step h (the attention half-step
    N(X + h v a(X)) is a drift term): derive_limit's h-derivative is exercised."""
    rng = np.random.default_rng(7)
    field = cv.FrozenFeatureField.draw(verify.KernelSpec("tanh", D, SIGMA_U, SIGMA_W), WIDTH, rng)
    model = cv.AgazziModel(N, field, beta=BETA, v=V)
    u, b = torch.from_numpy(field.u), torch.from_numpy(field.b)

    class ModelA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.omega = torch.nn.Parameter(torch.zeros(D, WIDTH + 1))

        def forward(self, x, h):
            def unit(y):
                return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)

            y = unit(x + h * V * (torch.softmax(BETA * x @ x.transpose(-1, -2), dim=-1) @ x))
            hidden = torch.tanh(y @ u.T / D**0.5 + b) / WIDTH**0.5
            psi = torch.cat([hidden, torch.full_like(hidden[..., :1], SIGMA_W)], dim=-1)
            return unit(y + psi @ self.omega.T)

    layer = cv.torch_layer_map(ModelA, N, D, {"omega": 1.0}, name="model A in torch")
    sde = model.limit_sde()
    claim = cv.limit_sde(
        sde.drift, lambda x, parts: sde.diffusion(x, parts["omega"]), N, D, layer.noise, name="AgazziSDE"
    )
    return layer, claim


def test_model_as_limit_by_automatic_differentiation_is_its_closed_form():
    layer, claim = _model_a()
    derived = cv.derive_limit(layer)
    assert cv.compare_limits(derived, claim, rtol=1e-10).verdict == PASS
    # near miss: the attention's drift left out (v = 0 in the claim), which only the h-derivative supplies
    field = cv.FrozenFeatureField.draw(verify.KernelSpec("tanh", D, SIGMA_U, SIGMA_W), WIDTH, np.random.default_rng(7))
    without = cv.AgazziModel(N, field, beta=BETA, v=0.0).limit_sde()
    wrong = cv.limit_sde(without.drift, lambda x, parts: without.diffusion(x, parts["omega"]), N, D, layer.noise)
    outcome = cv.compare_limits(derived, wrong)
    assert {c.name for c in outcome.checks if c.verdict == FAIL} == {"drift"}, outcome.table()


def test_the_post_ln_blocks_limit_by_automatic_differentiation_is_the_sympy_derived_one():
    derived = cv.derive_limit(post_ln.LAYER)
    assert cv.compare_limits(derived, post_ln.CLAIM, post_ln.STATES, rtol=1e-10).verdict == PASS
    for wrong in (post_ln.MODEL_F_FACTOR, post_ln.DRIFT_5_PERCENT):
        assert cv.compare_limits(derived, wrong, post_ln.STATES).verdict == FAIL


def test_the_derived_limit_is_a_claim_every_check_accepts():
    outcome = cv.check_local_consistency(
        post_ln.LAYER, cv.derive_limit(post_ln.LAYER), states=post_ln.STATES, target=0.02
    )
    assert outcome.verdict == PASS, outcome.table()


def test_a_state_the_step_moves_at_h_0_and_a_numpy_map_are_refused_by_name():
    off_sphere = _unit_tokens(0, 1, post_ln.N, post_ln.D)  # not on the LayerNorm sphere
    with pytest.raises(ValueError, match=r"post-LN encoder layer: the step's change at dW = 0, h = 0 must vanish"):
        cv.derive_limit(post_ln.LAYER).drift(off_sphere)
    with pytest.raises(TypeError, match="layer must be a torch layer map"):
        cv.derive_limit(cv.FedorovModel(2, 4))
    with pytest.raises(ValueError, match="claim must have the derived limit's tokens and dim"):
        cv.compare_limits(cv.derive_limit(LAYER_F), CLOSED_FORM.model.__class__(2, D).limit_sde())


def test_limits_on_differently_scaled_noises_compare_in_law_each_with_its_own_scale():
    """A claim on model F's own d x d matrix noise of scale sigma (FedorovSDE as the suite implements it) against the
    limit derived on the torch layer's packed noise of scale 1 (the part scaled by sigma inside): equal; the same
    claim with its noise's scale doubled: its covariance 4 times too large, a fail."""
    derived = cv.derive_limit(LAYER_F)
    assert cv.compare_limits(derived, CLOSED_FORM, rtol=1e-10).verdict == PASS
    doubled = cv.FedorovModel(N, D, BETA, sigma=2 * SIGMA).limit_sde()
    outcome = cv.compare_limits(derived, doubled)
    assert {c.name for c in outcome.checks if c.verdict == FAIL} >= {"diffusion"}, outcome.table()


class _ExpMinusOne(torch.autograd.Function):
    """u -> e^u - 1 with a right backward (differentiable: reverse over reverse is right) and a forward-mode rule
    right at first order only (its factor e^u detached, so forward over forward sees no curvature): the kind of rule
    torch's layer_norm has."""

    generate_vmap_rule = True

    @staticmethod
    def forward(u):
        return torch.expm1(u)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        return grad * torch.exp(ctx.saved_tensors[0])

    @staticmethod
    def jvp(ctx, tangent):
        return tangent * torch.exp(ctx.saved_tensors[0].detach())


class _Exponential(torch.nn.Module):
    """x_i <- x_i + e^{W x_i} - 1 (entrywise), W with entries of variance s^2 h: drift s^2 |x_i|^2 / 2 per entry."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(D, D))

    def forward(self, x):
        return x + _ExpMinusOne.apply(x @ self.weight.T)


def test_a_block_whose_forward_mode_rule_is_wrong_at_second_order_gets_its_drift_by_reverse_mode_with_a_warning():
    layer = cv.torch_layer_map(_Exponential, N, D, {"weight": SIGMA}, name="exponential block")
    x = np.random.default_rng(3).standard_normal((4, N, D))
    with pytest.warns(RuntimeWarning, match=r"exponential block: the drift's forward-mode curvature differs by 1 "):
        drift = cv.derive_limit(layer).drift(x)
    np.testing.assert_allclose(
        drift, np.broadcast_to(SIGMA**2 / 2 * np.sum(x * x, -1, keepdims=True), x.shape), rtol=1e-12
    )


def test_blocks_with_layer_norm_and_silu_get_their_drift_by_forward_mode_without_a_warning():
    """torch's own layer_norm (post-LN, whose forward-mode rule is wrong at second order: computed from its
    definition instead) and model F agree with reverse mode at the first state (else the warning above)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cv.derive_limit(post_ln.LAYER).drift(np.stack(list(post_ln.STATES.values())))
        cv.derive_limit(LAYER_F).drift(_unit_tokens(0, 2, N, D))


class _Gated(torch.nn.Module):
    """x <- x + out act(W x) (gate) with W and out the noise: act(W x) sits at act's kink (0) when dW = 0, so with
    ReLU, abs or a max the step is not twice differentiable in the noise (its increments have an O(sqrt(h)) mean and
    no SDE limit), while with tanh it is."""

    def __init__(self, act) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(6, D))
        self.out = torch.nn.Parameter(torch.zeros(D, 6))
        self.act = act

    def forward(self, x):
        return x + self.act(x @ self.weight.T) @ self.out.T


@pytest.mark.parametrize(
    "act, operation",
    [
        (torch.nn.ReLU(), "relu at act"),
        (torch.abs, "abs at the block"),
        (lambda z: torch.maximum(z, 0.2 * z), "maximum at the block"),
    ],
    ids=["relu", "abs", "max"],
)
def test_derive_limit_refuses_a_kink_within_the_noises_reach_and_names_it(act, operation):
    layer = cv.torch_layer_map(lambda: _Gated(act), N, D, {"weight": SIGMA, "out": SIGMA}, name="gated block")
    derived = cv.derive_limit(layer)
    x = _unit_tokens(0, 2, N, D)
    with pytest.raises(ValueError, match=f"gated block: derive_limit cannot take this block.*{operation}"):
        derived.drift(x)
    with pytest.raises(ValueError, match="not twice differentiable"):
        cv.compare_limits(derived, derived)  # a limit derive_limit refuses cannot pass a comparison


def test_derive_limit_takes_the_same_block_with_a_smooth_gate():
    layer = cv.torch_layer_map(lambda: _Gated(torch.tanh), N, D, {"weight": SIGMA, "out": SIGMA}, name="tanh gate")
    x = _unit_tokens(0, 2, N, D)
    assert np.all(np.isfinite(cv.derive_limit(layer).drift(x)))
