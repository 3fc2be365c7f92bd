"""What both packages use: argument checks (``validation``), atomic file writes (``files``) and the versions a
result was produced with (``versions``). The lowest layer of the project.
"""
