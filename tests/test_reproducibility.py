"""The reproducibility contract (``convergence._runtime.blocks``): one seed determines every number, and where the
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
import re
from pathlib import Path

import pytest

import convergence as cv
from convergence._runtime import scheduler

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

    from convergence._runtime import STREAM_KEYS
    from convergence._studies import STUDIES

    assert len(set(STREAM_KEYS.values())) == len(STREAM_KEYS), STREAM_KEYS
    for name in STUDIES:
        module = importlib.import_module(f"convergence._studies.{name.replace('-', '_')}")
        assert module.STUDY_KEY == STREAM_KEYS[name], name
    literal = re.compile(r"^\s*\w*_KEY\s*=\s*\d", re.M)  # (a sub-stream, e.g. FEATURE_STREAM = 1, is not one)
    root = Path(__file__).resolve().parents[1] / "convergence"
    own = [str(p.relative_to(root)) for p in root.rglob("*.py") if literal.search(p.read_text())]
    assert not own, f"stream keys set outside convergence._runtime.STREAM_KEYS: {own}"


# The one place that makes random streams, and the one exemption: torch's module constructors draw their parameters
# from torch's own global generator, so a block's template is built under ``torch.random.fork_rng`` after
# ``torch.manual_seed(template_seed)`` (the caller's torch state is left as it was).
SEEDING_MODULE = "verify/_common/seeds.py"
TORCH_TEMPLATE = ("convergence/_models/torch_block.py", "manual_seed(")
STREAM_MAKERS = re.compile(
    r"SeedSequence\(|default_rng\(|Generator\(|\b(PCG64|SFC64|Philox|MT19937|RandomState)\(|manual_seed\("
    r"|np\.random\.(?!Generator\b|SeedSequence\b)\w+\(|torch\.(rand|randn|randint|randperm|normal)\("
)


def test_no_module_but_the_seeding_one_makes_a_random_stream():
    """Every random number comes from ``verify._common.random_stream`` (paths through ``runtime.block_streams``): no
    other module of either package builds a ``SeedSequence``, a generator or a bit generator, or draws from numpy's or
    torch's global state."""
    made = []
    for package in ("convergence", "verify"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = STREAM_MAKERS.search(line)
                if match and name != SEEDING_MODULE and (name, match.group(0)) != TORCH_TEMPLATE:
                    made.append(f"{name}:{number}: {line.strip()}")
    assert not made, "random streams made outside verify/_common/seeds.py:\n" + "\n".join(made)


def test_the_seeding_is_numpys_seed_sequence_keyed_as_documented():
    """Exact: stream ``key`` is ``Generator(PCG64(SeedSequence(seed, spawn_key=key)))``; a seed block's two streams
    are the two children ``SeedSequence.spawn`` makes of stream ``(*key, block)`` (PCG64 and SFC64), so moving the
    construction into one module changed no path and no report (the one probe whose draws changed is derive_limit's
    smoothness probe: numpy normals where torch's were)."""
    import numpy as np

    from convergence._runtime import block_streams, random_stream, seed_words

    key = (3, 1, 4)
    expected = np.random.Generator(np.random.PCG64(np.random.SeedSequence(7, spawn_key=key))).standard_normal(5)
    np.testing.assert_array_equal(random_stream(7, key).standard_normal(5), expected)
    np.testing.assert_array_equal(random_stream(7).standard_normal(5), np.random.default_rng(7).standard_normal(5))
    initial, noise = np.random.SeedSequence(7, spawn_key=(*key, 9)).spawn(2)
    made = block_streams(7, 9, key)
    np.testing.assert_array_equal(made[0].random(4), np.random.Generator(np.random.PCG64(initial)).random(4))
    np.testing.assert_array_equal(made[1].random(4), np.random.Generator(np.random.SFC64(noise)).random(4))
    words = np.random.SeedSequence(7, spawn_key=key).generate_state(3, dtype=np.uint32)
    np.testing.assert_array_equal(seed_words(7, key, 3), words)
    with pytest.raises(ValueError, match="key entry"):
        random_stream(7, (1, -2))
    with pytest.raises(ValueError, match="bits"):
        random_stream(7, (), "mt19937")
