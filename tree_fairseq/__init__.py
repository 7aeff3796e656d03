"""tree_fairseq: tree-aware translation for fairseq.

``--user-dir tree_fairseq`` imports this package, which registers the tasks
and models below and makes fairseq checkpoints loadable on torch >= 2.6.
"""

from tree_fairseq import checkpoint_compat  # noqa: F401  (before any checkpoint is read)
from tree_fairseq import models, tasks  # noqa: F401
