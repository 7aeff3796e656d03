#!/usr/bin/env python3
"""Share of the decoder's cross-attention on source nodes vs leaves per decoder layer: the command line of :mod:`tree_fairseq.analysis.attention` (``--help`` for its options)."""

from tree_fairseq.analysis.attention import main

if __name__ == "__main__":
    main()
