"""What the limits imply: the overlap diffusion of two tokens (``overlap``), its boundary exponents and critical
parameters (``boundary``), where it ends (``hitting``), model A's kernel constants (``kernels``) and two-point
motion (``two_point``), and the random quadratic form's overlap (``quadratic_form_overlap``).
"""
