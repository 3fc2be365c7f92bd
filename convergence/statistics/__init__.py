"""Statistics: strong errors, fitted orders and slopes, bootstrap intervals, resolutions, verdicts (``estimators``),
and the Frechet distance of samples (``frechet``).
"""
