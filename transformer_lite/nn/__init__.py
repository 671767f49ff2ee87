"""The components of a transformer, one concept per module, in the order of the book.

- :mod:`.masks`: causal and padding masks, boolean to additive;
- :mod:`.attention`: scaled dot-product attention, multi-head and grouped-query attention;
- :mod:`.efficient_attention`: the tiled (memory-efficient, online-softmax) attention;
- :mod:`.normalization`: LayerNorm and RMSNorm;
- :mod:`.feedforward`: the position-wise network and SwiGLU;
- :mod:`.positional`: sinusoidal, learned and rotary (RoPE) positions;
- :mod:`.relative_position`: relative biases (Shaw et al., T5) and ALiBi;
- :mod:`.blocks`: the residual sublayer and the blocks (one for encoder and GPT-style, one decoder);
- :mod:`.recurrent`: the RNN and GRU that chapter 6 compares with attention.

A GPT-style block reads in :mod:`.blocks` (:class:`TransformerBlock` and :func:`residual`),
:mod:`.attention` (:class:`GroupedQueryAttention`) and :mod:`.feedforward`, with its norms in
:mod:`.normalization`.
"""
