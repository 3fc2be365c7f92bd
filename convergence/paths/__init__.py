"""Paths: seeded nested Brownian increments (``brownian``), several depths on one path (``coupling``), depth
ladders (``design``), the Euler-Maruyama reference (``integrators``), the one runner of seeded blocks every
experiment uses (``runner``), forward runs (``simulate``) and token configurations (``configurations``).
"""
