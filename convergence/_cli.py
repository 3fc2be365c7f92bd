"""Command line: ``python -m convergence {list, run, report, bench}``.

    python -m convergence list
    python -m convergence run STUDY [STUDY ...] [--profile quick|full] [--seed N] [--out DIR] [execution options]
    python -m convergence report [--profile quick|full] [--seed N] [--out DIR] [execution options]
    python -m convergence bench [--out DIR] [--repeats N] [--paths N] [--breakdown]

``run`` and ``report`` write ``DIR/<study>.{json,md,png}``, ``DIR/index.md`` and ``DIR/run.json`` as one set once
every study has finished (``verify._common.files.atomic_write_set``), under ``DIR``'s lock; default ``reports/quick/``
for the quick profile, ``reports/local/`` for the full one; the committed ``reports/`` only with ``--profile full``
spelled out or ``--replace-committed``; replacing a report of the other profile is refused unless
``--replace-other-profile``. The exit status says how the run ended (``runtime.faults.Exit``): each fault is one
sentence on standard error, its traceback only with ``--debug``. A progress bar is shown when standard error is a
terminal.

Execution options (``convergence._runtime.execution``): ``--scheduler sync|processes|tcp://host:port`` (in process,
a local dask cluster of ``--workers`` processes, or an existing dask scheduler; default: processes, one per
available core, or sync on one core; every number is the same on any scheduler); ``--task-paths N`` (paths
per worker task, rounded up to whole blocks of each design; no number depends on it); every finished task is cached
under ``--cache DIR`` (default ``DIR/.cache``), and ``--resume`` reuses the intact entries of an interrupted run;
``--concurrent-studies K`` runs K studies at a time on the same workers (default 2 on more than one core), so one
study's serial work (statistics, symbolic algebra) overlaps another's blocks; each study is charged only its own
CPU time, and no number depends on K.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from verify._common import Verdict, atomic_write_set, check_int, exclusive_folder, recover_folder

from ._output import INDEX_FILE, RUN_FILE, earlier_report, index_markdown, previous_wall, run_json, study_files
from ._performance.benchmark import run_benchmarks
from ._performance.breakdown import study_breakdowns
from ._performance.report import write_performance
from ._performance.workload import BenchConfig
from ._runtime import (
    Exit,
    Fault,
    as_fault,
    as_finished,
    available_cores,
    cache_secret,
    caching,
    check_scheduler,
    default_scheduler,
    reference_seconds,
    scheduler,
    terminate_as_interrupt,
)
from ._studies import HEADLINES, PROFILES, STUDIES, progress_bars


def _folder(option: str):
    """An argparse type: a folder path (``option`` names it in the error when it is an existing file)."""

    def parse(text: str) -> Path:
        path = Path(text)
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{option} must be a directory, got the file {text!r}")
        return path

    return parse


def _check_writable(parser: argparse.ArgumentParser, option: str, folder: Path) -> None:
    """Fail before any computing when ``folder`` cannot be created or written (a probe file is written and removed)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as error:
        parser.error(f"{option} {str(folder)!r}: cannot write there ({error.strerror or error})")


def _integer(name: str, minimum: int, maximum: int | None = None):
    """An argparse type: an integer in [minimum, maximum], with ``check_int``'s message naming ``name``."""

    def parse(text: str) -> int:
        try:
            return check_int(name, int(text), minimum=minimum, maximum=maximum)
        except ValueError as error:
            high = "inf" if maximum is None else str(maximum)
            raise argparse.ArgumentTypeError(
                str(error)
                if "must" in str(error)
                else f"{name} must be an integer in [{minimum}, {high}], got {text!r}"
            ) from None

    return parse


def _scheduler(text: str) -> str:
    try:
        return check_scheduler(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_run_options(sub: argparse.ArgumentParser) -> None:
    """What a run computes and where its reports go: --profile, --seed, --out."""
    sub.add_argument("--profile", choices=PROFILES, default=None, help="quick (default) or full")
    sub.add_argument(
        "--seed",
        type=_integer("--seed", 0, 2**63 - 1),
        default=0,
        help="the one seed of every random number (default 0)",
    )
    sub.add_argument(
        "--out",
        type=_folder("--out"),
        default=None,
        help="report folder (default reports/quick/ for the quick profile, reports/local/ for the full one; "
        "the committed reports/ only with --profile full spelled out or --replace-committed)",
    )


def _add_execution_options(sub: argparse.ArgumentParser) -> None:
    """Where and how the blocks run (no number depends on these): --scheduler, --workers, --task-paths, --cache,
    --cache-key."""
    default_name, default_workers = default_scheduler()
    sub.add_argument(
        "--scheduler",
        type=_scheduler,
        default=default_name,
        help=f"sync (in process), processes (local dask cluster) or tcp://host:port (default "
        f"{default_name}: one worker per available core; results do not depend on it)",
    )
    sub.add_argument(
        "--workers",
        type=_integer("--workers", 1, 1024),
        default=default_workers,
        help=f"worker processes for --scheduler processes, 1 to 1024 (default {default_workers}, the available cores)",
    )
    sub.add_argument(
        "--task-paths",
        type=_integer("--task-paths", 1),
        default=None,
        help="paths per worker task, rounded up to whole blocks of each design (default: one block; "
        "results do not depend on it)",
    )
    sub.add_argument("--cache", type=_folder("--cache"), default=None, help="block cache folder (default OUT/.cache)")
    sub.add_argument(
        "--cache-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret that authenticates a cache several writers share (default: CACHE/.key, created at "
        "first use, readable by its owner only)",
    )


def _add_safety_options(sub: argparse.ArgumentParser) -> None:
    """What a run may replace or reuse, and how it reports: --replace-other-profile, --replace-committed, --resume,
    --debug, --concurrent-studies."""
    default_concurrency = 2 if available_cores() > 1 else 1
    sub.add_argument(
        "--replace-other-profile",
        action="store_true",
        help="let this run replace reports of the other profile in OUT (refused otherwise: reports/ "
        "holds the committed full reports)",
    )
    sub.add_argument(
        "--replace-committed",
        action="store_true",
        help="let this run write into the committed reports/ without --profile full spelled out",
    )
    sub.add_argument("--resume", action="store_true", help="reuse the cached blocks of an interrupted run")
    sub.add_argument(
        "--debug", action="store_true", help="also show a fault's traceback (the exit status stays the same)"
    )
    sub.add_argument(
        "--concurrent-studies",
        type=_integer("--concurrent-studies", 1, 64),
        default=default_concurrency,
        help=f"studies run at a time on the same workers, 1 to 64 (default {default_concurrency}; "
        "results do not depend on it)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m convergence", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the studies")

    def common(sub: argparse.ArgumentParser) -> None:
        _add_run_options(sub)
        _add_execution_options(sub)
        _add_safety_options(sub)

    run = commands.add_parser("run", help="run some studies and write their reports")
    run.add_argument("studies", nargs="+", metavar="STUDY", help=f"one of: {', '.join(STUDIES)}")
    common(run)
    report = commands.add_parser(
        "report",
        help="run every study (but those over seeds, run by name: "
        f"{', '.join(n for n, s in STUDIES.items() if not s.in_report)}) and "
        "write all reports",
    )
    common(report)
    bench = commands.add_parser("bench", help="measure speed side by side; write OUT/performance.{md,json}")
    bench.add_argument("--out", type=_folder("--out"), default=Path("reports"), help="report folder (default reports/)")
    bench.add_argument("--repeats", type=_integer("--repeats", 1), default=3, help="timed runs per measurement")
    bench.add_argument("--paths", type=_integer("--paths", 1), default=4096, help="paths of the model F workload")
    bench.add_argument(
        "--breakdown",
        action="store_true",
        help="also profile every study's quick profile and report where its time goes (slow)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        for study in STUDIES.values():
            print(f"{study.name:20s} {study.summary}")
        return 0
    if args.command == "bench":
        _check_writable(parser, "--out", args.out)

        def say(name: str) -> None:
            print(f"measuring {name}", file=sys.stderr, flush=True)

        result = run_benchmarks(BenchConfig(paths=args.paths, repeats=args.repeats), progress=say)
        if args.breakdown:
            result["breakdown"] = study_breakdowns([n for n, s in STUDIES.items() if s.in_report], progress=say)
        print(f"performance: {write_performance(result, args.out)['md']}")
        return 0
    names = [n for n, s in STUDIES.items() if s.in_report] if args.command == "report" else args.studies
    unknown = [name for name in names if name not in STUDIES]
    if unknown:
        parser.error(f"STUDY must be one of {sorted(STUDIES)}, got {', '.join(map(repr, unknown))}")
    profile_given = args.profile is not None
    args.profile = args.profile or "quick"
    if args.out is None:
        args.out = DEFAULT_OUT[args.profile]
    if _committed(args.out) and not (args.replace_committed or (profile_given and args.profile == "full")):
        parser.error(
            f"--out {str(args.out)!r} holds the committed full-profile reports: regenerate them with --out "
            f"{args.out} --profile full spelled out, or pass --replace-committed (the full profile's default "
            f"folder is {DEFAULT_OUT['full']}/)"
        )
    cache_dir = args.cache if args.cache is not None else args.out / ".cache"
    _check_writable(parser, "--out", args.out)
    _check_writable(parser, "--cache", cache_dir)
    try:  # the cache's secret, made at first use, checked before any work
        cache_secret(cache_dir, args.cache_key)
    except (OSError, ValueError) as error:
        option = f"--cache {str(cache_dir)!r}" if args.cache_key is None else f"--cache-key {str(args.cache_key)!r}"
        parser.error(f"{option}: {getattr(error, 'strerror', None) or error}")
    try:
        with terminate_as_interrupt():
            return _locked_run(parser, args, names, cache_dir)
    except BaseException as error:  # noqa: BLE001 (every fault becomes its exit code and one sentence)
        if isinstance(error, SystemExit):
            raise
        fault = as_fault(error, args.scheduler, str(args.out), str(cache_dir))
        if args.debug:  # the traceback, then the same exit status as without --debug
            traceback.print_exc()
        if fault is None:
            fault = Fault(
                Exit.UNEXPECTED,
                f"unexpected {type(error).__name__}: {error} (a bug: rerun with --debug for the traceback)",
            )
        print(f"error: {fault}", file=sys.stderr)
        return int(fault.code)


def program(argv: Sequence[str] | None = None) -> NoReturn:
    """``python -m convergence``: ``main``, then exit with its status. A Ctrl-C or SIGTERM that comes after the run
    has ended (its reports written) is ignored, so it cannot turn the run's status into a signal's."""
    status = main(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(status)


def _locked_run(parser: argparse.ArgumentParser, args: argparse.Namespace, names: list[str], cache_dir: Path) -> int:
    """Under ``--out``'s lock: complete or clear what an interrupted run left there, refuse what this run must not
    replace, then run."""
    owner = f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {' '.join(sys.argv[1:])}"
    with exclusive_folder(args.out, owner):
        shared = Path(cache_dir).resolve() == Path(args.out).resolve()  # a cache other runs may be writing into
        try:
            done = recover_folder(args.out, stale_after=STALE_TEMPORARY_S if shared else None)
            done += recover_folder(cache_dir, stale_after=STALE_TEMPORARY_S)
        except OSError as error:
            raise Fault(Exit.BAD_INPUT, f"--out {str(args.out)!r}: {error}") from None
        for sentence in done:
            print(f"note: {sentence}", file=sys.stderr)
        earlier = {name: earlier_report(args.out, name) for name in names}
        other = [name for name, data in earlier.items() if data and data.get("profile") != args.profile]
        if other and not args.replace_other_profile:
            parser.error(
                f"--out {str(args.out)!r} holds reports of another profile than {args.profile} for "
                f"{', '.join(other)}, which this run would replace: write elsewhere (the default --out for "
                f"{args.profile} is {DEFAULT_OUT[args.profile]}/), or pass --replace-other-profile"
            )
        return _run_studies(args, names, progress_bars(sys.stderr.isatty()), cache_dir, earlier)


def _run_studies(
    args: argparse.Namespace, names: list[str], progress, cache_dir: Path, earlier: dict[str, dict | None]
) -> int:
    """Run ``names`` (longest first, ``args.concurrent_studies`` at a time), then write every report, the run record
    and the index as one set (``atomic_write_set``): an interrupted run writes nothing."""
    timeline, results = [], []
    start = time.perf_counter()

    def run_study(name: str):
        scope = {"study": name, "profile": args.profile, "seed": args.seed}
        began = time.perf_counter() - start
        with caching(cache_dir, scope, resume=args.resume, key_file=args.cache_key) as block_cache:
            result = STUDIES[name].run(args.profile, args.seed, progress)
        timeline.append({"study": name, "start_s": round(began, 1), "end_s": round(time.perf_counter() - start, 1)})
        return result, block_cache

    cores = available_cores()
    # longest first (by the last report of this profile in OUT), so the last study does not run alone
    order = sorted(names, key=lambda name: -previous_wall(earlier[name], args.profile, cores))
    # ref before the workers start: measured beside their start-up (imports) it came out 25% slow once
    reference_seconds()
    with scheduler(args.scheduler, args.workers, args.task_paths):
        for name, result, block_cache in _concurrently(run_study, order, args.concurrent_studies):
            print(
                f"{name}: {result.verdict} ({result.elapsed_s:.1f} s); blocks: {block_cache.computed} computed, "
                f"{block_cache.reused} reused from {cache_dir}",
                flush=True,
            )
            results.append(result)
    wall = time.perf_counter() - start
    workers = 1 if args.scheduler == "sync" else args.workers
    run = {
        "command": args.command,
        "profile": args.profile,
        "seed": args.seed,
        "studies": names,
        "wall_s": round(wall, 1),
        "scheduler": args.scheduler,
        "workers": workers,
        "concurrent_studies": args.concurrent_studies,
        "cores": cores,
        "timeline": sorted(timeline, key=lambda row: row["start_s"]),
    }
    files = {args.out / RUN_FILE: run_json(run)}
    for result in results:  # drawn here: plotting stays in the main thread
        files.update(study_files(result, args.out)[0])
    pending = {path.name: data for path, data in files.items()}
    index = args.out / INDEX_FILE
    files[index] = index_markdown(args.out, HEADLINES, pending).encode()
    try:
        atomic_write_set(files)  # Ctrl-C and SIGTERM held back from its commit point on
    except KeyboardInterrupt:
        if _reads(index) != files[index]:
            raise
        raise Fault(Exit.INTERRUPTED, f"interrupted after this run's reports were written (index: {index})") from None
    print(f"{args.command}: {len(names)} studies in {wall:.1f} s wall; reports in {args.out}/, index: {index}")
    return int(EXIT_OF_VERDICT[Verdict.combine([result.verdict for result in results])])


def _concurrently(run_study, names: list[str], threads: int):
    """Yield ``(name, *run_study(name))`` as studies finish, ``threads`` at a time (``runtime.as_finished``)."""
    for index, outcome in as_finished(run_study, names, threads):
        yield (names[index], *outcome)


EXIT_OF_VERDICT = {Verdict.PASS: Exit.PASSED, Verdict.FAIL: Exit.FAILED, Verdict.INCONCLUSIVE: Exit.INCONCLUSIVE}
DEFAULT_OUT = {"quick": Path("reports") / "quick", "full": Path("reports") / "local"}
COMMITTED = Path("reports")  # the committed full-profile reports, relative to the repository (or the working folder)
STALE_TEMPORARY_S = 3600.0  # a cache temporary this old is an interrupted write's (a shared cache has live ones)


def _reads(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _committed(out: Path) -> bool:
    """Whether ``out`` is the folder of the committed reports (``reports/`` of the working folder or of this
    checkout)."""
    here = Path(out).resolve()
    return here in {COMMITTED.resolve(), (Path(__file__).resolve().parent.parent / COMMITTED).resolve()}
