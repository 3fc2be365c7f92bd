"""Experiments, each for any model that provides what it needs: strong and weak convergence (``strong``,
``strong_low_rank``, ``weak``), local consistency (``local``), plausible wrong claims (``mutants``), two-point
exponents (``exponents``), the interaction energy (``energy``), propagation of chaos (``chaos``), the SPDE
(``mean_field``), commuting limits (``commute``), width (``width``, ``width_depth``) and the latent diffusion
sampler's nested runs (``latent_sampling``).
"""
