"""``python -m convergence``: the command line (``convergence._cli``)."""

import sys

if __name__ == "__main__":  # dask's worker processes import this module without running it
    try:
        from ._cli import program
    except KeyboardInterrupt:  # Ctrl-C while numpy, dask and the studies load: nothing started, exit 4 as documented
        print("error: interrupted before the run started: nothing was written", file=sys.stderr)
        sys.exit(4)
    program()
