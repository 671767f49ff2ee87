"""Project-wide pytest set-up.

``tests/nbval_tolerance.py`` makes nbval compare notebook outputs with stated tolerances
(integers and text exactly, floats within rtol/atol plus one unit in the last printed
digit, figures by the fraction of changed pixels): see its docstring. ``pytester`` runs
nbval on small notebooks to show that each kind of comparison fails on a real change.
"""

pytest_plugins = ["tests.nbval_tolerance", "pytester"]
