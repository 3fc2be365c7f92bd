"""Costs in units of the reference kernel (one core drawing 10^9 standard normals): measured, carried by every
report, and shown beside seconds in the index and the benchmark."""

import json
import math

import pytest

from convergence._output import write_index
from convergence._performance.report import performance_markdown
from convergence._runtime import in_reference_units, measure_reference


def test_the_reference_kernel_is_measured_in_cpu_seconds_per_billion_normals():
    """A billion normals take seconds on any machine this runs on (about 10 s at 10^8 per second)."""
    ref = measure_reference(normals=2 * 10**6, repeats=2)
    assert math.isfinite(ref) and 0.5 < ref < 200
    assert in_reference_units(20.0, 10.0) == 2.0 and in_reference_units(20.0, None) is None


def _study(tmp_path, name: str, cpu: float, ref: float | None) -> None:
    data = {
        "study": name,
        "verdict": "pass",
        "profile": "full",
        "seed": 0,
        "elapsed_s": 1.0,
        "cpu_s": cpu,
        "checks": [],
    }
    if ref is not None:
        data["ref_s"] = ref
    (tmp_path / f"{name}.json").write_text(json.dumps(data))


def test_the_index_gives_each_study_s_cpu_in_ref_units_where_its_report_states_ref(tmp_path):
    _study(tmp_path, "a", 100.0, 10.0)
    _study(tmp_path, "b", 50.0, None)  # a report from before the reference kernel
    text = write_index(tmp_path).read_text()
    assert "| [a](a.md) | **pass** | full | 0 | 1.0 | 100.0 | 10.0 |" in text
    assert "| [b](b.md) | **pass** | full | 0 | 1.0 | 50.0 | - |" in text
    assert "10 ref over the 1 studies that state it" in text


def test_the_benchmark_report_gives_every_time_in_ref_units():
    result = {
        "config": {"repeats": 3},
        "ref_s": 8.0,
        "rates": {"layer_full": {"seconds": 2.0, "path_steps_per_s": 1.0e5}, "diffrax": None},
        "ratios": {},
        "machine": {"cpus": 2, "processor": "x", "python": "3", "numpy": "2"},
        "notes": [],
    }
    text = performance_markdown(result)
    assert "| `layer_full` | 2.000 | 0.25 | 1e+05 |" in text and "ref = 8 CPU s" in text


@pytest.mark.parametrize("ref", [0.0, None])
def test_without_a_reference_there_are_no_ref_units(ref):
    assert in_reference_units(5.0, ref) is None
