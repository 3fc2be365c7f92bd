"""How fast: the side-by-side bench (``benchmark``) of the workload's kernels (``workload``) against the peers
(``peers``), cost curves (``cost``), what a user's own checks cost at their defaults (``user_checks``), the variance
and cost factors of each variance-reduction lever tried (``variance``), where each study's time goes (``breakdown``)
and ``performance.md`` (``report``).
"""
