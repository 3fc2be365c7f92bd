"""Schedulers, block sizes and the resumable block cache (``convergence._runtime.execution``, ``block_cache``)."""

import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from convergence._cli import main
from convergence._experiments import (
    LocalDesign,
    MeanFieldDesign,
    MeanFieldSection,
    StrongDesign,
    coupled_strong_errors,
    local_checks,
    mean_field_section,
    states_for,
)
from convergence._models import FedorovModel
from convergence._paths import RecordGrid, simulate
from convergence._runtime import (
    BlockCache,
    as_finished,
    caching,
    concurrent_map,
    cpu_meter,
    keep_freed_memory,
    map_blocks,
    scheduler,
    shared_result,
)

ROOT = Path(__file__).resolve().parent.parent


def _strong_data(paths: int = 256):
    model = FedorovModel(3, 4, 1.0)
    design = StrongDesign(depths=(4, 8, 16), horizon=1.0, reference_factor=8, paths=paths, block_paths=128)
    data = coupled_strong_errors(model, model.limit_sde(), design, seed=5, key=(1, 2))
    return np.concatenate([data.final_sq, data.sup_sq, data.reference_sq], axis=1)


def test_an_existing_cluster_and_any_task_size_give_identical_numbers():
    from distributed import LocalCluster

    reference = _strong_data()
    with scheduler("sync", task_paths=256):
        assert_array_equal(_strong_data(), reference)
    # local clusters of one and two processes: tests/test_reproducibility.py; here an existing cluster, reached
    # through its scheduler's address (what --scheduler tcp://host:port does)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        scheduler(cluster.scheduler_address, task_paths=256),
    ):
        assert_array_equal(_strong_data(), reference)


def _small_run(key: int) -> np.ndarray:
    return simulate(FedorovModel(2, 3, 1.0), 4 + key, 1.0, 192, seed=3, key=(key,), block_paths=64)


def test_concurrent_runs_on_workers_give_the_in_process_numbers_in_item_order():
    keys = [3, 0, 2, 1]
    reference = [_small_run(key) for key in keys]
    assert_array_equal(np.concatenate(concurrent_map(_small_run, keys)), np.concatenate(reference))
    with scheduler("processes", workers=2), cpu_meter() as clock:
        results = concurrent_map(_small_run, keys, threads=3)
    assert len(results) == len(keys)
    for result, expected in zip(results, reference):
        assert_array_equal(result, expected)
    assert clock.total() > clock.serial()  # the workers' blocks are charged to the caller


def test_local_checks_do_not_depend_on_the_sample_blocks():
    model = FedorovModel(2, 3, 1.0)
    states = states_for(2, 3, ("uniform", "merged"), 0, (5,))
    design = LocalDesign(samples=8192, target=0.5, state_target=0.5)

    def estimates():
        return [(c.estimate, c.ci) for c in local_checks(model, model.limit_sde(), states, design, 1, (6,))]

    reference = estimates()
    with scheduler("sync", task_paths=8192):  # one task of both 4096-sample blocks
        assert estimates() == reference


def test_as_finished_yields_every_item_once_and_raises_a_calls_error():
    assert sorted(as_finished(lambda x: x * x, [1, 2, 3], threads=2)) == [(0, 1), (1, 4), (2, 9)]

    def failing(x):
        if x == 2:
            raise ZeroDivisionError("item 2")
        return x

    with pytest.raises(ZeroDivisionError, match="item 2"):
        list(as_finished(failing, [1, 2, 3], threads=1))
    with pytest.raises(ValueError, match="threads"):
        list(as_finished(failing, [1], threads=0))


def test_the_cache_fingerprint_covers_the_source_of_both_packages():
    """A cache never outlives a code change: the fingerprint hashes every source file, this module's own and
    verify's included (it once hashed none, after the runtime moved a level down)."""
    from convergence._runtime import block_cache

    sources = block_cache.fingerprinted_sources()
    root = Path(__file__).resolve().parents[1]  # the checkout, found independently of the module under test
    assert Path(block_cache.__file__).resolve() in sources
    assert (root / "verify" / "__init__.py") in sources and (root / "convergence" / "__init__.py") in sources
    assert len(sources) == len(list(root.glob("convergence/**/*.py"))) + len(list(root.glob("verify/**/*.py")))


def test_cache_reuses_intact_entries_and_recomputes_corrupted_or_foreign_ones(tmp_path):
    calls = []

    def task(start, stop, progress):
        calls.append(start)
        return {"x": np.arange(start, stop, dtype=float), "pair": (np.ones(2) * start, np.zeros((stop - start, 3)))}

    scope = {"study": "unit", "profile": "quick", "seed": 0}
    with caching(tmp_path, scope) as first:
        fresh = map_blocks(task, 256, 64, "task")
    assert first.computed == 4 and calls == [0, 64, 128, 192]
    with caching(tmp_path, scope, resume=True) as second:
        reused = map_blocks(task, 256, 64, "task")
    assert second.reused == 4 and second.computed == 0 and len(calls) == 4
    for a, b in zip(fresh, reused):
        assert_array_equal(a["x"], b["x"])
        assert_array_equal(a["pair"][0], b["pair"][0])
    entries = sorted(tmp_path.glob("*.npz"), key=lambda p: p.stat().st_mtime)
    entries[0].write_bytes(entries[0].read_bytes()[:-40])  # truncated
    # a foreign entry: another block's file under this block's name
    keys = [BlockCache(tmp_path, scope).key("task", [(s, s + 64)]) for s in (0, 64, 128, 192)]
    paths = [BlockCache(tmp_path, scope).path(k) for k in keys]
    paths[3].write_bytes(paths[2].read_bytes())
    with pytest.warns(UserWarning, match="cache entry recomputed"), caching(tmp_path, scope, resume=True) as third:
        again = map_blocks(task, 256, 64, "task")
    assert third.computed == 2 and third.reused == 2
    assert any("another configuration" in r for r in third.rejected)
    for a, b in zip(fresh, again):
        assert_array_equal(a["x"], b["x"])
    with caching(tmp_path, {**scope, "seed": 1}, resume=True) as other_seed:
        map_blocks(task, 256, 64, "task")
    assert other_seed.reused == 0  # another configuration never reads these entries


def test_one_scope_never_shares_blocks_between_seeds(tmp_path):
    """A study may run one experiment at several seeds in its scope (calibration): the seed is in the block's label,
    so a resumed run never reads one seed's blocks for another."""
    from convergence._paths import run_seeded, uniform_sphere

    def draws(streams, advance):
        return uniform_sphere(streams, 1, 3)

    scope = {"study": "unit", "profile": "quick", "seed": 0}
    with caching(tmp_path, scope):
        first = run_seeded(draws, name="draws", configuration=1, seed=5, key=(3,), paths=64, block_paths=64)
    with caching(tmp_path, scope, resume=True) as resumed:
        other = run_seeded(draws, name="draws", configuration=1, seed=6, key=(3,), paths=64, block_paths=64)
    assert resumed.reused == 0 and not np.array_equal(first[0], other[0])


def _blocks(printed: str) -> tuple[int, int]:
    """(computed, reused) from the command line's summary line."""
    match = re.search(r"blocks: (\d+) computed, (\d+) reused", printed)
    return int(match.group(1)), int(match.group(2))


TINY_DESIGN = StrongDesign(
    depths=(8, 16, 32), horizon=1.0, reference_factor=16, paths=512, block_paths=64, replicates=200
)


def _tiny_strong_fedorov(patch: pytest.MonkeyPatch) -> None:
    """strong-fedorov on a tiny design: two configurations of eight 64-path blocks each (a few seconds in all)."""
    from convergence._studies import strong_fedorov

    patch.setattr(strong_fedorov, "CONFIGS", ((2, 4), (3, 4)))
    patch.setitem(strong_fedorov.DESIGNS, "quick", TINY_DESIGN)


TINY_RUN = (
    "import sys, pytest; from tests.test_execution import _tiny_strong_fedorov; "
    "from convergence._cli import program; _tiny_strong_fedorov(pytest.MonkeyPatch()); program(sys.argv[1:])"
)


def test_a_study_killed_part_way_resumes_to_the_uninterrupted_result(tmp_path, capsys, monkeypatch):
    """SIGKILL during a run, then --resume: identical report numbers, only the missing blocks recomputed."""
    _tiny_strong_fedorov(monkeypatch)
    args = ["run", "strong-fedorov", "--profile", "quick", "--seed", "3", "--scheduler", "sync"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 3  # the tiny design leaves a claim inconclusive
    total, _ = _blocks(capsys.readouterr().out)
    assert total == 16
    whole = json.loads((tmp_path / "whole" / "strong-fedorov.json").read_text())
    out, cache = tmp_path / "killed", tmp_path / "killed" / ".cache"
    process = subprocess.Popen(
        [sys.executable, "-c", TINY_RUN, *args, "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while len(list(cache.glob("*.npz"))) < 4 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done = len(list(cache.glob("*.npz")))
    assert 4 <= done < total
    assert main([*args, "--out", str(out), "--resume"]) == 3
    computed, reused = _blocks(capsys.readouterr().out)
    assert (computed, reused) == (total - done, done)
    resumed = json.loads((out / "strong-fedorov.json").read_text())
    assert resumed["checks"] == whole["checks"] and resumed["panels"] == whole["panels"]


def test_bad_execution_options_are_rejected_with_the_parameter_name():
    with pytest.raises(ValueError, match="scheduler"), scheduler("threads"):
        pass
    with pytest.raises(ValueError, match="workers"), scheduler("processes", workers=0):
        pass
    for argv in (["--workers", "0"], ["--scheduler", "cluster"], ["--task-paths", "-3"]):
        with pytest.raises(SystemExit):
            main(["run", "strong-fedorov", *argv])


def test_the_diffrax_peer_integrates_model_f_limit_sde():
    # The benchmark's peer must be the same SDE: its drift and its diffusion applied to an increment v equal
    # FedorovSDE's drift and diffusion (dW = sigma v), path by path. Skipped (not passed) without the peers extra.
    pytest.importorskip("diffrax", reason="the diffrax peer needs the peers extra")
    import jax.numpy as jnp

    from convergence._performance.peers import diffrax_limit
    from convergence._performance.workload import BenchConfig

    config, sigma = BenchConfig(paths=4), 0.25
    drift, diffusion = diffrax_limit(config, sigma)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, config.tokens, config.dim))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    v = rng.standard_normal((4, config.dim, config.dim))
    ours = FedorovModel(config.tokens, config.dim, 1.0, sigma=sigma).limit_sde()
    for p in range(4):
        np.testing.assert_allclose(
            np.asarray(drift(0.0, jnp.asarray(x[p]), None)), ours.drift(x[p : p + 1])[0], atol=1e-15
        )
        np.testing.assert_allclose(
            np.asarray(diffusion(0.0, jnp.asarray(x[p]), None).mv(jnp.asarray(v[p]))),
            ours.diffusion(x[p : p + 1], sigma * v[p : p + 1])[0],
            atol=1e-15,
        )


def test_the_torchsde_peer_integrates_model_f_limit_sde():
    # The benchmark's peer must be the same SDE: its drift and g_prod equal FedorovSDE's drift and diffusion
    # (dW = sigma v), and g_prod equals its full matrix g applied to v. Skipped (not passed) without the extra.
    torch = pytest.importorskip("torch", reason="the torchsde peer needs the torch extra")
    pytest.importorskip("torchsde", reason="the torchsde peer needs the peers extra")
    from convergence._performance.peers import torchsde_limit
    from convergence._performance.workload import BenchConfig

    config, sigma = BenchConfig(paths=8), 0.25
    peer = torchsde_limit(config, sigma)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, config.tokens, config.dim))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    v = rng.standard_normal((8, config.dim, config.dim))
    y, tv = torch.from_numpy(x.reshape(8, -1)), torch.from_numpy(v.reshape(8, -1))
    ours = FedorovModel(config.tokens, config.dim, 1.0, sigma=sigma).limit_sde()
    np.testing.assert_allclose(peer.f(0.0, y).numpy().reshape(x.shape), ours.drift(x), atol=1e-15)
    g_prod = peer.g_prod(0.0, y, tv).numpy()
    np.testing.assert_allclose(g_prod.reshape(x.shape), ours.diffusion(x, sigma * v), atol=1e-15)
    np.testing.assert_allclose((peer.g(0.0, y) @ tv[..., None])[..., 0].numpy(), g_prod, atol=1e-14)


def _burning_study(name: str, cycles: int):
    """A study whose blocks and own thread burn CPU: its estimate is the mean of seeded draws over 4 blocks."""
    from convergence._output import StudyResult
    from convergence._runtime import map_blocks
    from convergence._statistics import PASS, Check
    from convergence._studies.base import Study

    def block(start, stop, progress):
        rng = np.random.default_rng([len(name), start])
        return np.array([sum(float(rng.standard_normal(64).sum()) for _ in range(cycles))])

    def execute(profile, seed, progress):
        values = np.concatenate(map_blocks(block, 256, 64, name))
        sum(math.sqrt(k) for k in range(20_000 * cycles))  # serial work in the study's own thread
        check = Check("mean", 0.0, float(values.mean()), (-1.0, 1.0), PASS, false_failure_rate=0.0)
        return StudyResult(study=name, profile=profile, seed=seed, params={}, checks=[check])

    return Study(name, "burns CPU", execute)


def test_concurrent_studies_give_the_same_reports_and_each_is_charged_its_own_cpu(tmp_path, monkeypatch, capsys):
    """Two studies at a time on one in-process execution: the same numbers as one at a time, and each study's
    CPU time is its own (a study charged the other's work would show about the sum)."""
    from convergence._studies import STUDIES

    monkeypatch.setitem(STUDIES, "light", _burning_study("light", 20))
    monkeypatch.setitem(STUDIES, "heavy", _burning_study("heavy", 200))
    reports = {}
    for k in ("1", "2"):
        assert (
            main(
                ["run", "light", "heavy", "--scheduler", "sync", "--concurrent-studies", k, "--out", str(tmp_path / k)]
            )
            == 0
        )
        reports[k] = {name: json.loads((tmp_path / k / f"{name}.json").read_text()) for name in ("light", "heavy")}
    for name in ("light", "heavy"):
        assert reports["1"][name]["checks"] == reports["2"][name]["checks"]
    light, heavy = reports["2"]["light"]["cpu_s"], reports["2"]["heavy"]["cpu_s"]
    assert 0 < light < 0.5 * heavy, (light, heavy)
    run = json.loads((tmp_path / "2" / "run.json").read_text())
    assert (run["studies"], run["concurrent_studies"], run["workers"]) == (["light", "heavy"], 2, 1)
    assert f"**{run['wall_s']:.0f} s wall**" in (tmp_path / "2" / "index.md").read_text()
    with pytest.raises(SystemExit):
        main(["run", "light", "--concurrent-studies", "0"])
    assert "--concurrent-studies" in capsys.readouterr().err


def test_studies_start_in_order_of_the_wall_time_their_last_report_allows(tmp_path, monkeypatch):
    """A study whose last report had more serial CPU starts first even with less CPU in all (its serial part cannot
    be spread over workers); the run records when each study ran, and each report its serial CPU."""
    from convergence._studies import STUDIES

    monkeypatch.setitem(STUDIES, "light", _burning_study("light", 2))
    monkeypatch.setitem(STUDIES, "heavy", _burning_study("heavy", 3))
    previous = {"light": (100.0, 90.0), "heavy": (150.0, 0.0)}  # shortest walls on 2 cores: 95 s and 75 s
    for name, (cpu, serial) in previous.items():
        report = {
            "study": name,
            "profile": "quick",
            "verdict": "pass",
            "checks": [],
            "cpu_s": cpu,
            "serial_cpu_s": serial,
        }
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
    monkeypatch.setattr("convergence._cli.available_cores", lambda: 2)
    assert (
        main(["run", "heavy", "light", "--scheduler", "sync", "--concurrent-studies", "1", "--out", str(tmp_path)]) == 0
    )
    timeline = json.loads((tmp_path / "run.json").read_text())["timeline"]
    assert [row["study"] for row in timeline] == ["light", "heavy"]
    assert timeline[0]["start_s"] <= timeline[0]["end_s"] <= timeline[1]["start_s"] <= timeline[1]["end_s"]
    for name in previous:
        data = json.loads((tmp_path / f"{name}.json").read_text())
        assert 0 < data["serial_cpu_s"] <= data["cpu_s"]


def test_models_that_differ_only_in_an_array_get_different_cache_keys(tmp_path):
    """repr prints arrays to 8 digits, so it cannot key a cache; the explicit identity does (the simulate label here):
    the second model's blocks are computed, not read from the first's entries."""
    from convergence._models import FedorovModel
    from convergence._paths import simulate
    from convergence._runtime import caching, identity

    interaction = np.eye(3)
    nudged = interaction.copy()
    nudged[0, 1] = 1e-12
    first, second = FedorovModel(2, 3, 1.0, interaction=interaction), FedorovModel(2, 3, 1.0, interaction=nudged)
    assert repr(first) == repr(second)  # what the cache labels were made of
    assert identity(first) != identity(second)
    assert identity(first) == identity(FedorovModel(2, 3, 1.0, interaction=interaction.copy()))
    with caching(tmp_path, {"study": "t"}, resume=True) as block_cache:
        simulate(first, 4, 1.0, 64, 0, (1,))
        simulate(second, 4, 1.0, 64, 0, (1,))
        simulate(FedorovModel(2, 3, 1.0, interaction=interaction.copy()), 4, 1.0, 64, 0, (1,))
    assert (block_cache.computed, block_cache.reused) == (2, 1)


def test_identity_refuses_what_it_cannot_spell_out():
    from convergence._runtime import identity

    with pytest.raises(TypeError, match="cannot identify a Generator"):
        identity(np.random.default_rng(0))
    scale = 2.0
    assert identity(lambda x: scale * x) != identity(lambda x: 3.0 * x)


def test_identity_sees_the_module_level_data_a_function_reads():
    from convergence._runtime import identity

    namespace = {"np": np, "SCALE": 2.0}
    exec("def f(x):\n    return SCALE * np.exp(x)\n", namespace)
    before = identity(namespace["f"])
    namespace["SCALE"] = 2.0 + 1e-15
    assert identity(namespace["f"]) != before
    assert "builtin(numpy.exp)" in identity(np.exp)


def test_a_cache_entry_whose_key_was_rewritten_is_rejected_when_it_is_read(tmp_path):
    scope = {"study": "unit", "profile": "quick", "seed": 0}
    cache = BlockCache(tmp_path, scope, resume=True)
    key_a, key_b = cache.key("a", [(0, 64)]), cache.key("b", [(0, 64)])
    cache.store(key_b, {"x": np.arange(3.0)})
    with np.load(cache.path(key_b)) as data:
        fields = dict(data)
    fields["__key__"] = np.array(key_a)  # another configuration's entry, relabelled
    with open(cache.path(key_a), "wb") as handle:
        np.savez(handle, **fields)
    with pytest.warns(UserWarning, match=re.escape(str(cache.path(key_a))) + ".*not authentic"):
        assert cache.load(key_a) is None
    assert cache.load(key_b)["x"].tolist() == [0.0, 1.0, 2.0]


def test_a_nested_cpu_meter_passes_its_remote_seconds_on_to_the_enclosing_one():
    """A timed public check inside a study: the work run beside the inner meter's thread (here a helper thread, as
    dask workers' blocks are) counts for both meters, not only the inner one."""
    from convergence._runtime import as_finished, cpu_meter

    def busy(_):
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass

    with cpu_meter() as outer:
        with cpu_meter() as inner:
            list(as_finished(busy, [0], 1))
        inner_total, inner_serial = inner.split()
        assert inner_total - inner_serial >= 0.2  # the helper thread's seconds, charged as remote
        total, serial = outer.split()
    assert total - serial >= 0.2


def test_a_run_refuses_to_replace_reports_of_the_other_profile_unless_told(tmp_path, capsys):
    """A quick run into a folder of full-profile reports would replace them silently; a full run into a folder of
    quick reports is refused the same way. The quick profile's default folder is reports/quick/, the full one's
    reports/local/ (the committed reports/ only when asked by name: tests/test_report_folders.py)."""
    from convergence._cli import DEFAULT_OUT, build_parser
    from convergence._output import StudyResult, write_study

    write_study(StudyResult("strong-fedorov", "full", 0, {}, []), tmp_path / "full")
    write_study(StudyResult("strong-fedorov", "quick", 0, {}, []), tmp_path / "quick")
    for profile, folder in (("quick", "full"), ("full", "quick")):
        with pytest.raises(SystemExit):
            main(["run", "strong-fedorov", "--profile", profile, "--out", str(tmp_path / folder)])
        assert f"holds reports of another profile than {profile} for strong-fedorov" in capsys.readouterr().err
        assert json.loads((tmp_path / folder / "strong-fedorov.json").read_text())["profile"] == folder  # untouched
    assert build_parser().parse_args(["run", "chaos"]).out is None  # resolved by profile:
    assert DEFAULT_OUT == {"quick": Path("reports") / "quick", "full": Path("reports") / "local"}


def test_a_shared_result_is_computed_once_for_concurrent_callers_and_read_only():
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.2)  # the other callers arrive while it runs
        return [np.arange(3.0), {"x": np.ones(2)}]

    label = "tests.test_execution: a shared result"
    results = concurrent_map(lambda _: shared_result(label, compute), range(4))
    assert len(calls) == 1 and all(r is results[0] for r in results)
    with pytest.raises(ValueError, match="read-only"):
        results[0][0][0] = 1.0

    def fail():
        calls.append(1)
        raise RuntimeError("no result")

    with pytest.raises(RuntimeError, match="no result"):
        shared_result(label + " failing", fail)
    assert_array_equal(shared_result(label + " failing", lambda: np.zeros(1)), np.zeros(1))  # not kept: computed


def test_power_judges_its_mean_field_near_misses_on_the_recordings_of_the_chaos_study(tmp_path):
    """The chaos study's section and power's (its near misses added) record alike: in one process the second computes
    no block, and its true claims' numbers are the first's."""
    grid = RecordGrid(horizon=1.0, steps=4, records=2, paths=64, block_paths=64)
    section = MeanFieldSection(MeanFieldDesign(grid, 0.5), MeanFieldDesign(grid, 0.5), tokens=4)
    seed = 80_417  # recordings no other test makes
    with caching(tmp_path, {"study": "chaos"}) as chaos_cache:
        chaos = mean_field_section(section, seed, 6, 0.01)
    with caching(tmp_path, {"study": "power"}) as power_cache:
        power = mean_field_section(section, seed, 6, 0.01, near_misses=True)
    assert chaos_cache.computed == 3 and power_cache.computed == 0
    assert len(power) > len(chaos)
    truth = {(c.name, str(c.config)): c.estimate for c in power}
    for check in chaos:
        assert truth[(check.name, str(check.config))] == check.estimate


FREED_HEAP = """
import ctypes, ctypes.util, sys
import numpy as np
from convergence._runtime import scheduler

FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
if sys.argv[1] == "scheduler":
    with scheduler("sync"):
        pass
temporary = np.ones(2**20)  # 8 MiB
del temporary
print(libc.mallinfo2().fordblks)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_the_process_that_runs_studies_keeps_freed_memory_like_the_workers():
    """After a scheduler is entered, a freed 8 MiB numpy temporary stays in the heap for the next one
    (``keep_freed_memory``); in a fresh process without it, glibc maps and unmaps it (the control)."""
    free = {
        case: int(
            subprocess.run(
                [sys.executable, "-c", FREED_HEAP, case], capture_output=True, text=True, check=True, cwd=ROOT
            ).stdout
        )
        for case in ("scheduler", "default")
    }
    assert free["scheduler"] >= 8 * 2**20 > free["default"]
    assert keep_freed_memory()


class _FunctionRecorder(cloudpickle.Pickler):
    """cloudpickle's pickler, noting every plain function without a ``__module__`` that it pickles."""

    def __init__(self, file) -> None:
        super().__init__(file)
        self.without_module: list = []

    def reducer_override(self, obj):
        if isinstance(obj, types.FunctionType) and obj.__module__ is None:
            self.without_module.append(obj)
        return super().reducer_override(obj)


def test_compiled_sympy_functions_ship_to_workers_without_a_module_search():
    """cloudpickle, which dask ships tasks with, looks a function without a ``__module__`` up in every module of
    ``sys.modules`` (about 23 ms a function with torch loaded, once per task: the calibration's law case spent its
    time there). The suite's lambdified functions carry a module: the textbook claim's Euler scheme, the derived
    drift of a normalised step, a covariance SDE, an overlap SDE's coefficients and the latent diffusion's variance
    reach none without one, and each still round-trips by value."""
    from convergence._experiments import overlap_coefficients
    from convergence._models import (
        ResidualBlock,
        covariance_limit,
        latent_diffusion,
        normalised_step,
        textbook_problems,
    )
    from convergence._paths import EulerMaruyama
    from convergence._studies.calibration_cases import textbook_claim

    shipped = {
        "Euler scheme": EulerMaruyama(textbook_claim(textbook_problems()["linear"], "ito")),
        "normalised step": normalised_step._compiled(),
        "covariance SDE": covariance_limit(ResidualBlock(2, "relu")),
        "overlap SDE": overlap_coefficients(4, 1.0, 0.5),
        "latent variance": latent_diffusion._continuous_variance(),
    }
    for name, task in shipped.items():
        recorder = _FunctionRecorder(io.BytesIO())
        recorder.dump(task)
        assert not recorder.without_module, f"{name}: {recorder.without_module}"
    variance = cloudpickle.loads(cloudpickle.dumps(shipped["latent variance"]))
    assert variance(0.5, 1.0, 0.3, 2.0) == shipped["latent variance"](0.5, 1.0, 0.3, 2.0)
