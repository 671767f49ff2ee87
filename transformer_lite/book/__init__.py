"""The book's helpers: what the chapters need besides the components.

- :mod:`.viz`: static figures (matplotlib); :mod:`.interactive`: plotly figures;
- :mod:`.explorers`: widgets for the reader to play with;
- :mod:`.exercises`: the exercise checkers;
- :mod:`.analysis`, :mod:`.jacobians`, :mod:`.depth`, :mod:`.ngram`: the measurements the chapters make.

Importing this package imports none of them (they need matplotlib, plotly or ipywidgets).
"""
