"""Whole models built from :mod:`transformer_lite.nn`.

- :mod:`.encoder_decoder`: the encoder-decoder transformer of Vaswani et al. (2017) and greedy decoding;
- :mod:`.decoder_only`: the GPT-style language model with a key/value cache, and sampling;
- :mod:`.recurrent_lm`: the GRU language model it is compared with.
"""
