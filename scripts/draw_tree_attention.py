#!/usr/bin/env python3
"""Draw one source tree with the decoder's cross-attention weights on it (PNG): the command line of :mod:`tree_fairseq.analysis.drawing` (``--help`` for its options)."""

from tree_fairseq.analysis.drawing import main

if __name__ == "__main__":
    main()
