"""tree_fairseq: tree-aware translation for fairseq.

``--user-dir tree_fairseq`` imports this package, which registers the tasks
and models below, makes fairseq checkpoints loadable on torch >= 2.6, lets
a run that stops mid-epoch exit without aborting (``compat.prefetch_exit``) and
prints what the plugin refuses inside fairseq's commands as one line
(``errors``).

The console scripts start through ``tree_fairseq_console``, which imports the
package without registering anything: ``--help`` and the parsers that need no
model then start without fairseq and torch, and a script that needs fairseq
calls :func:`register` itself.
"""

import sys


def register() -> None:
    """Register the plugin's tasks and models with fairseq, allow fairseq's
    checkpoint classes under torch's safe loader, and let a run stopped
    mid-epoch exit cleanly, and say the plugin's refusals in one line (idempotent)."""
    from tree_fairseq import errors
    errors.install()
    from tree_fairseq.compat import checkpoints  # noqa: F401  (before any checkpoint is read)
    from tree_fairseq.compat import prefetch_exit  # noqa: F401
    from tree_fairseq import models, tasks  # noqa: F401


if "tree_fairseq_console" not in sys.modules:
    register()
