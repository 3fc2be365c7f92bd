"""Where work runs: blocks of paths, the unit of seeding and of work (``blocks``), the schedulers (in process or
dask) with the resumable block cache (``execution``), and the explicit identity of a configuration that keys it
(``identity``). The lowest layer: it imports nothing else from ``convergence``.
"""
