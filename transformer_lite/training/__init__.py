"""Data, toy tasks and the training loop.

- :mod:`.data`: the Shakespeare corpus (character vocabulary, train/validation split, random batches);
- :mod:`.toy_tasks`: the small tasks of chapters 4 to 6 (reversal, histogram, delayed recall);
- :mod:`.train`: the language-model training loop and its command line,
  ``python -m transformer_lite.training.train``;
- :mod:`.stored`: training runs and experiments that take minutes, done once, stored, and checked
  by repeating their beginning on every later execution of a chapter.
"""
