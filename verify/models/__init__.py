"""The models of MATH.md as normalised layer steps and their limit SDEs (``layer_steps``), a user's map expanded
(``user_maps``), model A's activations (``activations``) and the latent diffusion model's variance ODEs and
closed forms (``latent_variances``).
"""
