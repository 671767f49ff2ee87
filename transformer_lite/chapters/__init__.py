"""The book's helpers: what the chapters need besides the components.

- :mod:`.viz`: static figures (matplotlib); :mod:`.interactive`: plotly figures for the static book;
  both packages hold one module per chapter, named after its notebook (``viz/ch2_causal_masks.py``
  draws chapter 2's masks), and re-export every figure (``viz.plot_mask``);
- :mod:`.exercises`: the exercise checkers, one module per chapter in the same way
  (``exercises/ch3_positional_encodings.py``), all importable from ``transformer_lite.chapters.exercises``;
- :mod:`.explorers`: widgets for the reader to play with (they need a live kernel);
- the measurements the chapters make: :mod:`.analysis` (what attention heads do), :mod:`.jacobians`
  (how far a gradient reaches), :mod:`.depth` (gradient norms per layer), :mod:`.measure` (peak memory
  of a call), :mod:`.ngram` (character n-gram baselines).

Importing this package imports none of them (they need matplotlib, plotly or ipywidgets).
"""
