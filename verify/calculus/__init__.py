"""Ito calculus with the dimension d as a symbol: the tokens' span algebra (``algebra``), noise laws by their
second moments (``noise_laws``), the generator of particles with a common noise (``generator``), one normalised
step expanded in sqrt(h) (``expansion``), and brute force in explicit coordinates (``coordinates``,
``stratonovich``).
"""
