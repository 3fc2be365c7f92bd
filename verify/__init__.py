"""The symbolic and rigorous side: derivations (sympy), certified numbers (mpmath, python-flint)."""
