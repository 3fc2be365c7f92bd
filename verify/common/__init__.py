"""What both packages use: argument checks (``validation``), the verdict of a check (``verdicts``), atomic file
writes (``files``) and the versions a result was produced with (``versions``). The lowest layer of the project.
"""
