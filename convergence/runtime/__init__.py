"""Where work runs: blocks of paths (the unit of seeding and of work), schedulers (in process or dask) and the
resumable block cache. The lowest layer: it imports nothing else from ``convergence``.
"""
