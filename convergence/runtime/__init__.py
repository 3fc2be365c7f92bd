"""Where work runs: blocks of paths, the unit of seeding and of work (``blocks``), and the schedulers (in process
or dask) with the resumable block cache (``execution``). The lowest layer: it imports nothing else from
``convergence``.
"""
