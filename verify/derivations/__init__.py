"""Every derivation with its checks (``catalogue``), the Monte Carlo cross-check of each generator against a
discrete layer written here from MATH.md (``crosscheck``) and ``reports/symbolic.{md,json}`` (``symbolic_report``).
"""
