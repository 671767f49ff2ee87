"""The components of a transformer, in the order of the book.

- :mod:`.masks`: causal and padding masks, boolean to additive, and :func:`.masks.attention_bias`,
  the one place a mask becomes the additive ``M`` the attention adds;
- :mod:`.attention`: scaled dot-product attention and multi-head attention (grouped-query and
  multi-query with ``n_kv_heads``);
- :mod:`.efficient_attention`: the tiled (memory-efficient, online-softmax) attention;
- :mod:`.normalization`: LayerNorm and RMSNorm;
- :mod:`.positional`: sinusoidal, learned and rotary (RoPE) positions;
- :mod:`.relative_position`: relative biases (Shaw et al., T5) and ALiBi;
- :mod:`.blocks`: the feed-forward networks (position-wise and SwiGLU) and the blocks (one for
  encoder and GPT-style, one decoder), each forward written as the post-norm and pre-norm formulas;
- :mod:`.recurrent`: the RNN and GRU that chapter 6 compares with attention;
- :mod:`.dtypes`: the dtype rules (half precision computes in float32; RoPE's angle dtype).

A GPT-style block reads in three files: :mod:`.blocks` (the feed-forward
network and :class:`TransformerBlock`), :mod:`.attention` (:class:`MultiHeadAttention`, which
takes its mask, the causal part included, from :func:`.masks.attention_bias`, and in the
Llama-style variant its rotary positions from :mod:`.positional`) and :mod:`.normalization`.
"""
