"""Bad input fails at once with a message naming the parameter and its allowed range."""

import numpy as np
import pytest

from convergence._cli import main
from convergence._experiments import StrongDesign
from convergence._models import FedorovModel, HybridModel
from convergence._paths import simulate
from convergence._studies import STUDIES


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"tokens": 2, "dim": 1}, r"dim must be an integer in \[2, inf\], got 1"),
        ({"tokens": 0, "dim": 3}, r"tokens must be an integer in \[1, inf\], got 0"),
        ({"tokens": 2, "dim": 3, "sigma": -0.1}, r"sigma must be in \[0, inf\], got -0.1"),
        ({"tokens": 2, "dim": 3, "beta": float("nan")}, "beta must be finite"),
        ({"tokens": 2, "dim": 3, "beta": float("inf")}, "beta must be finite"),
        ({"tokens": 2, "dim": 3, "beta": 2e3}, r"beta must be in \[-1000, 1000\]"),
        ({"tokens": 2, "dim": 3, "law": "cauchy"}, r"law must be one of \['gaussian', 'rademacher', 'uniform'\]"),
        ({"tokens": 2, "dim": 3, "interaction": np.eye(2)}, r"interaction must have shape \(3, 3\)"),
        ({"tokens": 2, "dim": 3, "mean_value": np.full((3, 3), np.inf)}, "mean_value must have finite entries"),
    ],
)
def test_fedorov_model_rejects_bad_parameters(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        FedorovModel(**kwargs)


def test_type_errors_name_the_parameter():
    with pytest.raises(TypeError, match="tokens must be an integer"):
        FedorovModel(tokens=2.5, dim=3)
    with pytest.raises(TypeError, match="beta must be a real number"):
        FedorovModel(tokens=2, dim=3, beta="1")


def test_hybrid_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"eps must be in \[0, inf\]"):
        HybridModel(dim=3, eps=-1.0)
    with pytest.raises(ValueError, match=r"beta must be in \[-700, 700\] for the limit SDE"):
        HybridModel(dim=3, beta=800.0).limit_sde()


def test_depths_and_counts():
    model = FedorovModel(tokens=2, dim=3)
    with pytest.raises(ValueError, match=r"depth must be an integer in \[1, inf\], got 0"):
        simulate(model, 0, 1.0, 4, seed=0)
    with pytest.raises(ValueError, match=r"horizon must be in \(0, inf\]"):
        simulate(model, 4, 0.0, 4, seed=0)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, inf\], got -1"):
        simulate(model, 4, 1.0, 4, seed=-1)
    with pytest.raises(ValueError, match=r"depth must be an integer in \[1, inf\], got 0"):
        StrongDesign(depths=(0, 4))
    with pytest.raises(ValueError, match="each divide the next"):
        StrongDesign(depths=(4, 6))
    with pytest.raises(ValueError, match=r"paths must be an integer in \[2, inf\]"):
        StrongDesign(depths=(4, 8), paths=1)


def test_study_rejects_bad_profile_and_seed():
    study = STUDIES["strong-fedorov"]
    with pytest.raises(ValueError, match=r"profile must be one of \['full', 'quick'\]"):
        study.run("medium", 0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        study.run("quick", -3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "no-such-study"], "STUDY must be one of"),
        (["run", "strong-fedorov", "--seed", "-2"], "--seed must be an integer in [0, "),
        (["run", "strong-fedorov", "--seed", "abc"], "--seed must be an integer"),
        (["run", "strong-fedorov", "--profile", "huge"], "invalid choice: 'huge'"),
    ],
)
def test_command_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_command_line_rejects_a_file_as_output_folder(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x")
    with pytest.raises(SystemExit):
        main(["run", "strong-fedorov", "--out", str(target)])
    assert "--out must be a directory" in capsys.readouterr().err


def test_list_names_every_study(capsys):
    assert main(["list"]) == 0
    printed = capsys.readouterr().out
    assert all(name in printed for name in STUDIES)


def test_extreme_but_valid_inputs_stay_finite():
    """beta = 1e3, d = 2, n = 1 and 3: every layer map and limit SDE of models F, A and the hybrid stays finite."""
    from convergence._models import (
        AgazziModel,
        FreshFeatureField,
        FrozenFeatureField,
        GaussianField,
        ReducedFedorov,
    )
    from convergence._paths import EulerMaruyama
    from verify._analysis import KernelSpec

    spec = KernelSpec("tanh", 2, 0.1, 0.1)
    frozen = FrozenFeatureField.draw(spec, 8, np.random.default_rng(0))
    for n in (1, 3):
        maps = [
            FedorovModel(n, 2, 1e3),
            FedorovModel(n, 2, -1e3),
            ReducedFedorov(FedorovModel(n, 2, 1e3)),
            EulerMaruyama(FedorovModel(n, 2, 1e3).limit_sde()),
            AgazziModel(n, frozen, 1e3, 1.0),
            AgazziModel(n, frozen, 1e3, -1.0),
            AgazziModel(n, FreshFeatureField(spec, 8), 1e3, 1.0),
            AgazziModel(n, GaussianField(spec, n), 1e3, 1.0),
            EulerMaruyama(AgazziModel(n, frozen, 1e3).limit_sde()),
            HybridModel(dim=2, beta=1e3, eps=2.0) if n == 1 else FedorovModel(n, 2, 1e3, sigma=3.0),
        ]
        for layer_map in maps:
            x = simulate(layer_map, 64, 4.0, 64, seed=1)
            assert np.all(np.isfinite(x)), type(layer_map).__name__
            # normalised layers stay on the sphere exactly; the unprojected Euler scheme within O(sqrt(h))
            tolerance = 0.5 if isinstance(layer_map, EulerMaruyama) else 1e-12
            assert np.allclose(np.linalg.norm(x, axis=-1), 1.0, atol=tolerance), type(layer_map).__name__


def test_an_unwritable_output_or_cache_folder_is_refused_before_any_computing(tmp_path, capsys, monkeypatch):
    import convergence._cli as cli

    monkeypatch.setattr(cli, "_run_studies", lambda *args: pytest.fail("computed before checking the folders"))
    with pytest.raises(SystemExit):
        main(["run", "strong-fedorov", "--out", "/proc/no-such-folder"])
    assert "--out '/proc/no-such-folder': cannot write there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "strong-fedorov", "--out", str(tmp_path), "--cache", "/proc/no-such-cache"])
    assert "--cache '/proc/no-such-cache': cannot write there" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        main(["run", "strong-fedorov", "--cache", str(tmp_path / "file")])
    assert "--cache must be a directory" in capsys.readouterr().err


def test_an_observable_of_the_wrong_shape_is_refused_before_any_path_is_simulated():
    """The observable is called once on a probe before the checks draw anything: a per-token value (paths, d)
    instead of one per path is named at once, not after the simulation."""
    import time

    import convergence as cv

    model = FedorovModel(2, 4, beta=0.8, sigma=0.9)
    start = time.process_time()
    with pytest.raises(ValueError, match=r"observable f\(x\) must return an array shaped \(2,\), got \(2, 4\)"):
        cv.check_weak_limit(model, model.limit_sde(), lambda x: x[:, 0], paths=4096)
    with pytest.raises(TypeError, match="observable f"):
        cv.check_weak_order(model, lambda x: np.full(x.shape[0], "a"), paths=4096)
    assert time.process_time() - start < 1.0  # nothing simulated (a 4096-path ladder takes seconds)


@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_a_claim_without_noise_is_refused_by_the_local_check_naming_the_state(scale):
    """A zero claimed diffusion (no noise at all, or a drift-only claim of a noisy map) has no covariance for the
    local check to compare relative to: a clear error before any sample, never a ZeroDivisionError."""
    import convergence as cv

    noise = cv.field_noise((1,), scale)
    layer = cv.layer_map(lambda x, dw, h: x - h * x + dw[:, None, :], 1, 1, noise)
    claim = cv.limit_sde(lambda x: -x, lambda x, dw: 0.0 * x, 1, 1, noise)
    with pytest.raises(ValueError, match=r"claimed diffusion of claimed SDE is identically zero at state 'uniform'"):
        cv.check_local_consistency(layer, claim)
