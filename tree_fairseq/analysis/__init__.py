"""Analysis of trained tree models: where the decoder's cross-attention goes (``attention``) and
a source tree drawn with its attention weights (``drawing``, needs matplotlib); and the table of
the speed and memory benchmarks (``benchmark_table``); whether a ``--batch-tokens text`` run trained on
fairseq's transformer's batches (``same_batches``); the seeds a comparison needs (``power``), a
study's table of scores and training cost (``methods_table``) and the source with every node's
children reversed, to probe whether a model reads word order (``reversed_children``). Not imported
by ``--user-dir``; the scripts ``scripts/attention_mass.py``, ``scripts/draw_tree_attention.py``,
``scripts/benchmark_all.py``, ``scripts/check_same_batches.py`` and ``scripts/reverse_children.py``
are their command lines."""
