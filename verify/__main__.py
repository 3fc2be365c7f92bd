"""``python -m verify [--out DIR]``: run every derivation and its cross-checks, print, write reports.

``python -m verify activation-table``: print model A's activation constants in the paper's table layout
(ReLU, sigmoid, tanh, SiLU x d in {5, 64, 128} x sigma_U = sigma_W in {0, 0.1}).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import sympy as sp

from ._analysis import activation_table, format_activation_table
from ._derivations import ALL, write


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify", description=__doc__)
    parser.add_argument(
        "command",
        nargs="?",
        default="derive",
        choices=("derive", "activation-table"),
        help="derive (default): all derivations and reports; activation-table: print the table",
    )
    parser.add_argument("--out", type=Path, default=Path("reports"), help="report folder (default reports/)")
    args = parser.parse_args(argv)
    if args.command == "activation-table":
        print(format_activation_table(activation_table()))
        return 0
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out must be a directory, got the file {str(args.out)!r}")
    start = time.perf_counter()
    derivations = []
    for derive in ALL:
        t0 = time.perf_counter()
        der = derive()
        derivations.append(der)
        print(f"\n=== {der.name}: {der.statement}  [{der.status}, {time.perf_counter() - t0:.1f} s]")
        for name, value in der.results.items():
            if isinstance(value, sp.Basic):
                print(
                    f"  {name}:\n"
                    + "\n".join("    " + line for line in sp.pretty(value, use_unicode=False).splitlines())
                )
            elif not isinstance(value, list):
                print(f"  {name}: {value}")
        for check in der.checks:
            print(f"  [{check['status']}] {check['name']} {check['detail']}")
    elapsed = round(time.perf_counter() - start, 1)
    paths = write(derivations, args.out, elapsed)
    failed = [d.name for d in derivations if d.status != "verified"]
    print(f"\n{len(derivations) - len(failed)}/{len(derivations)} derivations verified in {elapsed} s -> {paths['md']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
