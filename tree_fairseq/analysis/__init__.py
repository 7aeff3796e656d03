"""Analysis of trained tree models: where the decoder's cross-attention goes (``attention``) and
a source tree drawn with its attention weights (``drawing``, needs matplotlib); and the table of
the speed and memory benchmarks (``benchmark_table``); whether a ``--batch-tokens text`` run trained on
fairseq's transformer's batches (``same_batches``); the seeds a comparison needs (``power``) and a
study's table of scores and training cost (``methods_table``). Not imported by ``--user-dir``; the scripts
``scripts/attention_mass.py``, ``scripts/draw_tree_attention.py``, ``scripts/benchmark_all.py`` and
``scripts/check_same_batches.py`` are their command lines."""
