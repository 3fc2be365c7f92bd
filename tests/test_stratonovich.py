"""Claims declared in Stratonovich form (``convergence.limit_sde(..., form="stratonovich")``) are tested in their Ito
form; the conversion is checked on SDEs whose Ito form is known in closed form (Kloeden and Platen, section 4.9):
geometric Brownian motion, Brownian motion on the circle, and model F's one-token limit (Brownian motion on
S^{d-1}: dx = P_x o dW x in Stratonovich form, drift -((d - 1)/2) sigma^2 x in Ito form). A claim that forgets
the correction, or gets it (d - 2)/2, fails the comparison."""

from __future__ import annotations

import numpy as np
import pytest

import convergence as cv

A, B = 0.3, 0.7
ROTATION = np.array([[0.0, -1.0], [1.0, 0.0]])


def _gbm(drift_rate: float, form: str):
    """dx = drift_rate x dt + B x dW on R^2 (one token), a scalar noise."""
    return cv.limit_sde(
        lambda x: drift_rate * x, lambda x, dw: B * x * dw[:, None, None], 1, 2, cv.scalar_noise(), form=form
    )


def _circle(drift_factor: float, form: str, sigma: float = 0.8):
    """dx = drift_factor x dt + sigma J x dW (J the rotation generator): Brownian motion on the circle."""
    return cv.limit_sde(
        lambda x: drift_factor * sigma**2 * x,
        lambda x, dw: x @ ROTATION.T * dw[:, None, None],
        1,
        2,
        cv.scalar_noise(sigma),
        form=form,
    )


def _sphere(ito_factor: float, form: str, d: int = 5, sigma: float = 0.6):
    """One token of model F: dx = ito_factor sigma^2 x dt + P_x dW x (d x d matrix noise)."""

    def diffusion(x, dw):
        v = x @ np.swapaxes(dw, -1, -2)
        return v - np.sum(v * x, axis=-1, keepdims=True) * x

    return cv.limit_sde(lambda x: ito_factor * sigma**2 * x, diffusion, 1, d, cv.matrix_noise(d, sigma), form=form)


STATES = {"a": np.array([[0.6, 0.8]]), "b": np.array([[-1.3, 0.2]])}


@pytest.mark.parametrize(
    "stratonovich, ito, verdict",
    [
        (_gbm(A, "stratonovich"), _gbm(A + B**2 / 2, "ito"), "pass"),
        (_gbm(A, "stratonovich"), _gbm(A, "ito"), "fail"),  # the correction forgotten
        (_gbm(A, "stratonovich"), _gbm(A + 1.05 * B**2 / 2, "ito"), "fail"),
        (_circle(0.0, "stratonovich"), _circle(-0.5, "ito"), "pass"),
        (_circle(0.0, "stratonovich"), _circle(-0.45, "ito"), "fail"),
    ],
    ids=["gbm", "gbm without correction", "gbm correction x 1.05", "circle", "circle -0.45"],
)
def test_a_stratonovich_claim_has_the_closed_form_ito_drift(stratonovich, ito, verdict):
    outcome = cv.compare_limits(stratonovich, ito, STATES)
    assert outcome.verdict == verdict, outcome.table()


def test_model_fs_one_token_limit_is_brownian_motion_on_the_sphere_in_either_form():
    d = 5
    stratonovich = _sphere(0.0, "stratonovich", d)
    assert cv.compare_limits(stratonovich, _sphere(-(d - 1) / 2, "ito", d), ("uniform", "antipodal")).verdict == "pass"
    assert cv.compare_limits(stratonovich, _sphere(-(d - 2) / 2, "ito", d), ("uniform",)).verdict == "fail"
    assert "(Stratonovich, tested in Ito form)" in stratonovich.name


def test_the_correction_is_accurate_to_rounding_off_the_sphere_too():
    x = np.random.default_rng(0).standard_normal((7, 1, 2)) * 3.0
    np.testing.assert_allclose(_gbm(A, "stratonovich").drift(x), (A + B**2 / 2) * x, rtol=1e-10, atol=1e-12)


def test_an_unknown_form_is_named():
    with pytest.raises(ValueError, match="form"):
        _gbm(A, "ito-ish")
