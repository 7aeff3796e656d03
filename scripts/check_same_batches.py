#!/usr/bin/env python3
"""Whether a same-batch control trained on fairseq's transformer's batches: the command line of :mod:`tree_fairseq.analysis.same_batches` (``--help`` for its options)."""

import sys

from tree_fairseq.analysis.same_batches import main

if __name__ == "__main__":
    sys.exit(main())
