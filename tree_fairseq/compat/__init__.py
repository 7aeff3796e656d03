"""fairseq 0.12 on today's torch: the workarounds the plugin installs when it is imported.

- :mod:`.checkpoints`: fairseq's checkpoints load under torch's safe unpickler (torch >= 2.6), and
  the plugin's tools read a checkpoint with a one-line error for a file that is none.
- :mod:`.prefetch_exit`: a run stopped mid-epoch exits with status 0 instead of aborting in
  fairseq's prefetching thread.

Each module does its work on import; :func:`tree_fairseq.register` imports both before fairseq
reads a checkpoint or starts a run. Nothing here knows about trees.
"""
