"""Speed, measured side by side in one run (``python -m convergence bench``).

Workload (the issue's reference): model F with n = 2 tokens in d = 16, 4096 paths, 64 steps of h = 1/64
(262144 path-steps). Rates are path-steps per second, best of ``repeats`` runs after one warm-up:

* ``layer_full``    the discrete layer map with the full d x d value matrix (seeded per-path draws included);
* ``draw_only``     the same random numbers drawn alone, in the same chunks (the floor of ``layer_full``);
* ``layer_reduced`` the reduced sampler (V a_i drawn from their joint law: d n normals per step);
* ``euler_sde``     Euler-Maruyama of model F's limit SDE (the derived Ito drift), one process;
* ``euler_sde_2p``  the same on a local dask cluster of 1 and of 2 worker processes (the same 4096 paths as the
  peers, in blocks of ``parallel_block`` paths);
* ``euler_sde_reduced`` the same SDE with its noise drawn in the reduced form (``dW a_i`` from their joint law:
  the same SDE in law, d n normals per step, not the same Brownian matrix path), 1 and 2 processes;
* ``per_path_loop`` a plain loop over paths and layers with numpy on single paths (on a subset of paths);
* ``model_a``       model A (attention + frozen-feature ReLU MLP of width 64) with N = 1024 tokens;
* ``diffrax`` / ``torchsde`` the same limit SDE with Euler steps on the CPU when installed (extra ``[peers]``):
  diffrax with jit, vmap and an unsafe Brownian path, torchsde with a hand-written ``g_prod``;
* ``*_d64`` / ``*_d128`` the Euler rows, diffrax and torchsde at d = 64 and 128 (paths scaled by (16/d)^2, at least
  four seed blocks, same steps), and the reduced Euler row on 2 processes;
* ``strong_workload_d*`` the strong study's coupled run on one Brownian path per sample: every level of the
  ladder L = 8 .. 128 and the Euler reference at T/2048 (rate: fine path-steps per second); ``_low_rank``: the same
  ladder with the exact low-rank coupling (``convergence._experiments.strong_low_rank``: d m normals per fine step,
  m = n x levels);
* cost curves (``convergence._performance.cost``): time against tokens, dimension, depth, paths and width, with fitted
  exponents;
* a user's own checks (``convergence._performance.user_checks``): local, strong and weak on model F, n = 2, d = 16,
  true claim and drift x 1.05, at their defaults: the verdict and the CPU in ref units against a budget;
* variance reduction (``convergence._performance.variance``): each lever's variance factor and cost factor, measured.

Like-for-like against the peers means the same SDE with the full d x d Brownian matrix *in law*: the reduced
Euler rows draw the matrix's action on the attention vectors from its exact joint law
(``convergence._models.fedorov_reduced``), which is that law; the full-matrix rows draw every entry, as the peers do.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import asdict, replace

import numpy as np

from verify._analysis import KernelSpec

from .._experiments import StrongDesign, coupled_strong_errors, coupled_strong_errors_low_rank
from .._models import AgazziModel, FedorovModel, FrozenFeatureField, LayerMap, ReducedFedorov
from .._paths import EulerMaruyama, simulate
from .._runtime import SEED_BLOCK, measure_reference, random_stream, scheduler
from .cost import cost_curves
from .peers import diffrax_euler, torchsde_euler
from .user_checks import user_check_costs
from .variance import variance_reduction
from .workload import BenchConfig, best_time, draw_only, per_path_draws, per_path_loop

LARGE_DIMS = (64, 128)
STRONG_DEPTHS, STRONG_REFERENCE_FACTOR = (8, 16, 32, 64, 128), 16  # strong-fedorov's quick ladder


def _rate(path_steps: int, seconds: float) -> dict:
    """A bench row: its seconds and its path-steps per second."""
    return {"seconds": seconds, "path_steps_per_s": path_steps / seconds}


def run_benchmarks(config: BenchConfig = BenchConfig(), progress: Callable[[str], None] = lambda name: None) -> dict:
    """Every measurement of the module docstring, in one run; returns rates and the derived ratios."""
    progress("reference kernel")
    ref = measure_reference()  # first, alone: every cost below is also given in its units
    rates: dict[str, dict | None] = {}

    def measure(name: str, run: Callable[[], object] | None, work: int) -> None:
        """Time ``run`` as the row ``name`` (None: a peer that is not installed)."""
        if run is None:
            rates[name] = None
            return
        progress(name)
        rates[name] = _rate(work, best_time(run, config.repeats))

    _model_f_rows(config, measure)
    for dim in LARGE_DIMS:
        _large_dimension_rows(config, dim, measure)
    for dim in (config.dim, *LARGE_DIMS):
        _strong_rows(config, dim, measure)
    curves = cost_curves(best_time, config.cost_repeats, progress) if config.cost_repeats else {}
    users = user_check_costs(ref, progress=progress) if config.user_checks else []
    if config.variance:
        progress("variance reduction")
    levers = variance_reduction() if config.variance else {}
    ratios = derived_ratios(rates)
    return {
        "user_checks": users,
        "variance_reduction": levers,
        "config": asdict(config),
        "ref_s": ref,
        "rates": rates,
        "ratios": ratios,
        "machine": machine(),
        "notes": notes(rates, ratios, config),
        "cost_curves": curves,
    }


Measure = Callable[[str, Callable[[], object] | None, int], None]  # run_benchmarks's measure(name, run, work)


def _forward(layer_map: LayerMap, paths: int, depth: int, block: int | None = None) -> Callable[[], object]:
    """A timed run: ``simulate`` of ``layer_map`` over ``depth`` steps to T = 1 in blocks of ``block`` paths."""
    return lambda: simulate(layer_map, depth, 1.0, paths, seed=0, block_paths=block or paths)


def _model_f_rows(config: BenchConfig, measure: Measure) -> None:
    """Model F at the configuration's d: the draws alone, the layer maps, the Euler-Maruyama limit, the per-path loops,
    model A, the in-process and process-pool runs and the peers."""
    h, path_steps = 1.0 / config.steps, config.paths * config.steps
    model = FedorovModel(config.tokens, config.dim, 1.0)
    measure("draw_only", lambda: draw_only(model, config.paths, config.steps, h), path_steps)
    measure("layer_full", _forward(model, config.paths, config.steps), path_steps)
    measure("layer_reduced", _forward(ReducedFedorov(model), config.paths, config.steps), path_steps)
    euler = EulerMaruyama(model.limit_sde())
    measure("euler_sde", _forward(euler, config.paths, config.steps), path_steps)
    x0 = random_stream(1).standard_normal((config.loop_paths, config.tokens, config.dim))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    loop_work = config.loop_paths * config.steps
    measure("per_path_loop", lambda: per_path_loop(model, x0, config.steps, h), loop_work)
    measure("per_path_draws", lambda: per_path_draws(config.dim, config.loop_paths, config.steps), loop_work)
    field = FrozenFeatureField.draw(KernelSpec("relu", config.dim), 64, random_stream(2))
    model_a = AgazziModel(config.model_a_tokens, field, 1.0, 1.0)
    measure(
        "model_a",
        _forward(model_a, config.model_a_paths, config.model_a_steps),
        config.model_a_paths * config.model_a_steps,
    )
    euler_reduced = EulerMaruyama(ReducedFedorov(model).limit_sde())
    measure("euler_sde_reduced", _forward(euler_reduced, config.paths, config.steps), path_steps)
    block = config.parallel_block
    measure("euler_sde_1p_sync", _forward(euler, config.paths, config.steps, block), path_steps)
    for workers in (1, 2):
        with scheduler("processes", workers=workers):
            measure(f"euler_sde_{workers}p", _forward(euler, config.paths, config.steps, block), path_steps)
            if workers == 2:
                measure("euler_sde_reduced_2p", _forward(euler_reduced, config.paths, config.steps, block), path_steps)
    for name, build in (("diffrax", diffrax_euler), ("torchsde", torchsde_euler)):
        measure(name, build(config, float(model.sigma)), path_steps)


def _large_dimension_rows(config: BenchConfig, dim: int, measure: Measure) -> None:
    """The Euler-Maruyama rows and the peers at a larger d, with paths scaled to keep the work comparable."""
    # at least four seed blocks, so that two processes have two each: every row of this d at the same paths
    large = replace(config, dim=dim, paths=max(4 * SEED_BLOCK, config.paths * config.dim**2 // dim**2))
    large_model = FedorovModel(config.tokens, dim, 1.0)
    work = large.paths * large.steps
    euler_large = EulerMaruyama(large_model.limit_sde())
    euler_reduced_large = EulerMaruyama(ReducedFedorov(large_model).limit_sde())
    measure(f"euler_sde_d{dim}", _forward(euler_large, large.paths, config.steps), work)
    measure(f"euler_sde_reduced_d{dim}", _forward(euler_reduced_large, large.paths, config.steps), work)
    for peer, build in (("diffrax", diffrax_euler), ("torchsde", torchsde_euler)):
        measure(f"{peer}_d{dim}", build(large, float(large_model.sigma)), work)
    with scheduler("processes", workers=2):
        measure(
            f"euler_sde_reduced_2p_d{dim}",
            _forward(euler_reduced_large, large.paths, config.steps, large.paths // 2),
            work,
        )


def _strong_rows(config: BenchConfig, dim: int, measure: Measure) -> None:
    """The strong experiment's coupled errors at d, by the full and the low-rank runner."""
    strong_model = FedorovModel(config.tokens, dim, 1.0)
    design = StrongDesign(
        depths=STRONG_DEPTHS,
        horizon=1.0,
        reference_factor=STRONG_REFERENCE_FACTOR,
        paths=max(2, config.strong_paths * config.dim**2 // dim**2),
    )
    work = design.paths * design.fine_steps
    measure(
        f"strong_workload_d{dim}",
        lambda: coupled_strong_errors(strong_model, strong_model.limit_sde(), design, 0, (0,)),
        work,
    )
    measure(
        f"strong_workload_low_rank_d{dim}", lambda: coupled_strong_errors_low_rank(strong_model, design, 0, (0,)), work
    )


def notes(rates: dict, ratios: dict, config: BenchConfig) -> list[str]:
    """What the numbers mean (written into performance.md)."""
    speed = {name: entry["path_steps_per_s"] for name, entry in rates.items() if entry is not None}
    normals = config.dim * config.dim
    out = [
        f"The full-matrix sampler draws d^2 = {normals} normals per path-step: drawing them alone runs at "
        f"{speed['draw_only']:.3g} path-steps/s ({speed['draw_only'] * normals / 1e6:.0f} M normals/s), a floor "
        f"for every full-matrix sampler. The plain per-path loop spends "
        f"{speed['per_path_loop'] / speed['per_path_draws']:.0%} of its time drawing the same numbers, so "
        f"vectorisation can remove at most its other "
        f"{1 - speed['per_path_loop'] / speed['per_path_draws']:.0%}: the vectorised sampler is "
        f"{ratios['layer_full_over_per_path_loop']:.3g} times faster, and no full-matrix sampler drawing these "
        f"normals with numpy could be {speed['draw_only'] / speed['per_path_loop']:.3g} times faster or more.",
        "The reduced sampler draws d n normals per path-step; for two tokens its attention weights and Gram factor "
        "are closed forms in s = x1 + x2 and e = x2 - x1 (reduced.two_token_factor): a few passes over the tokens "
        "instead of batched 2 x 2 matrix products, which numpy runs one small matrix at a time.",
        "Peers draw every entry of the d x d Brownian matrix. The targets (2x diffrax, 10x torchsde) are stated on "
        "the same SDE with the full matrix in law: the reduced rows draw the matrix's action on the attention "
        "vectors from its exact joint law (d n normals per step, an algorithmic saving the peers could also make); "
        "the full-matrix rows (euler_2_processes_over_*) are reported beside them.",
        f"Process speed-up: Euler-Maruyama on the limit SDE, the peers' {config.paths} paths in "
        f"{config.parallel_block}-path blocks on a local dask cluster of 1 and 2 worker processes (cluster start-up "
        "excluded; warm-up run first).",
        f"One dask worker runs the same blocks at {speed['euler_sde_1p'] / speed['euler_sde_1p_sync']:.2g} times the "
        "in-process speed (euler_sde_1p against euler_sde_1p_sync): the local cluster starts its workers with a fixed "
        "glibc mmap threshold, without which dask's MALLOC_TRIM_THRESHOLD_ made every block 1.7 times slower.",
    ]
    if rates.get("diffrax") is not None:
        out.append(
            "diffrax: jax.jit(jax.vmap(diffeqsolve)) with Euler, UnsafeBrownianPath over the d x d matrix "
            "Brownian motion, ForwardMode adjoint, float64, XLA on the CPU (which may use both cores)."
        )
    if rates.get("torchsde") is None:
        out.append(
            "torchsde: not installed here (PyPI's torch wheels pull multi-gigabyte CUDA packages); the "
            "benchmark runs it when `pip install .[peers]` brings it."
        )
    else:
        import torch

        out.append(
            "torchsde: sdeint with method='euler', general Ito noise with a hand-written g_prod, a fresh "
            f"BrownianInterval over the d x d matrix per run, float64, CPU, {torch.get_num_threads()} torch "
            "threads (the drift and g_prod are checked against ours in tests/test_execution.py)."
        )
    return out


def derived_ratios(rates: dict) -> dict:
    """The ratios the targets are stated in (None where a peer is not installed)."""

    def speed(name):
        entry = rates.get(name)
        return None if entry is None else entry["path_steps_per_s"]

    def ratio(a, b):
        return None if speed(a) is None or speed(b) is None else speed(a) / speed(b)

    return {
        "layer_full_time_over_draw_time": ratio("draw_only", "layer_full"),
        "reduced_over_full": ratio("layer_reduced", "layer_full"),
        "layer_full_over_per_path_loop": ratio("layer_full", "per_path_loop"),
        "euler_2_processes_over_1": ratio("euler_sde_2p", "euler_sde_1p"),
        "euler_2_processes_over_diffrax": ratio("euler_sde_2p", "diffrax"),
        "euler_2_processes_over_torchsde": ratio("euler_sde_2p", "torchsde"),
        "euler_reduced_2_processes_over_diffrax": ratio("euler_sde_reduced_2p", "diffrax"),
        "euler_reduced_2_processes_over_torchsde": ratio("euler_sde_reduced_2p", "torchsde"),
        "euler_1_process_over_diffrax": ratio("euler_sde", "diffrax"),
        **{
            f"euler_reduced_over_diffrax_d{dim}": ratio(f"euler_sde_reduced_d{dim}", f"diffrax_d{dim}")
            for dim in LARGE_DIMS
        },
        **{f"euler_full_over_diffrax_d{dim}": ratio(f"euler_sde_d{dim}", f"diffrax_d{dim}") for dim in LARGE_DIMS},
        **{
            f"euler_reduced_2_processes_over_{peer}_d{dim}": ratio(f"euler_sde_reduced_2p_d{dim}", f"{peer}_d{dim}")
            for dim in LARGE_DIMS
            for peer in ("diffrax", "torchsde")
        },
        **{
            f"strong_low_rank_over_full_d{dim}": ratio(f"strong_workload_low_rank_d{dim}", f"strong_workload_d{dim}")
            for dim in (16, *LARGE_DIMS)
        },
    }


TARGETS = {  # ratio name -> (comparison, bound), from the issue
    "layer_full_time_over_draw_time": ("<=", 1.3),
    "reduced_over_full": (">=", 5.0),
    "layer_full_over_per_path_loop": (">=", 50.0),
    "euler_2_processes_over_1": (">=", 1.7),
    "euler_reduced_2_processes_over_diffrax": (">=", 2.0),  # the same SDE, the full matrix in law
    "euler_reduced_2_processes_over_torchsde": (">=", 10.0),
    **{f"euler_reduced_2_processes_over_diffrax_d{dim}": (">=", 2.0) for dim in LARGE_DIMS},
    **{f"euler_reduced_2_processes_over_torchsde_d{dim}": (">=", 10.0) for dim in LARGE_DIMS},
}


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
