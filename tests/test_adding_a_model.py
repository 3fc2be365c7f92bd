"""Adding a model the documented way (docs/how-to.md, "Add a model"): the how-to's module, saved as is into a
temporary package, is found by the conformance tests through one name, and every property runs and passes on it;
the same module with a wrong Ito factor ((d - 2)/2 for (d - 1)/2) fails them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_BLOCK = re.compile(r"^```python\n(# linear_noise\.py\n.*?)^```", re.S | re.M)


def _how_to_module() -> str:
    found = MODULE_BLOCK.findall((ROOT / "docs" / "how-to.md").read_text())
    assert len(found) == 1, "docs/how-to.md must show the linear_noise.py module once"
    return found[0]


def _conformance(source: str, folder: Path) -> subprocess.CompletedProcess:
    """tests/test_conformance.py over the models of ``source``, saved as ``mymodels/linear_noise.py``."""
    package = folder / "mymodels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "linear_noise.py").write_text(source)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "DEPTH_LIMITS_MODEL_MODULES": "mymodels.linear_noise",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n0",
            "-p",
            "no:cacheprovider",
            "-rA",
            "tests/test_conformance.py",
            "-k",
            "linear",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_how_to_model_passes_every_conformance_property(tmp_path):
    run = _conformance(_how_to_module(), tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = set(re.findall(r"PASSED tests/test_conformance.py::(\w+)\[linear noise\]", run.stdout))
    # every property: exemptions, protocols, shapes, sphere, tangent diffusion, permutation, rotation, the drift
    # verify derives, local consistency (none exempt for this model)
    assert len(passed) == 9, sorted(passed)
    assert "skipped" not in run.stdout.splitlines()[-1], run.stdout[-2000:]


def test_the_how_to_model_with_a_wrong_ito_factor_fails_them(tmp_path):
    source = _how_to_module()
    wrong = source.replace(
        "-0.5 * (self.dim - 1) * self.model.sigma**2 * x", "-0.5 * (self.dim - 2) * self.model.sigma**2 * x"
    )
    assert wrong != source
    run = _conformance(wrong, tmp_path)
    assert run.returncode == 1, run.stdout[-4000:]
    failed = set(re.findall(r"FAILED tests/test_conformance.py::(\w+)\[linear noise\]", run.stdout))
    assert {
        "test_limit_drift_equals_the_drift_verify_derives",
        "test_local_consistency_at_the_canonical_states",
    } <= failed, run.stdout[-3000:]
