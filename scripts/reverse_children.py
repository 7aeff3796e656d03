#!/usr/bin/env python3
"""The source with the children of every tree node in reverse order, to probe whether a trained
model reads word order: the command line of :mod:`tree_fairseq.analysis.reversed_children`
(``--help`` for its options)."""

import sys

from tree_fairseq.analysis.reversed_children import main

if __name__ == "__main__":
    sys.exit(main())
