"""How fast: the side-by-side bench and its peers (``benchmark``), cost curves (``cost``), what a user's own checks
cost at their defaults (``user_checks``), where each study's time goes (``breakdown``) and ``performance.md``
(``report``).
"""
