"""Paths: seeded nested Brownian increments (``brownian``), several depths on one path (``coupling``), depth
ladders (``design``), the Euler-Maruyama reference (``integrators``), forward runs on seeded blocks
(``simulate``) and token configurations (``configurations``).
"""
