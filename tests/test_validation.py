"""Bad input fails at once with a message naming the parameter and its allowed range."""

import numpy as np
import pytest

from convergence.cli import main
from convergence.experiments import StrongDesign
from convergence.models import FedorovModel, HybridModel
from convergence.paths import simulate
from convergence.studies import STUDIES


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
    from convergence.models import (
        AgazziModel,
        FreshFeatureField,
        FrozenFeatureField,
        GaussianField,
        ReducedFedorov,
    )
    from convergence.paths import EulerMaruyama
    from verify.analysis import KernelSpec

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
    import convergence.cli as cli

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


def test_a_full_disk_during_a_run_gives_one_message_naming_the_folders(tmp_path, capsys, monkeypatch):
    import errno

    import convergence.cli as cli

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.npz"))

    monkeypatch.setattr(cli, "_run_studies", full)
    assert main(["run", "strong-fedorov", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "No space left on device" in err and f"--out '{tmp_path}'" in err


def test_a_report_set_is_written_as_a_unit(tmp_path):
    from verify.common import atomic_write_set

    atomic_write_set({tmp_path / "a.json": b"old", tmp_path / "a.md": b"old"})
    (tmp_path / "blocked").write_text("")  # a file where the next set needs a folder: its write fails midway
    with pytest.raises(OSError):
        atomic_write_set(
            {tmp_path / "a.json": b"new", tmp_path / "blocked" / "a.png": b"new", tmp_path / "a.md": b"new"}
        )
    assert (tmp_path / "a.json").read_bytes() == b"old" and (tmp_path / "a.md").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.md", "blocked"]  # no temporary left
