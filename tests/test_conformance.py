"""Conformance of every registered model (``convergence._models.registry``): one parametrised test per property.

``DEPTH_LIMITS_MODEL_MODULES`` (comma-separated importable module names, each defining ``EXAMPLES``) adds models of
another package to the ones checked, the way docs/how-to.md adds a model (``tests/test_adding_a_model.py`` does so
from a temporary package)."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
import sympy as sp

from convergence._experiments import LocalDesign, local_checks, states_for
from convergence._models import (
    CONFORMANCE,
    MODEL_MODULES,
    MODELS,
    ClaimingModel,
    FedorovModel,
    LayerMap,
    LimitSDE,
    registered,
)
from convergence._paths import PathStreams
from convergence._statistics import combine_verdicts
from verify._analysis import kernel
from verify._calculus import gram_symbol, vec_coordinates
from verify._common import Verdict
from verify._derivations import CHECKED
from verify._models import MODELS as SYMBOLIC_MODELS

from .helpers import random_tokens

EXTRA_MODULES = [m for m in os.environ.get("DEPTH_LIMITS_MODEL_MODULES", "").split(",") if m]
ALL_MODELS = registered([*MODEL_MODULES, *(importlib.import_module(m) for m in EXTRA_MODULES)])  # a name twice: error
NAMES = sorted(ALL_MODELS)
H = 0.01
_EXAMPLES = {name: ALL_MODELS[name]() for name in NAMES}


def _applies(prop: str) -> list[str]:
    """The models a conformance property runs over: those whose claims do not exempt them from it."""
    return [name for name in NAMES if prop not in _EXAMPLES[name].claims.exempt]


# each property runs over the models it applies to; every exemption is stated with its reason on the model's claims
# (and checked against the model below), never skipped
PATHWISE = _applies("pathwise")  # a limit SDE on the same Brownian increments
SYMBOLIC = _applies("symbolic")  # an isotropic verify counterpart
PERMUTABLE = _applies("permutation")  # noise not per token
ROTATABLE = _applies("rotation")


@pytest.mark.parametrize("name", NAMES)
def test_exemptions_have_reasons_and_agree_with_the_model(name):
    model = _EXAMPLES[name]
    exempt = model.claims.exempt
    assert set(exempt) <= set(CONFORMANCE) and all(isinstance(r, str) and r.strip() for r in exempt.values())
    assert ("pathwise" in exempt) == (not model.noise.brownian)
    assert ("symbolic" in exempt) == (model.claims.symbolic is None)
    assert ("permutation" in exempt) == (model.noise.shape[:1] == (model.tokens,))
    assert ("rotation" in exempt) or callable(getattr(model, "rotate_noise", None))


@pytest.mark.skipif(bool(EXTRA_MODULES), reason="the suite's own registry only")
def test_every_property_runs_and_the_registry_exempts_what_it_should():
    assert all(len(names) >= 3 for names in (PATHWISE, SYMBOLIC, PERMUTABLE, ROTATABLE))
    # the registry's own exemptions, each for its stated reason
    assert set(NAMES) - set(PATHWISE) == {"fedorov rademacher"}  # Rademacher entries: claims in law only
    assert set(NAMES) - set(SYMBOLIC) == {"agazzi frozen features"}  # frozen features are not isotropic
    assert set(NAMES) - set(PERMUTABLE) == {"agazzi gaussian field"}  # field values at the tokens: permute them too
    assert set(NAMES) - set(ROTATABLE) == {"agazzi frozen features"}  # one fixed U: no rotation acts on it


def test_a_model_unlike_verifys_declares_no_symbolic_counterpart():
    """Model F with Q^T K != I or M not a multiple of I is not verify's model F: exempt, with its reason."""
    skew = FedorovModel(2, 3, interaction=np.diag([1.0, 2.0, 3.0]))
    mean = FedorovModel(2, 3, mean_value=np.diag([0.1, 0.2, 0.3]))
    for model in (skew, mean):
        assert model.claims.symbolic is None and {"symbolic", "rotation"} <= set(model.claims.exempt)
    isotropic = FedorovModel(2, 3, interaction=np.eye(3), mean_value=0.5 * np.eye(3))
    assert isotropic.claims.symbolic is SYMBOLIC_MODELS["fedorov"]


@pytest.fixture(params=NAMES)
def model(request):
    return ALL_MODELS[request.param]()


@pytest.mark.parametrize("name", ROTATABLE)
def test_rotating_tokens_and_noise_rotates_the_layer(name):
    model = _EXAMPLES[name]
    x, dw = _tokens(model), _noise(model)
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((model.dim, model.dim)))[0]
    rotated = model.layer(x @ q.T, model.rotate_noise(dw, q), H)
    np.testing.assert_allclose(rotated, model.layer(x, dw, H) @ q.T, rtol=0, atol=1e-12)


def _tokens(model, paths=6, seed=0):
    return random_tokens(np.random.default_rng(seed), paths, model.tokens, model.dim)


def _noise(model, paths=6, seed=1):
    return PathStreams(seed, 0, paths).increments(model.noise, 1, H)[:, 0]


def test_protocols_and_declared_claims(model):
    assert isinstance(model, LayerMap) and isinstance(model, ClaimingModel)
    claims = model.claims
    assert claims.weak_order == 1.0 and claims.strong_order in (0.5, None)
    assert (claims.strong_order is not None) == model.noise.brownian
    if model.noise.brownian:
        sde = model.limit_sde()
        assert isinstance(sde, LimitSDE)
        assert (sde.tokens, sde.dim, sde.noise.shape) == (model.tokens, model.dim, model.noise.shape)


def test_noise_and_layer_shapes(model):
    x, dw = _tokens(model), _noise(model)
    assert dw.shape == (6, *model.noise.shape)
    out = model.layer(x, dw, H)
    assert out.shape == x.shape and out.dtype == np.float64 and np.all(np.isfinite(out))
    if model.noise.brownian:
        sde = model.limit_sde()
        assert sde.drift(x).shape == x.shape and sde.diffusion(x, dw).shape == x.shape


def test_layer_keeps_tokens_on_the_sphere(model):
    out = model.layer(_tokens(model), _noise(model), H)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, rtol=0, atol=1e-13)


@pytest.mark.parametrize("name", PATHWISE)
def test_limit_diffusion_is_tangent_and_linear_in_the_noise(name):
    model = _EXAMPLES[name]
    sde, x, dw = model.limit_sde(), _tokens(model), _noise(model)
    g = sde.diffusion(x, dw)
    np.testing.assert_allclose(np.sum(g * x, axis=-1), 0.0, atol=1e-13)
    np.testing.assert_allclose(sde.diffusion(x, 2.5 * dw), 2.5 * g, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", PERMUTABLE)
def test_permuting_tokens_permutes_the_layer(name):
    model = _EXAMPLES[name]
    x, dw = _tokens(model), _noise(model)
    perm = np.roll(np.arange(model.tokens), 1)
    np.testing.assert_allclose(model.layer(x[:, perm], dw, H), model.layer(x, dw, H)[:, perm], rtol=0, atol=1e-13)


@pytest.mark.parametrize("name", SYMBOLIC)
def test_limit_drift_equals_the_drift_verify_derives(name):
    model = _EXAMPLES[name]
    n = model.tokens
    system = model.claims.symbolic.checked_system(n)  # derived by verify from the layer written symbolically
    symbols = {s.name: s for s in set().union(*(c.free_symbols for v in system.drift for c in v.c))}
    values = {symbols[name]: value for name, value in model.symbolic_values().items() if name in symbols}
    x = _tokens(model, paths=1, seed=7)
    xs = [sp.Matrix(x[0, i]) for i in range(n)]
    gram = {gram_symbol(i, j): float(x[0, i] @ x[0, j]) for i in range(n) for j in range(i + 1, n)}
    numeric_kernel = kernel(model.field.spec) if hasattr(system.noise, "kernel") else None
    drift = model.limit_sde().drift(x)
    for i in range(n):
        expr = vec_coordinates(system.drift[i], xs, gram).subs(values)
        if numeric_kernel is not None:
            expr = expr.replace(
                system.noise.kernel, lambda u: sp.Float(numeric_kernel.k1 - numeric_kernel.deficit(1 - float(u)))
            )
        expected = np.array(expr, dtype=float).ravel()
        np.testing.assert_allclose(drift[0, i], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", PATHWISE)
def test_local_consistency_at_the_canonical_states(name):
    """One layer step's conditional moments against the declared limit (``convergence._experiments.local``), at a
    fixed seed: every check passes (family-wise false-failure rate 1% per model). At a generic (uniform) state: at a
    merged or antipodal pair the hybrid model's drift and diffusion vanish (relative checks are undefined there), and
    near a merged pair they are so small that the step's O(h^2) bias decides (inconclusive at this step)."""
    model = _EXAMPLES[name]
    states = states_for(model.tokens, model.dim, ("uniform",), 0, (9,))
    checks = local_checks(
        model,
        model.limit_sde(),
        states,
        LocalDesign(samples=32768, target=0.2, state_target=0.2, component_target=0.2),
        0,
        (9, 1),
    )
    assert combine_verdicts([c.verdict for c in checks]) == Verdict.PASS, [
        (c.name, c.config, c.verdict) for c in checks if c.verdict != Verdict.PASS
    ]


@pytest.mark.parametrize("name", [n for n in sorted(MODELS) if MODELS[n]().claims.symbolic is not None])
def test_the_suites_models_are_derived_from_verifys_cross_checked_layers(name):
    """A suite model's symbolic layer is one of verify's, which every derivation covers and ``crosscheck`` tests
    against an independent numpy layer (a model of another package may carry its own: docs/how-to.md)."""
    symbolic = MODELS[name]().claims.symbolic
    assert any(symbolic is SYMBOLIC_MODELS[checked] for checked in CHECKED), name


# the models docs/models.md presents (the papers' models and the calibration models): public, with their limits
PRESENTED = ("fedorov", "hybrid", "softmax hybrid", "agazzi gaussian field", "quadratic_form")


@pytest.mark.parametrize("name", PRESENTED)
def test_every_presented_model_and_its_limit_are_public(name):
    """The export rule (docs/architecture.md): the models the docs present are public examples, each with its limit
    SDE (a model registered for its conformance alone need not be)."""
    import convergence

    model = MODELS[name]()
    for cls in (type(model), type(model.limit_sde())):
        assert getattr(convergence, cls.__name__, None) is cls and cls.__name__ in convergence.__all__, cls
