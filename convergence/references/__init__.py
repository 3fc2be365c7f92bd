"""References computed another way than the layer maps: the backward Kolmogorov equation of a diffusion on
[-1, 1] (``kolmogorov``).
"""
