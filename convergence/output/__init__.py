"""Plain-data study results (``results``) and the reports written from them: JSON, Markdown, plots and the index
(``report``).
"""
