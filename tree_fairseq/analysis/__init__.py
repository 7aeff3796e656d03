"""Analysis of trained tree models: where the decoder's cross-attention goes (``attention``) and
a source tree drawn with its attention weights (``drawing``, needs matplotlib); and the table of
the speed and memory benchmarks (``benchmark_table``). Not imported by ``--user-dir``; the scripts
``scripts/attention_mass.py``, ``scripts/draw_tree_attention.py`` and ``scripts/benchmark_all.py``
are their command lines."""
