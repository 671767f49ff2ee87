"""Published weights loaded into the package's modules, from files shipped as Python packages.

- the files are found by :func:`transformer_lite.files.installed_files`, the one finder of files
  in installed distributions;
- :mod:`.minilm`: all-MiniLM-L6-v2 (a BERT encoder) and its WordPiece tokenizer;
- :mod:`.smollm2`: SmolLM2-135M (a Llama-style decoder) from GGUF, and its BPE tokenizer.
"""
