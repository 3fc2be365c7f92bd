"""Numbers asserted as thresholds or signs, certified: beta_c with ball arithmetic (``certified``), the energy's
decay rate (``synchronisation``) and the latent diffusion stopping problem (``latent_stopping``).
"""
