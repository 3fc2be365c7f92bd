"""``python -m convergence``: the command line (``convergence.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":  # dask's worker processes import this module without running it
    sys.exit(main())
