"""How fast: the side-by-side bench and its peers (``benchmark``), cost curves (``cost``), where each study's time
goes (``breakdown``) and ``performance.md`` (``report``).
"""
