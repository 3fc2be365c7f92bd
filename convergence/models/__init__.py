"""The models: each layer map beside its limit SDE (``fedorov``, ``hybrid``, ``agazzi``, ``quadratic_form``,
``latent_diffusion``), the registry of those that declare their claims (``registry``), model F's exact in-law
samplers (``fedorov_reduced``, ``fedorov_overlap_chain``), model A's MLP fields (``mlp_field``), and what they share:
the interface and the claims a model declares (``protocols``), the laws of the common noise and the one factor of a
covariance (``noise``), softmax attention (``attention``) and the derived Ito drift of a normalised step
(``normalised_step``).
"""
