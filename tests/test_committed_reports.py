"""The committed reports keep the suite's promise: no statistical claim check passes without a resolution within
its target, and none lacks them (certified and exact checks, whose false-failure rate is 0, state neither)."""

import json
import math
from pathlib import Path

import pytest

REPORTS = Path(__file__).resolve().parent.parent / "reports"
STUDY_REPORTS = sorted(p for p in REPORTS.glob("*.json") if "checks" in json.loads(p.read_text()))


def test_there_are_committed_study_reports():
    assert len(STUDY_REPORTS) >= 9, [p.name for p in STUDY_REPORTS]


@pytest.mark.parametrize("path", STUDY_REPORTS, ids=lambda p: p.stem)
def test_every_statistical_claim_check_states_its_resolution_and_target(path):
    report = json.loads(path.read_text())
    missing, unseen = [], []
    for check in report["checks"]:
        if not check["claim"] or not check["false_failure_rate"]:
            continue
        label = f"{check['name']} {check['config']}"
        resolution, target = check.get("resolution"), check.get("target")
        if target == "none needed":  # decided by its interval alone: the note must say so
            if "no target" not in check["note"]:
                missing.append(f"{label} (no target, and its note does not say why)")
        elif resolution is None or target is None:
            missing.append(label)
        elif check["verdict"] == "pass" and not resolution <= target:
            unseen.append(f"{label}: resolution {resolution} > target {target}")
    assert not missing, f"{path.name}: {len(missing)} claim checks without a resolution or target: {missing[:5]}"
    assert not unseen, f"{path.name}: passes that cannot see their target: {unseen[:5]}"


@pytest.mark.parametrize("path", STUDY_REPORTS, ids=lambda p: p.stem)
def test_committed_reports_hold_no_non_finite_pass(path):
    for check in json.loads(path.read_text())["checks"]:
        if check["verdict"] == "pass":
            values = [check["estimate"], *check["ci"]]
            assert all(v is not None and math.isfinite(v) for v in values), (path.name, check["name"], values)
