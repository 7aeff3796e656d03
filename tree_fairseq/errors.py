"""One line, not a traceback, for what the plugin refuses inside fairseq's own commands.

fairseq-train, fairseq-generate and fairseq-interactive import the plugin (``--user-dir``) and call
its tasks and models, whose refusals (a tree model with ``--task translation``, a data-bin without
trees, a node dictionary that does not match, a ``--max-tokens`` below a sentence's leaves plus
nodes, ...) are exceptions with a message that says what to do. Uncaught, Python prints them as a
traceback whose last line is that message. :func:`install` puts an exception hook in front of
Python's: an exception the plugin itself raised (``ValueError``, which :class:`TreeError` is, or
``OSError``, with the innermost frame of its traceback in this package) is printed as
``PROG: error: MESSAGE`` and the command exits with status 1; every other exception, and every
exception when ``TREE_FAIRSEQ_TRACEBACK=1`` is set, is left to the hook that was there before (a
programming error keeps its traceback).
"""

import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REFUSALS = (ValueError, OSError)


def raised_by_plugin(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is this package's code."""
    frame = error.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    return os.path.abspath(frame.tb_frame.f_code.co_filename).startswith(PACKAGE_DIR + os.sep)


def one_line(error: BaseException) -> str:
    """``PROG: error: MESSAGE``, PROG the command's name."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    message = str(error) or type(error).__name__
    return f"{program}: error: {message}"


def _hook(kind, error, traceback, previous):
    if (issubclass(kind, REFUSALS) and raised_by_plugin(error)
            and os.environ.get("TREE_FAIRSEQ_TRACEBACK", "") in ("", "0")):
        print(one_line(error), file=sys.stderr)
        return
    previous(kind, error, traceback)


def install() -> None:
    """Put the hook in front of the current one (once)."""
    if getattr(sys.excepthook, "tree_fairseq", False):
        return
    previous = sys.excepthook

    def hook(kind, error, traceback):
        _hook(kind, error, traceback, previous)

    hook.tree_fairseq = True
    sys.excepthook = hook
