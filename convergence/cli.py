"""Command line: ``python -m convergence {list, run, report}``.

    python -m convergence list
    python -m convergence run STUDY [STUDY ...] [--profile quick|full] [--seed N] [--out DIR]
    python -m convergence report [--profile quick|full] [--seed N] [--out DIR]

``run`` and ``report`` write ``DIR/<study>.{json,md,png}`` and refresh ``DIR/index.md`` (default
``reports/``). A progress bar is shown when standard error is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .report import write_index, write_study
from .studies import PROFILES, STUDIES
from .validation import check_int


def _seed(text: str) -> int:
    try:
        return check_int("--seed", int(text), minimum=0, maximum=2**63 - 1)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error) if "must" in str(error) else
                                         f"--seed must be an integer in [0, 2^63 - 1], got {text!r}") from None


def _out(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"--out must be a directory, got the file {text!r}")
    return path


def _progress_factory(enabled: bool):
    def factory(total: int, description: str):
        if not enabled:
            return lambda units: None
        from tqdm import tqdm

        bar = tqdm(total=total, desc=description, unit="step", leave=False, file=sys.stderr)

        def advance(units: int) -> None:
            bar.update(units)
            if bar.n >= total:
                bar.close()

        return advance

    return factory


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m convergence", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the studies")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--profile", choices=PROFILES, default="quick", help="quick (default) or full")
        sub.add_argument("--seed", type=_seed, default=0, help="the one seed of every random number (default 0)")
        sub.add_argument("--out", type=_out, default=Path("reports"), help="report folder (default reports/)")

    run = commands.add_parser("run", help="run some studies and write their reports")
    run.add_argument("studies", nargs="+", metavar="STUDY", help=f"one of: {', '.join(STUDIES)}")
    common(run)
    report = commands.add_parser("report", help="run every study and write all reports")
    common(report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        for study in STUDIES.values():
            print(f"{study.name:20s} {study.summary}")
        return 0
    names = list(STUDIES) if args.command == "report" else args.studies
    unknown = [name for name in names if name not in STUDIES]
    if unknown:
        parser.error(f"STUDY must be one of {sorted(STUDIES)}, got {', '.join(map(repr, unknown))}")
    progress = _progress_factory(sys.stderr.isatty())
    worst = 0
    for name in names:
        result = STUDIES[name].run(args.profile, args.seed, progress)
        paths = write_study(result, args.out)
        print(f"{name}: {result.verdict} ({result.elapsed_s:.1f} s) -> {paths['md']}")
        worst = max(worst, {"pass": 0, "inconclusive": 0, "fail": 1}[result.verdict])
    print(f"index: {write_index(args.out)}")
    return worst
