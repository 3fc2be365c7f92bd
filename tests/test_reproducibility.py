"""The reproducibility contract (``convergence.runtime.blocks``): one seed determines every number, and where the
work runs changes no bit of a report, for numpy and torch layer maps alike.

A public check is run in process, on one dask worker, and on two workers with tasks of two compute blocks; its
report's checks and panels (the JSON that ``Outcome.write`` writes) must be identical bit for bit. That holds by
construction: every computation sees the same compute block of paths, whatever groups blocks into tasks, and a
torch block runs on one thread wherever it runs. Another compute-block size, a design's own choice, gives the same
numbers to rounding only (tests/test_brownian.py).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import convergence as cv
from convergence.runtime import scheduler

ROOT = Path(__file__).resolve().parents[1]
EXECUTIONS = {
    "in process": ("sync", 1, None),
    "one worker": ("processes", 1, None),
    "two workers, tasks of two blocks": ("processes", 2, 2),
}


def _numpy_check() -> cv.Outcome:
    model = cv.FedorovModel(tokens=2, dim=4, beta=1.0)  # a numpy layer map; 512 paths are four blocks of 128
    return cv.check_strong_order(model, model.limit_sde(), depths=(4, 8, 16), paths=512, seed=3)


def _torch_check() -> cv.Outcome:
    spec = importlib.util.spec_from_file_location("post_ln_torch", ROOT / "examples" / "post_ln_torch.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # 8192 samples are two blocks of 4096 one-step samples per state and step
    return cv.check_local_consistency(
        example.LAYER, example.CLAIM, states={"generic": example.STATES["generic"]}, samples=8192, target=0.05, seed=3
    )


def _report(check, tmp_path: Path, label: str) -> dict:
    written = check().write(tmp_path / label.replace(" ", "-").replace(",", ""))
    data = json.loads(written["json"].read_text())
    return {"checks": data["checks"], "panels": data["panels"]}


def test_a_checks_report_is_bit_identical_on_any_scheduler_worker_count_and_task_size(tmp_path):
    checks = {"numpy": (_numpy_check, 128)}
    if importlib.util.find_spec("torch") is not None:  # the torch layer map needs the torch extra
        checks["torch"] = (_torch_check, 4096)
    reports = {kind: {} for kind in checks}
    for label, (name, workers, blocks_per_task) in EXECUTIONS.items():
        with scheduler(name, workers=workers) as execution:  # one cluster for both checks
            for kind, (check, block) in checks.items():
                execution.task_paths = None if blocks_per_task is None else blocks_per_task * block
                reports[kind][label] = _report(check, tmp_path, f"{kind} {label}")
    for kind, by_execution in reports.items():
        reference = by_execution.pop("in process")
        assert reference["checks"], f"{kind}: the check reported nothing"
        for label, report in by_execution.items():
            assert report == reference, f"{kind}: {label} differs from the in-process report"
    if "torch" not in checks:
        pytest.skip("the torch layer map's half needs the torch extra (the numpy half passed)")


def test_every_stream_key_has_one_owner_and_comes_from_the_one_table():
    """Two owners with the same first key entry would draw the same numbers: the keys are distinct, every study has
    one, and no module sets a key of its own (a literal ``STUDY_KEY = 3``)."""
    import importlib
    import re
    from pathlib import Path

    from convergence.runtime import STREAM_KEYS
    from convergence.studies import STUDIES

    assert len(set(STREAM_KEYS.values())) == len(STREAM_KEYS), STREAM_KEYS
    for name in STUDIES:
        module = importlib.import_module(f"convergence.studies.{name.replace('-', '_')}")
        assert module.STUDY_KEY == STREAM_KEYS[name], name
    literal = re.compile(r"^\s*\w*_KEY\s*=\s*\d", re.M)  # (a sub-stream, e.g. FEATURE_STREAM = 1, is not one)
    root = Path(__file__).resolve().parents[1] / "convergence"
    own = [str(p.relative_to(root)) for p in root.rglob("*.py") if literal.search(p.read_text())]
    assert not own, f"stream keys set outside convergence.runtime.STREAM_KEYS: {own}"
