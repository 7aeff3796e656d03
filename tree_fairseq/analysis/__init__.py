"""Analysis of trained tree models: where the decoder's cross-attention goes (``attention``) and
a source tree drawn with its attention weights (``drawing``, needs matplotlib). Not imported by
``--user-dir``; the scripts ``scripts/attention_mass.py`` and ``scripts/draw_tree_attention.py``
are their command lines."""
